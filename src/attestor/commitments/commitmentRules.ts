/**
 * `POST /v1/commitment` (docs/attestor.md §2 CommitmentResponse, §4 rules 1-5): a creator names a
 * platform account, the attestor derives its salt from its pepper, draws a fresh nonce and returns
 * the handle commitment the creator launches with (docs/protocol.md §2).
 *
 * A numeric `userId` is free and needs nothing outside this process. A `handle` alone is a lookup
 * (rule 1), after the refusals of rules 3-4 (which come first, before any payment step): with
 * `HANDLE_LOOKUP_MODE=off` it is 400 `unsupported` (rule 5); with `paid` it is bought over x402
 * (src/attestor/lookups/payments/paidLookup.ts), with `free` (local development) resolved without payment
 * (src/attestor/lookups/HandleLookups.ts): not found is 404 `not_found`, a directory that cannot
 * say 503 `unavailable`. Numeric community and fedsocial ids sent as `handle` are taken
 * as the `userId`. When both `userId` and `handle` are given, `userId` wins: no lookup, and the
 * handle is ignored.
 *
 * Privacy: the user id, handle, salt, nonce and commitment appear only in the response; logs and
 * metrics see the route and the outcome code.
 */
import { randomFillSync } from "node:crypto"
import { Effect, Either, Schema } from "effect"
import { bytesToHex, type Hex } from "viem"
import {
  type CommitmentRequest,
  CommitmentResponse,
  CommitmentResponseFields,
  isUserId,
  type LookupPlatform,
  type Platform,
  platformIdOf
} from "../../../schema/attestor.js"
import {
  BadRequest,
  type NotFound,
  type PaymentFailed,
  type PaymentRequired,
  type RateLimited,
  type Unavailable,
  Unsupported
} from "../../../schema/errors.js"
import {
  attestorSalt,
  handleCommitment,
  type Keccak256,
  userIdHash,
  viemKeccak256
} from "../../../schema/ids.js"
import type { Signer } from "../../keys/Signer.js"
import type { CommitmentError } from "./api.js"

// ---------------------------------------------------------------------------------------------
// Handles (rules 3-4)
// ---------------------------------------------------------------------------------------------

/** What a `handle` asks for, decided from its text alone. */
export type HandleRequest =
  /** A numeric id sent as `handle` where docs/attestor.md takes it as the id: free, no lookup. */
  | { readonly _tag: "UserId"; readonly userId: string }
  /** A well-formed handle of a lookup platform: needs a (paid) lookup. */
  | { readonly _tag: "Lookup"; readonly platform: LookupPlatform; readonly handle: string }

const DIGITS = /^[0-9]+$/

/** Registered handle syntax of the lookup platforms, after an optional leading `@`. */
const handleSyntax: Readonly<Record<LookupPlatform, { readonly pattern: RegExp; readonly rule: string }>> = {
  microblog: { pattern: /^[A-Za-z0-9_]{1,15}$/, rule: "1 to 15 letters, digits or underscores" },
  codehost: {
    pattern: /^(?=.{1,39}$)[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*$/,
    rule: "1 to 39 letters, digits or single inner hyphens"
  },
  fedsocial: {
    pattern: /^[a-z0-9][a-z0-9-]{0,15}$/,
    rule: "a registered name of 1 to 16 lowercase letters, digits or hyphens, not starting with a hyphen"
  }
}

export const MESSENGER_HANDLE_REFUSAL =
  "messenger handles cannot be looked up: send the account's numeric user id as userId"
export const COMMUNITY_HANDLE_REFUSAL =
  "community handles cannot be looked up: send the account's numeric user id as userId. To copy it, " +
  "turn on Developer Mode (User Settings > Advanced), then right-click your name or avatar and choose Copy User ID"
export const FEDSOCIAL_ETH_REFUSAL =
  "fedsocial names ending in .eth cannot be looked up: send the account's numeric id (fid) as userId"
export const LOOKUP_UNSUPPORTED =
  "handle lookups are not available on this attestor: send the account's numeric userId"

const numericId = (handle: string): Either.Either<HandleRequest, BadRequest> =>
  isUserId(handle)
    ? Either.right({ _tag: "UserId", userId: handle })
    : Either.left(
        new BadRequest({ message: "handle: a numeric id must be 1 to 32 digits without leading zeros" })
      )

const lookup = (platform: LookupPlatform, handle: string): Either.Either<HandleRequest, BadRequest> => {
  const bare = handle.startsWith("@") ? handle.slice(1) : handle
  const { pattern, rule } = handleSyntax[platform]
  return pattern.test(bare)
    ? Either.right({ _tag: "Lookup", platform, handle: bare })
    : Either.left(new BadRequest({ message: `handle: not a valid ${platform} handle (expected ${rule})` }))
}

/**
 * Rules 3-4: messenger and community handles, fedsocial `.eth` names and malformed handles are
 * refused (400 `bad_request`), numeric community and fedsocial ids are the user id; anything
 * else is a lookup. No message repeats the handle.
 */
export const classifyHandle = (
  platform: Platform,
  handle: string
): Either.Either<HandleRequest, BadRequest> => {
  switch (platform) {
    case "messenger":
      return Either.left(new BadRequest({ message: MESSENGER_HANDLE_REFUSAL }))
    case "community":
      return DIGITS.test(handle)
        ? numericId(handle)
        : Either.left(new BadRequest({ message: COMMUNITY_HANDLE_REFUSAL }))
    case "fedsocial":
      if (DIGITS.test(handle)) return numericId(handle)
      if (handle.toLowerCase().endsWith(".eth"))
        return Either.left(new BadRequest({ message: FEDSOCIAL_ETH_REFUSAL }))
      return lookup(platform, handle)
    case "microblog":
    case "codehost":
      return lookup(platform, handle)
  }
}

/**
 * What a request commits to: its user id, or a handle to look up; or its refusal. `userId` wins over
 * `handle`.
 */
export const requestedUser = (request: CommitmentRequest): Either.Either<HandleRequest, BadRequest> => {
  if (request.userId !== undefined) return Either.right({ _tag: "UserId", userId: request.userId })
  if (request.handle === undefined)
    // The schema already requires one of them; kept so this function stands on its own.
    return Either.left(new BadRequest({ message: "userId or handle is required" }))
  return classifyHandle(request.platform, request.handle)
}

export type HandleLookupError =
  | Unsupported
  | NotFound
  | Unavailable
  | PaymentRequired
  | PaymentFailed
  | RateLimited

/**
 * The answer a looked-up handle gets: made once from its user id, and in paid mode kept with the
 * payment so the same payment for the same request is given it again (docs/attestor.md §4, replay).
 */
export interface LookupAnswer<A> {
  /** The request it answers, as its route and decoded body: a replay must be of the same. */
  readonly request: { readonly route: string; readonly body: unknown }
  /** The answer for the handle's user id (a fresh nonce, a signature, a record). */
  readonly make: (userId: string) => Effect.Effect<A, Unavailable>
  /** The answer as kept (JSON text) and read back. */
  readonly encode: (answer: A) => string
  readonly decode: (text: string) => Either.Either<A, unknown>
}

/**
 * Resolves a handle to its user id, as the lookup mode allows, and answers with `answer`;
 * `paymentSignature` is the request's `PAYMENT-SIGNATURE` header, if any.
 */
export type HandleLookup = <A>(
  platform: LookupPlatform,
  handle: string,
  paymentSignature: string | undefined,
  answer: LookupAnswer<A>
) => Effect.Effect<WithPayment<A>, HandleLookupError>

/** `HANDLE_LOOKUP_MODE=off`: no handle is looked up (rule 5: send the numeric userId). */
export const noLookups: HandleLookup = () => Effect.fail(new Unsupported({ message: LOOKUP_UNSUPPORTED }))

/** An answer and the `PAYMENT-RESPONSE` header that goes with it when a lookup was paid for. */
export interface WithPayment<A> {
  readonly body: A
  readonly paymentResponse: string | undefined
}

// ---------------------------------------------------------------------------------------------
// The commitment (rule 2, docs/protocol.md §2)
// ---------------------------------------------------------------------------------------------

export interface CommitmentKeys {
  readonly pepper: Uint8Array
  /** The BindOwner signing address. */
  readonly attestor: CommitmentResponse["attestor"]
  /**
   * The signing key's public key, uncompressed (65 bytes, `0x04…`): the form viem's
   * `publicKeyToAddress` takes, so a client can check it against `attestor`. Hints are sealed to
   * `hintPublicKey` of `GET /v1/info`, a different key.
   */
  readonly attestorPubKey: CommitmentResponse["attestorPubKey"]
  /** The keccak-256 the commitments are computed with (the services pass src/chain/keccak.ts's). */
  readonly keccak256: Keccak256
}

const decodeKeyFields = Schema.decodeSync(CommitmentResponseFields.pick("attestor", "attestorPubKey"))

/** The key fields are checked once here, not in every response. */
export const commitmentKeys = (
  signer: Pick<Signer, "address" | "publicKey">,
  pepper: Uint8Array,
  keccak256: Keccak256 = viemKeccak256
): CommitmentKeys => ({
  pepper,
  keccak256,
  ...decodeKeyFields({ attestor: signer.address, attestorPubKey: signer.publicKey })
})

/**
 * A 32-byte hash or nonce this module computed: `keccak256`, the salt's HMAC-SHA256 and
 * `bytesToHex` of 32 bytes all give lowercase `0x` + 64 hex digits, the form `Bytes32` brands.
 * Not decoded per response: `POST /v1/commitment` writes its answer without encoding it again
 * (src/attestor/commitments/handlers.ts), on the strength of this form; `/v1/public-handle`
 * encodes its own, which checks every field.
 */
const computed = (hash: Hex) => hash as CommitmentResponse["nonce"]

/** The response for `(platform, userId)` with a given nonce; pure, so tests can fix the nonce. */
export const commitmentFor = (
  keys: CommitmentKeys,
  platform: Platform,
  userId: string,
  nonce: Hex
): CommitmentResponse => {
  const platformId = platformIdOf(platform)
  const salt = attestorSalt(keys.pepper, platformId, userId)
  const idHash = userIdHash(userId, keys.keccak256)
  return {
    platform,
    platformId,
    userId,
    userIdHash: computed(idHash),
    nonce: computed(nonce),
    attestorSalt: computed(salt),
    handleCommitment: computed(handleCommitment(platformId, idHash, salt, nonce, keys.keccak256)),
    kind: 2,
    attestor: keys.attestor,
    attestorPubKey: keys.attestorPubKey
  }
}

const NONCE_BYTES = 32
/**
 * Nonces are cut from a buffer the system's generator fills 128 nonces at a time: one call into
 * OpenSSL per 128 commitments instead of one each (about 15 µs of a request's CPU under load,
 * bench/PROFILE.md). Each byte is used once and zeroed once taken; the same generator as
 * `randomBytes`, as Node's own `randomUUID` pools its entropy.
 */
const noncePool = Buffer.alloc(NONCE_BYTES * 128)
let noncePoolOffset = noncePool.length

const takeNonceBytes = (): Hex => {
  if (noncePoolOffset === noncePool.length) {
    randomFillSync(noncePool)
    noncePoolOffset = 0
  }
  const bytes = noncePool.subarray(noncePoolOffset, noncePoolOffset + NONCE_BYTES)
  noncePoolOffset += NONCE_BYTES
  const nonce = bytesToHex(bytes)
  bytes.fill(0)
  return nonce
}

/** 32 fresh random bytes: the only secret that hides the user id in the commitment. */
export const freshNonce: Effect.Effect<Hex> = Effect.sync(takeNonceBytes)

const encodeCommitment = Schema.encodeSync(CommitmentResponse)
const decodeCommitment = Schema.decodeUnknownEither(CommitmentResponse)

/** A commitment as a paid lookup keeps it (`LookupAnswer`). */
const commitmentAnswer = (
  keys: CommitmentKeys,
  body: CommitmentRequest
): LookupAnswer<CommitmentResponse> => ({
  request: { route: "/v1/commitment", body },
  make: (userId) => Effect.map(freshNonce, (nonce) => commitmentFor(keys, body.platform, userId, nonce)),
  encode: (answer) => JSON.stringify(encodeCommitment(answer)),
  decode: (text) =>
    Either.flatMap(
      Either.try(() => JSON.parse(text) as unknown),
      decodeCommitment
    )
})

/**
 * Refuses or commits a decoded request (a fresh nonce per call), looking handles up with `lookup`
 * (paid with `paymentSignature` in paid mode). A numeric user id never touches the payment.
 */
export const commitRequest =
  (keys: CommitmentKeys, lookup: HandleLookup = noLookups) =>
  (
    body: CommitmentRequest,
    paymentSignature?: string
  ): Effect.Effect<WithPayment<CommitmentResponse>, CommitmentError> =>
    Effect.flatMap(requestedUser(body), (user) =>
      user._tag === "UserId"
        ? Effect.map(freshNonce, (nonce) => ({
            body: commitmentFor(keys, body.platform, user.userId, nonce),
            paymentResponse: undefined
          }))
        : lookup(user.platform, user.handle, paymentSignature, commitmentAnswer(keys, body))
    )
