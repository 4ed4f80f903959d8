/**
 * Binding with a committee (docs/attestor.md "Writing a client"): the vault wants
 * `attestorThreshold` distinct attestor signatures over one `BindOwner`, so a client logs in at
 * each of the k attestors, sends each the same deadline and merges their answers into the sorted
 * list `proposeBind` checks (contracts/FeeVault.sol: strictly ascending signers, each a registered
 * attestor).
 *
 * Browser-safe: only `fetch` and Web Crypto. Imported through `fee-vault-services/client`; the
 * helpers of src/client.ts it uses are read only inside functions, so the two modules importing
 * each other is harmless.
 */
import { Data, Effect, Either, Schema } from "effect"
import { type Hex, recoverTypedDataAddress } from "viem"
import {
  type AttestorInfo,
  BindRequest,
  type BindSignature,
  type LoginChallenge,
  type LoginSecret,
  type OAuthCallbackPlatform,
  OAuthStartRequest,
  type SessionToken,
  Url
} from "../schema/attestor.js"
import { vaultDomain, vaultTypes } from "../schema/eip712.js"
import { errorCatalog, isApiError } from "../schema/errors.js"
import { Address, type Bytes32, CompressedPublicKey } from "../schema/primitives.js"
import { ProposeBindRequest, RegisterHandle } from "../schema/relayer.js"
import { attestorFetchClient, bindsFor, newLoginSecret } from "./client.js"

// ---------------------------------------------------------------------------------------------
// The committee
// ---------------------------------------------------------------------------------------------

export interface CommitteeMember {
  readonly url: string
  readonly address: Address
  readonly hintPublicKey: typeof CompressedPublicKey.Type
}

/** The attestors a client asks, in the deployment file's order, and how many must sign. */
export interface Committee {
  readonly members: ReadonlyArray<CommitteeMember>
  readonly threshold: number
}

/** A deployment file that names no usable committee. */
export class CommitteeUnreadable extends Data.TaggedError("CommitteeUnreadable")<{
  readonly reason: string
}> {
  override get message() {
    return `no committee in the deployment file: ${this.reason}`
  }
}

const CommitteeMemberEntry = Schema.Struct({ url: Url, address: Address, hintPublicKey: CompressedPublicKey })

/** The committee fields of a deployment file (docs/protocol.md §8); older files have only the last two. */
const CommitteeFields = Schema.Struct({
  attestors: Schema.optional(Schema.Array(CommitteeMemberEntry)),
  attestorThreshold: Schema.optional(Schema.Int.pipe(Schema.positive())),
  attestorUrl: Schema.optional(Url),
  hintPublicKey: Schema.optional(CompressedPublicKey)
})

const unreadable = (reason: string) => Effect.fail(new CommitteeUnreadable({ reason }))

/**
 * The committee of a parsed deployment file (`.devnet/deployment.json`): its `attestors` and
 * `attestorThreshold`. An older file, with one `attestorUrl` and `hintPublicKey`, is a committee of
 * one at threshold 1; it never named the attestor's address, so that is read from the member's
 * `GET /v1/info`.
 */
export const committeeOf = (file: unknown): Effect.Effect<Committee, CommitteeUnreadable> =>
  Effect.gen(function* () {
    const fields = yield* Schema.decodeUnknown(CommitteeFields)(file).pipe(
      Effect.mapError((error) => new CommitteeUnreadable({ reason: error.message }))
    )
    const threshold = fields.attestorThreshold ?? 1
    if (fields.attestors !== undefined) return yield* committeeOfMembers(fields.attestors, threshold)
    if (fields.attestorUrl === undefined || fields.hintPublicKey === undefined)
      return yield* unreadable("it has neither attestors nor attestorUrl and hintPublicKey")
    const url = fields.attestorUrl
    const info = yield* infoAt(url)
    if (Either.isLeft(info))
      return yield* unreadable(`${url} did not tell its address: it ${describeFailure(info.left)}`)
    return {
      members: [{ url, address: info.right.attestor, hintPublicKey: fields.hintPublicKey }],
      threshold
    }
  })

const committeeOfMembers = (members: ReadonlyArray<CommitteeMember>, threshold: number) => {
  if (members.length === 0) return unreadable("attestors is empty")
  if (threshold > members.length)
    return unreadable(`attestorThreshold ${threshold} is above the ${members.length} attestors`)
  const addresses = new Set(members.map((m) => m.address))
  if (addresses.size !== members.length) return unreadable("an attestor address appears twice")
  return Effect.succeed<Committee>({ members, threshold })
}

// ---------------------------------------------------------------------------------------------
// Talking to one member
// ---------------------------------------------------------------------------------------------

/** How long a member has to answer one request before it counts as down. */
export const MEMBER_TIMEOUT_MS = 10_000

/** Why a member gave no usable answer to one request. */
export type MemberFailure =
  | { readonly _tag: "Down"; readonly reason: string }
  | { readonly _tag: "Refused"; readonly status: number; readonly code: string; readonly reason: string }
  | { readonly _tag: "BadAnswer"; readonly reason: string }

/** A typed client's failure, as the member's: no answer, its `{ error, code }`, or an answer of no known shape. */
const memberFailureOf = (error: unknown): MemberFailure => {
  if (isApiError(error)) {
    const { status, code } = errorCatalog[error._tag]
    return { _tag: "Refused", status, code, reason: error.message }
  }
  const tagged = error as {
    readonly _tag?: string
    readonly message?: string
    readonly response?: { status: number }
  }
  if (tagged._tag === "RequestError" || tagged._tag === "TimeoutException")
    return { _tag: "Down", reason: tagged._tag === "TimeoutException" ? "no answer in time" : "no answer" }
  if (tagged._tag === "ResponseError" && tagged.response !== undefined)
    return {
      _tag: "BadAnswer",
      reason: `an answer of status ${tagged.response.status} without an error body`
    }
  return { _tag: "BadAnswer", reason: `an answer of no known shape: ${tagged.message ?? String(error)}` }
}

/** One call to a member, with its failures as `MemberFailure` and a bound on waiting. */
const callMember = <A, E>(call: Effect.Effect<A, E>): Effect.Effect<Either.Either<A, MemberFailure>> =>
  call.pipe(Effect.timeout(MEMBER_TIMEOUT_MS), Effect.mapError(memberFailureOf), Effect.either)

const describeFailure = (failure: MemberFailure): string =>
  failure._tag === "Down"
    ? `down (${failure.reason})`
    : failure._tag === "Refused"
      ? `refused with ${failure.status} ${failure.code} (${failure.reason})`
      : `gave a bad answer (${failure.reason})`

export type MemberInfo =
  | { readonly _tag: "Answered"; readonly member: CommitteeMember; readonly info: AttestorInfo }
  | { readonly _tag: "Unanswered"; readonly member: CommitteeMember; readonly reason: string }

const infoAt = (url: string) =>
  Effect.flatMap(attestorFetchClient(url), (client) => callMember(client.info.info()))

const memberInfo = (member: CommitteeMember): Effect.Effect<MemberInfo> =>
  Effect.map(
    infoAt(member.url),
    Either.match({
      onLeft: (failure): MemberInfo => ({ _tag: "Unanswered", member, reason: describeFailure(failure) }),
      onRight: (info): MemberInfo => ({ _tag: "Answered", member, info })
    })
  )

/** Every member's `GET /v1/info`, at once: `bindDeadlineSeconds` for `committeeDeadline`. */
export const committeeInfo = (committee: Committee): Effect.Effect<ReadonlyArray<MemberInfo>> =>
  Effect.forEach(committee.members, memberInfo, { concurrency: "unbounded" })

// ---------------------------------------------------------------------------------------------
// One deadline for the committee (docs/attestor.md "Writing a client", §4 "POST /v1/bind" item 2)
// ---------------------------------------------------------------------------------------------

/** An attestor refuses a deadline less than this far ahead by its clock. */
export const BIND_DEADLINE_MIN_LEAD_SECONDS = 300
/** The grid an attestor's default deadline is rounded down to. */
export const BIND_DEADLINE_GRID_SECONDS = 600
/** How far a member's clock may be from the client's and still accept the committee's deadline. */
export const CLOCK_SKEW_MARGIN_SECONDS = 60

/** No deadline lies in every member's window with the skew margin on both sides. */
export class NoCommonDeadline extends Data.TaggedError("NoCommonDeadline")<{ readonly reason: string }> {
  override get message() {
    return `no bind deadline every attestor accepts: ${this.reason}`
  }
}

/**
 * The one deadline sent to every member. Member i accepts `[now + 300, now + B_i + 300]` by its own
 * clock (B_i its `bindDeadlineSeconds`), so with clocks up to `CLOCK_SKEW_MARGIN_SECONDS` apart
 * every member accepts `[now + 300 + m, now + min B + 300 − m]`. The deadline is the default the
 * member with the smallest window would pick, `now + min B` rounded down to the 600 s grid (the
 * same for asks within one grid step, so a retry asks for the same messages); when that falls under
 * the lower end, the first grid point at or above it; when no grid point fits, the lower end
 * itself. A window narrower than twice the margin has none: `NoCommonDeadline`.
 * `now` in unix seconds.
 */
export const committeeDeadline = (
  bindDeadlineSeconds: ReadonlyArray<number>,
  now: number
): Effect.Effect<bigint, NoCommonDeadline> => {
  if (bindDeadlineSeconds.length === 0)
    return Effect.fail(new NoCommonDeadline({ reason: "no attestor answered with its bindDeadlineSeconds" }))
  if (!bindDeadlineSeconds.every((b) => Number.isSafeInteger(b) && b > 0) || !Number.isSafeInteger(now))
    return Effect.fail(new NoCommonDeadline({ reason: "bindDeadlineSeconds and now must be whole seconds" }))
  const shortest = Math.min(...bindDeadlineSeconds)
  const lowest = now + BIND_DEADLINE_MIN_LEAD_SECONDS + CLOCK_SKEW_MARGIN_SECONDS
  const highest = now + shortest + BIND_DEADLINE_MIN_LEAD_SECONDS - CLOCK_SKEW_MARGIN_SECONDS
  if (highest < lowest)
    return Effect.fail(
      new NoCommonDeadline({
        reason: `the shortest bindDeadlineSeconds, ${shortest}, leaves no room for ${CLOCK_SKEW_MARGIN_SECONDS} s of clock skew`
      })
    )
  const grid = BIND_DEADLINE_GRID_SECONDS
  const byDefault = Math.floor((now + shortest) / grid) * grid
  const firstAbove = Math.ceil(lowest / grid) * grid
  const deadline = byDefault >= lowest ? byDefault : firstAbove <= highest ? firstAbove : lowest
  return Effect.succeed(BigInt(deadline))
}

// ---------------------------------------------------------------------------------------------
// Logins at every member
// ---------------------------------------------------------------------------------------------

/** A login started at one member: its own secret, and the provider URL or why it did not start. */
export interface MemberLogin {
  readonly member: CommitteeMember
  readonly loginSecret: LoginSecret
  readonly loginChallenge: LoginChallenge
  readonly started: { readonly _tag: "Started"; readonly url: string; readonly state: string } | MemberFailure
}

export interface CommitteeLoginRequest {
  readonly committee: Committee
  readonly platform: OAuthCallbackPlatform
  /** The key the binds will be for, chosen before the logins. */
  readonly stealthOwner: Address
  readonly ids?: ReadonlyArray<Bytes32>
  readonly redirect?: string
}

const startMemberLogin = (request: CommitteeLoginRequest) => (member: CommitteeMember) =>
  Effect.gen(function* () {
    // One secret per login (docs/attestor.md "Writing a client" rule 1): a session one member made
    // is useless at another, and a secret one member saw is no use at the others.
    const { loginSecret, loginChallenge } = newLoginSecret()
    const payload = OAuthStartRequest.make({
      stealthOwner: request.stealthOwner,
      loginChallenge,
      ...(request.ids === undefined ? {} : { ids: request.ids }),
      ...(request.redirect === undefined ? {} : { redirect: request.redirect })
    })
    const client = yield* attestorFetchClient(member.url)
    const answer = yield* callMember(
      client.logins.oauthStart({ path: { platform: request.platform }, payload })
    )
    const started: MemberLogin["started"] = Either.match(answer, {
      onLeft: (failure) => failure,
      onRight: (body) =>
        "url" in body
          ? { _tag: "Started", url: body.url, state: body.state }
          : { _tag: "BadAnswer", reason: "a sign-in message's fields, not a provider URL" }
    })
    return { member, loginSecret, loginChallenge, started } satisfies MemberLogin
  })

/**
 * Starts the OAuth login (`POST /v1/oauth/:platform/start`) at every member at once, each with a
 * fresh login secret. The client keeps each secret with its member, sends the browser to each
 * started `url` in turn, and reads each landing with `loginLanding`.
 */
export const startCommitteeLogins = (
  request: CommitteeLoginRequest
): Effect.Effect<ReadonlyArray<MemberLogin>> =>
  Effect.forEach(request.committee.members, startMemberLogin(request), { concurrency: "unbounded" })

// ---------------------------------------------------------------------------------------------
// Collecting and checking the signatures
// ---------------------------------------------------------------------------------------------

/** A member's session and the secret of the login that made it. */
export interface MemberSession {
  readonly session: SessionToken
  readonly loginSecret?: LoginSecret
}

/** What one member did for the bind. */
export type MemberOutcome = { readonly member: CommitteeMember } & (
  | { readonly _tag: "Signed"; readonly signature: Hex }
  | { readonly _tag: "NotAsked" }
  | MemberFailure
  | { readonly _tag: "NoSignature"; readonly reason: string }
  | { readonly _tag: "ForeignBind"; readonly newOwner: string }
  | { readonly _tag: "InvalidSignature"; readonly reason: string }
  | { readonly _tag: "NotAttestor"; readonly signer: Address }
  | { readonly _tag: "Unverified"; readonly reason: string }
  | { readonly _tag: "Duplicate"; readonly signer: Address }
)

export interface CollectBindRequest {
  readonly committee: Committee
  /** Per member, in the committee's order: its session, or undefined where the user has none. */
  readonly sessions: ReadonlyArray<MemberSession | undefined>
  /** The user's own key: every signature must be for it. */
  readonly owner: Address
  readonly id: Bytes32
  /** The account's current `bindNonces(id)`. */
  readonly bindNonce: bigint
  /** The committee's deadline (`committeeDeadline`). */
  readonly deadline: bigint
  readonly chain: { readonly chainId: number; readonly vault: `0x${string}` }
  /** Whether the vault counts `signer` as an attestor (`isAttestor(signer)`, a chain read). */
  readonly isAttestor: (signer: Address) => boolean | PromiseLike<boolean>
}

/** The merged signatures, in the order `proposeBind` wants, and what each member did. */
export interface CollectedBind {
  readonly id: Bytes32
  readonly newOwner: Address
  readonly deadline: bigint
  readonly bindNonce: bigint
  /** Sorted by signer, ascending, one per signer. */
  readonly signatures: ReadonlyArray<Hex>
  readonly signers: ReadonlyArray<Address>
  /** The registration payload of an account not registered yet, for the relayer to send alongside. */
  readonly register: RegisterHandle | null
  readonly outcomes: ReadonlyArray<MemberOutcome>
}

/** What one member did, in a line for a user: "signed", "down (no answer)", "refused with 401 …". */
export const describeOutcome = (outcome: MemberOutcome): string => {
  switch (outcome._tag) {
    case "Signed":
      return "signed"
    case "NotAsked":
      return "not asked (no session there)"
    case "Down":
    case "Refused":
    case "BadAnswer":
      return describeFailure(outcome)
    case "NoSignature":
      return `signed nothing for the escrow (${outcome.reason})`
    case "ForeignBind":
      return `signed for another key, ${outcome.newOwner}, not this client's`
    case "InvalidSignature":
      return `gave an invalid signature (${outcome.reason})`
    case "NotAttestor":
      return `signed as ${outcome.signer}, which the vault does not count as an attestor`
    case "Unverified":
      return `could not be checked as an attestor (${outcome.reason})`
    case "Duplicate":
      return `signed as ${outcome.signer}, whose signature another member already gave`
  }
}

/** Fewer valid signatures than the threshold: nothing to propose. */
export class CommitteeShort extends Data.TaggedError("CommitteeShort")<{
  readonly threshold: number
  readonly signed: number
  readonly outcomes: ReadonlyArray<MemberOutcome>
}> {
  /** The members that did not sign, each with why. */
  get missing(): ReadonlyArray<MemberOutcome> {
    return this.outcomes.filter((o) => o._tag !== "Signed")
  }
  override get message() {
    const lines = this.missing.map((o) => `${o.member.url} (${o.member.address}) ${describeOutcome(o)}`)
    return `${this.signed} of ${this.threshold} attestor signatures needed for the bind: ${lines.join("; ")}`
  }
}

/** Half the secp256k1 order: the vault's ECDSA refuses an `s` above it (a malleated signature). */
const HALF_ORDER = 0x7fffffffffffffffffffffffffffffff5d576e73_57a4501d_dfe92f46_681b20a0n

const isLowS = (signature: Hex) => BigInt(`0x${signature.slice(66, 130)}`) <= HALF_ORDER

/**
 * The form the vault's ECDSA (OpenZeppelin's) recovers: 65 bytes with `v` 27 or 28. viem also
 * recovers `v` 0 or 1, which the vault refuses: one member answering so would sink the proposal.
 */
const isVaultForm = (signature: Hex) => {
  if (signature.length !== 132) return false
  const v = Number.parseInt(signature.slice(130, 132), 16)
  return v === 27 || v === 28
}

type Checked = Exclude<MemberOutcome, { readonly _tag: "Duplicate" }> & {
  readonly register?: RegisterHandle | null
}

const sameHex = (a: string, b: string) => a.toLowerCase() === b.toLowerCase()

/** The one signature a member's answer holds for the escrow, checked as the vault will check it. */
const checkBind = (
  request: CollectBindRequest,
  member: CommitteeMember,
  binds: ReadonlyArray<BindSignature>
) =>
  Effect.gen(function* () {
    // Rule 3: one signature for another key and nothing of this answer is used.
    const mine = yield* Effect.either(bindsFor(binds, request.owner))
    if (Either.isLeft(mine))
      return { member, _tag: "ForeignBind", newOwner: mine.left.newOwner } satisfies Checked
    const bind = binds.find((b) => sameHex(b.beneficiaryId, request.id))
    if (bind === undefined)
      return {
        member,
        _tag: "NoSignature",
        reason: "a pending bind, the key already owns it, or a contest ruled the key out"
      } satisfies Checked
    if (bind.bindNonce !== request.bindNonce || bind.deadline !== request.deadline)
      return {
        member,
        _tag: "InvalidSignature",
        reason: `signed bind nonce ${bind.bindNonce} and deadline ${bind.deadline}, not ${request.bindNonce} and ${request.deadline}`
      } satisfies Checked
    const signer = yield* recoverBindSigner(request, bind.signature)
    if (signer === undefined || !sameHex(signer, member.address))
      return {
        member,
        _tag: "InvalidSignature",
        reason: `the signature does not recover to ${member.address} over this bind`
      } satisfies Checked
    if (!isLowS(bind.signature))
      return {
        member,
        _tag: "InvalidSignature",
        reason: "a high-s signature the vault refuses"
      } satisfies Checked
    if (!isVaultForm(bind.signature as Hex))
      return {
        member,
        _tag: "InvalidSignature",
        reason: "a signature not in the 65-byte form with v 27 or 28 that the vault recovers"
      } satisfies Checked
    const registered = yield* Effect.tryPromise(async () => await request.isAttestor(member.address)).pipe(
      Effect.either
    )
    if (Either.isLeft(registered))
      return { member, _tag: "Unverified", reason: String(registered.left.cause) } satisfies Checked
    if (!registered.right) return { member, _tag: "NotAttestor", signer: member.address } satisfies Checked
    return {
      member,
      _tag: "Signed",
      signature: bind.signature as Hex,
      register: bind.register
    } satisfies Checked
  })

/** The address a `BindOwner(id, owner, bindNonce, deadline)` signature recovers to, if any. */
const recoverBindSigner = (request: CollectBindRequest, signature: string) =>
  Effect.tryPromise(() =>
    recoverTypedDataAddress({
      domain: vaultDomain(request.chain.chainId, request.chain.vault),
      types: vaultTypes,
      primaryType: "BindOwner",
      message: {
        id: request.id,
        newOwner: request.owner,
        bindNonce: request.bindNonce,
        deadline: request.deadline
      },
      signature: signature as Hex
    })
  ).pipe(Effect.orElseSucceed(() => undefined))

const askMember =
  (request: CollectBindRequest) =>
  (member: CommitteeMember, index: number): Effect.Effect<Checked> =>
    Effect.gen(function* () {
      const session = request.sessions[index]
      if (session === undefined) return { member, _tag: "NotAsked" } satisfies Checked
      const payload = BindRequest.make({
        session: session.session,
        ids: [request.id],
        deadline: request.deadline,
        ...(session.loginSecret === undefined ? {} : { loginSecret: session.loginSecret })
      })
      const client = yield* attestorFetchClient(member.url)
      const answer = yield* callMember(client.binds.bind({ payload }))
      if (Either.isLeft(answer)) return { member, ...answer.left } satisfies Checked
      return yield* checkBind(request, member, answer.right.binds)
    })

/** Keeps the first valid signature of each signer (a committee listing one key twice); the rest are `Duplicate`. */
const dedupe = (checked: ReadonlyArray<Checked>): ReadonlyArray<MemberOutcome> => {
  const seen = new Set<string>()
  return checked.map(({ register: _register, ...outcome }): MemberOutcome => {
    if (outcome._tag !== "Signed") return outcome
    const signer = outcome.member.address.toLowerCase()
    if (seen.has(signer)) return { member: outcome.member, _tag: "Duplicate", signer: outcome.member.address }
    seen.add(signer)
    return outcome
  })
}

/**
 * Asks every member with a session for the bind of `id` to `owner` at the committee's `deadline`,
 * checks each answer as the vault will (a `BindOwner` over this id, key, current bind nonce and
 * deadline, recovering to the member's address, a registered attestor), keeps one signature per
 * signer and sorts them by signer, ascending. Fewer than the threshold: `CommitteeShort`, naming
 * every member that did not sign and why.
 */
export const collectBindSignatures = (
  request: CollectBindRequest
): Effect.Effect<CollectedBind, CommitteeShort> =>
  Effect.gen(function* () {
    const checked = yield* Effect.forEach(request.committee.members, askMember(request), {
      concurrency: "unbounded"
    })
    const outcomes = dedupe(checked)
    const signed = outcomes
      .flatMap((o) => (o._tag === "Signed" ? [{ signer: o.member.address, signature: o.signature }] : []))
      .sort((a, b) => (BigInt(a.signer) < BigInt(b.signer) ? -1 : 1))
    if (signed.length < request.committee.threshold)
      return yield* new CommitteeShort({
        threshold: request.committee.threshold,
        signed: signed.length,
        outcomes
      })
    const register = checked.find((c) => c._tag === "Signed")?.register ?? null
    return {
      id: request.id,
      newOwner: request.owner,
      deadline: request.deadline,
      bindNonce: request.bindNonce,
      signatures: signed.map((s) => s.signature),
      signers: signed.map((s) => s.signer),
      register,
      outcomes
    }
  })

/**
 * The relayer's `POST /v1/propose-bind` body (schema/relayer.ts `ProposeBindRequest`) for the
 * collected signatures: the relayer registers the account from `register` in the same batch.
 */
export const proposeBindRequestOf = (collected: CollectedBind): ProposeBindRequest =>
  Schema.decodeUnknownSync(ProposeBindRequest)({
    id: collected.id,
    newOwner: collected.newOwner,
    deadline: collected.deadline.toString(),
    signatures: collected.signatures,
    ...(collected.register === null
      ? {}
      : { register: Schema.encodeSync(RegisterHandle)(collected.register) })
  })
