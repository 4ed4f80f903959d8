/**
 * `POST /v1/public-handle` `{ platform: "microblog" | "codehost", handle }` (docs/attestor.md §2
 * PublicHandle response, §4; docs/protocol.md §3 PublicHandle domain, §10 "Public handle"): the handle
 * resolved to its user id (a handle lookup, paid like one, under the lookup mode's rules: 400
 * `unsupported` with `off`, 402 in paid mode without a good payment, 404 `not_found`, 503
 * `unavailable`), a fresh commitment exactly as `/v1/commitment` makes
 * it, and the attestor's EIP-712 `PublicHandle(platformId, userId, handle, issuedAt)` signature over
 * the public-handle domain of this chain. The commitment is recorded as public
 * (`PublicCommitments`), so the escrows launched to it are `public` in `/v1/escrows` and `/v1/bind`.
 *
 * Nothing of the handle, user or commitment reaches a log line or a metric.
 */
import { Effect, Either, Schedule, Schema } from "effect"
import { type PublicHandleRequest, PublicHandleResponse } from "../../../schema/attestor.js"
import { publicHandleDomain, publicHandleTypes } from "../../../schema/eip712.js"
import { BadRequest, type Unavailable } from "../../../schema/errors.js"
import { nowSeconds } from "../../clock.js"
import { type Signer, signTypedDataWith } from "../../keys/Signer.js"
import {
  type CommitmentKeys,
  classifyHandle,
  commitmentFor,
  freshNonce,
  type HandleLookup,
  type WithPayment
} from "../commitments/commitmentRules.js"
import type { PublicHandleError } from "./api.js"
import type { PublicCommitmentsShape } from "./PublicCommitments.js"

export interface PublicHandleConfig {
  readonly keys: CommitmentKeys
  readonly signer: Signer
  readonly lookup: HandleLookup
  readonly chainId: Effect.Effect<number, Unavailable>
  readonly publics: PublicCommitmentsShape
}

const encodePublicHandle = Schema.encodeSync(PublicHandleResponse)
const decodePublicHandle = Schema.decodeUnknownEither(PublicHandleResponse)

/**
 * The attestation for `handle`'s user id: a fresh commitment, signed, recorded as public before it
 * is answered (an escrow launched to it must never read as private).
 */
const attest =
  (config: PublicHandleConfig, body: PublicHandleRequest, handle: string, chainId: number) =>
  (userId: string): Effect.Effect<PublicHandleResponse, Unavailable> =>
    Effect.gen(function* () {
      const commitment = commitmentFor(config.keys, body.platform, userId, yield* freshNonce)
      const issuedAt = BigInt(yield* nowSeconds)
      const attestation = yield* signTypedDataWith(config.signer, {
        domain: publicHandleDomain(chainId),
        types: publicHandleTypes,
        primaryType: "PublicHandle",
        message: { platformId: commitment.platformId, userId, handle, issuedAt }
      })
      // Tried a few times: in paid mode the payment is about to be taken.
      yield* config.publics
        .record(commitment.handleCommitment, commitment.platformId, Number(issuedAt))
        .pipe(Effect.retry(Schedule.intersect(Schedule.spaced("100 millis"), Schedule.recurs(3))))
      return {
        ...commitment,
        platform: body.platform,
        handle: handle as PublicHandleResponse["handle"],
        issuedAt,
        attestation: attestation as PublicHandleResponse["attestation"]
      }
    })

export const issuePublicHandle =
  (config: PublicHandleConfig) =>
  (
    body: PublicHandleRequest,
    paymentSignature?: string
  ): Effect.Effect<WithPayment<PublicHandleResponse>, PublicHandleError> =>
    Effect.gen(function* () {
      const classified = classifyHandle(body.platform, body.handle)
      if (Either.isLeft(classified)) return yield* Effect.fail(classified.left)
      if (classified.right._tag !== "Lookup")
        // microblog and codehost handles are always lookups; kept so this stands on its own.
        return yield* Effect.fail(new BadRequest({ message: "handle: expected a handle, not a numeric id" }))
      const handle = classified.right.handle
      // Read before the lookup, which may take a payment.
      const chainId = yield* config.chainId
      // In paid mode the attestation is made and kept before the payment settles, and given again
      // to the same payment for the same request (docs/attestor.md §4, replay).
      return yield* config.lookup(body.platform, handle, paymentSignature, {
        request: { route: "/v1/public-handle", body },
        make: attest(config, body, handle, chainId),
        encode: (answer) => JSON.stringify(encodePublicHandle(answer)),
        decode: (text) =>
          Either.flatMap(
            Either.try(() => JSON.parse(text) as unknown),
            decodePublicHandle
          )
      })
    })
