/**
 * `POST /v1/bind` `{ session, loginSecret?, ids?, contest?, deadline?, visibility? }` → `{ binds: BindSignature[] }`
 * (docs/attestor.md §2 BindSignature, §3 contest and veto rows, §4 "POST /v1/escrows and POST
 * /v1/bind", §8).
 *
 * 1. The body is decoded (`BindRequest`): malformed, or `contest: true` without exactly one id in
 *    `ids`, is 400 `bad_request`. The session must be valid, and presented with its login's
 *    `loginSecret` when the login carried a challenge: 401 `invalid_session` otherwise
 *    (`authenticate`, docs/protocol.md §10 "Login challenge").
 * 2. `deadline`, when sent, must lie in `[now + 300, now + bindDeadlineSeconds + 300]` (unix
 *    seconds, the attestor's clock, both ends included), else 400 `bad_request`. Without it the
 *    attestor signs `now + bindDeadlineSeconds` rounded down to a 600 s grid.
 * 3. The escrows considered are the session's, exactly as `/v1/escrows` lists them (same indexes,
 *    same 503 `unavailable` rules), restricted to `ids` when sent. An id in `ids` that is not one
 *    of the session's escrows is left out, as `/v1/escrows` leaves out session ids the hint index
 *    does not know: this attestor cannot attest it, and telling it apart would say nothing useful.
 * 4. Contest (`contest: true`, one id of the session's escrows; any other id does nothing). It
 *    covers every escrow of the session (all of them, as `/v1/escrows` lists them, not only the
 *    one named): a key signed as the user was signed for all of them, so ruling it out for one
 *    escrow alone would leave the others to it. In one transaction (`AttestationStore.contest`):
 *    every owner but the session's stealth owner that this attestor attested for any of these
 *    escrows, and every indexed pending owner of them that is another key, become contested for
 *    each, and their attestations are revoked. Then the contest's time is recorded for the user,
 *    so a login started before it makes no session, and the sessions of the same platform and
 *    user id created at or before this one end (`SessionStore.endOthers`). The veto watcher
 *    (`VetoWatcher.ts`) judges a proposal to a contested owner unattested on its next pass (at
 *    most `resyncIntervalMs`, 5 s, later) and, with `AUTO_VETO`, sends `vetoBind`. A contest
 *    never signs and answers `{ binds: [] }`.
 * 5. Otherwise one `BindOwner(id, session.stealthOwner, bindNonces(id) as indexed, deadline)`
 *    EIP-712 signature over the vault domain per escrow that has no pending bind and is not
 *    already owned by the session's key; the others are simply absent. So is an escrow whose
 *    (id, stealth owner) is contested: the store refuses to record it (step 7), in the
 *    transaction that would, so a replica whose index lags behind a proposal refuses too.
 *    `register` is null for a registered account, else the kind-2 registration payload (as
 *    `/v1/escrows` shows it).
 * 6. Visibility (docs/attestor.md §4): `visibility` filters the escrows to one kind. A request that would sign
 *    both kinds, or one whose stealth owner this attestor already attested for the other kind, is
 *    400 `bad_request`, before anything is signed.
 * 7. Every signature is recorded (`AttestationStore`) before the answer, and one the store
 *    refuses as contested is left out; the database not answering is 503 `unavailable` and no
 *    signature leaves.
 *
 * Metrics `attestor_binds_total{outcome}` and `attestor_bind_signatures_total`. Nothing of the
 * session, escrows, owners or signatures reaches a log line or a metric.
 */
import { Clock, Effect, Either, Metric, Redacted } from "effect"
import type { Address, Hex } from "viem"
import { privateKeyToAccount } from "viem/accounts"
import {
  type BindRequest,
  type BindResponse,
  type BindSignature,
  platformIdOf,
  type Visibility
} from "../../schema/attestor.js"
import { vaultDomain, vaultTypes } from "../../schema/eip712.js"
import { BadRequest, type Unavailable } from "../../schema/errors.js"
import type { ChainClient } from "../chain/ChainClient.js"
import { ChainId } from "../chain/chainId.js"
import { AttestorSettings } from "../config/attestor.js"
import type { Indexer } from "../indexer/Indexer.js"
import { type Attestation, AttestationStore, attestationStoreUnavailable } from "./AttestationStore.js"
import type { BindError } from "./api/binds.js"
import { escrowOf, escrowVisibility, type IndexedEscrow, indexedEscrows } from "./escrows.js"
import type { HintIndex } from "./hintIndex.js"
import { bindSignatures } from "./metrics.js"
import type { PublicCommitments } from "./PublicCommitments.js"
import { authenticate, SessionStore, type StoredSession, sessionStoreUnavailable } from "./SessionStore.js"

// ---------------------------------------------------------------------------------------------
// Deadline
// ---------------------------------------------------------------------------------------------

/** Least headroom of a bind deadline (docs/attestor.md §4, §8). */
export const BIND_DEADLINE_MIN_HEADROOM = 300
/** Grid the default deadline is rounded down to. */
export const BIND_DEADLINE_GRID = 600

/** Whether `deadline` lies in `[now + 300, now + bindDeadlineSeconds + 300]`, both ends included. */
export const deadlineAccepted = (deadline: bigint, now: number, bindDeadlineSeconds: number): boolean =>
  deadline >= BigInt(now + BIND_DEADLINE_MIN_HEADROOM) &&
  deadline <= BigInt(now + bindDeadlineSeconds + BIND_DEADLINE_MIN_HEADROOM)

/** `now + bindDeadlineSeconds` rounded down to the 600 s grid. */
export const defaultDeadline = (now: number, bindDeadlineSeconds: number): bigint =>
  BigInt(Math.floor((now + bindDeadlineSeconds) / BIND_DEADLINE_GRID) * BIND_DEADLINE_GRID)

export const deadlineRefusal = (bindDeadlineSeconds: number) =>
  `deadline must be between now + ${BIND_DEADLINE_MIN_HEADROOM} s and now + ${
    bindDeadlineSeconds + BIND_DEADLINE_MIN_HEADROOM
  } s by this attestor's clock`

// ---------------------------------------------------------------------------------------------
// What a request signs
// ---------------------------------------------------------------------------------------------

export const BOTH_VISIBILITIES =
  "this request would sign both public and private escrows: send visibility to choose one kind"
export const otherVisibilityUsed = (visibility: Visibility) =>
  `this stealth owner was already attested for ${
    visibility === "public" ? "private" : "public"
  } escrows: use a fresh key for ${visibility} ones`

const sameAddress = (a: Address | undefined, b: Address) =>
  a !== undefined && a.toLowerCase() === b.toLowerCase()

/** One escrow to sign for, with what its signature and record need. */
export interface BindCandidate {
  readonly indexed: IndexedEscrow
  readonly bindNonce: bigint
  readonly visibility: Visibility
}

/**
 * The escrows a (non-contest) request signs for: no pending bind, not owned by `stealthOwner`,
 * of the `filter` visibility when given; a refusal message when they mix both kinds.
 */
export const planBinds = (
  escrows: ReadonlyArray<IndexedEscrow>,
  stealthOwner: Address,
  filter: Visibility | undefined,
  visibilityOf: (indexed: IndexedEscrow) => Visibility = escrowVisibility
): Either.Either<ReadonlyArray<BindCandidate>, string> => {
  const candidates: Array<BindCandidate> = []
  for (const indexed of escrows) {
    const account = indexed.account
    if (account?.pendingOwner !== undefined) continue
    if (account?.registration !== undefined && sameAddress(account.owner, stealthOwner)) continue
    const visibility = visibilityOf(indexed)
    if (filter !== undefined && visibility !== filter) continue
    candidates.push({ indexed, bindNonce: account?.bindNonce ?? 0n, visibility })
  }
  const kinds = new Set(candidates.map((c) => c.visibility))
  return kinds.size > 1 ? Either.left(BOTH_VISIBILITIES) : Either.right(candidates)
}

/** The pending owner a contest by `stealthOwner` rules out, if the escrow has one for another key. */
export const contestedPendingOwner = (indexed: IndexedEscrow, stealthOwner: Address): Address | undefined => {
  const pending = indexed.account?.pendingOwner
  return pending !== undefined && !sameAddress(pending, stealthOwner) ? pending : undefined
}

// ---------------------------------------------------------------------------------------------
// The handler
// ---------------------------------------------------------------------------------------------

export interface BindSigner {
  readonly address: Address
  readonly signBindOwner: (
    chainId: number,
    message: { id: Hex; newOwner: Address; bindNonce: bigint; deadline: bigint }
  ) => Effect.Effect<Hex>
}

export const bindSigner = (key: Hex, vault: Address): BindSigner => {
  const account = privateKeyToAccount(key)
  return {
    address: account.address,
    signBindOwner: (chainId, message) =>
      Effect.promise(() =>
        account.signTypedData({
          domain: vaultDomain(chainId, vault),
          types: { BindOwner: vaultTypes.BindOwner },
          primaryType: "BindOwner",
          message
        })
      )
  }
}

export type BindServices =
  | SessionStore
  | Indexer
  | HintIndex
  | ChainClient
  | AttestationStore
  | PublicCommitments

const nowSeconds = Effect.map(Clock.currentTimeMillis, (ms) => Math.floor(ms / 1000))

export interface BindConfig {
  readonly signer: BindSigner
  readonly bindDeadlineSeconds: number
  readonly autoVeto: boolean
  /** The chain id to sign for; read from the chain (once) when none is configured. */
  readonly chainId: Effect.Effect<number, Unavailable>
}

const contest = (
  token: BindRequest["session"],
  session: StoredSession,
  target: IndexedEscrow | undefined,
  escrows: ReadonlyArray<IndexedEscrow>,
  now: number,
  config: BindConfig
) =>
  Effect.gen(function* () {
    // Not one of the session's escrows: nothing to contest.
    if (target === undefined) return
    const store = yield* AttestationStore
    yield* store
      .contest(
        escrows.map((e) => ({
          id: e.escrow.beneficiaryId,
          pendingOwner: contestedPendingOwner(e, session.stealthOwner)
        })),
        session.stealthOwner,
        now
      )
      .pipe(Effect.mapError(attestationStoreUnavailable))
    const sessions = yield* SessionStore
    yield* sessions.endOthers(session, token, now).pipe(Effect.mapError(sessionStoreUnavailable))
    yield* Effect.logInfo(
      config.autoVeto
        ? "bind contested: other owners ruled out on the user's escrows, the user's older sessions ended; the veto watcher vetoes a proposal to them"
        : "bind contested: other owners ruled out on the user's escrows, the user's older sessions ended; AUTO_VETO is off, the veto watcher only counts a proposal to them"
    )
  })

const sign = (
  session: StoredSession,
  candidates: ReadonlyArray<BindCandidate>,
  deadline: bigint,
  now: number,
  config: BindConfig
) =>
  Effect.gen(function* () {
    if (candidates.length === 0) return []
    const store = yield* AttestationStore
    const kind = candidates[0]!.visibility
    const used = yield* store
      .visibilitiesOf(session.stealthOwner)
      .pipe(Effect.mapError(attestationStoreUnavailable))
    if ([...used].some((v) => v !== kind))
      return yield* Effect.fail(new BadRequest({ message: otherVisibilityUsed(kind) }))
    const chainId = yield* config.chainId
    const binds: Array<BindSignature> = []
    const records: Array<Attestation> = []
    for (const candidate of candidates) {
      const id = candidate.indexed.escrow.beneficiaryId
      const message = { id, newOwner: session.stealthOwner, bindNonce: candidate.bindNonce, deadline }
      const signature = yield* config.signer.signBindOwner(chainId, message)
      binds.push({
        beneficiaryId: id as BindSignature["beneficiaryId"],
        newOwner: session.stealthOwner,
        bindNonce: candidate.bindNonce,
        deadline,
        signature: signature as BindSignature["signature"],
        attestor: config.signer.address as BindSignature["attestor"],
        register: escrowOf(candidate.indexed).register
      })
      records.push({ ...message, visibility: candidate.visibility })
    }
    // The store is the authority on visibility: the read above refuses early, the record refuses
    // a request that raced another of the same key for the other kind. It is the authority on
    // contests too, whatever this replica's index shows: what it refuses is left out.
    const refused = yield* store.record(records, now).pipe(
      Effect.catchTags({
        AttestationStoreError: (e) => Effect.fail(attestationStoreUnavailable(e)),
        VisibilityConflict: () => Effect.fail(new BadRequest({ message: otherVisibilityUsed(kind) }))
      })
    )
    const contested = new Set(refused.map((a) => a.id.toLowerCase()))
    const signed = binds.filter((b) => !contested.has(b.beneficiaryId.toLowerCase()))
    yield* Metric.incrementBy(bindSignatures, signed.length)
    return signed
  })

/** Answers a decoded bind request: the signatures, or a contest's revocations. */
export const signBinds =
  (config: BindConfig) =>
  (body: BindRequest): Effect.Effect<BindResponse, BindError, BindServices> =>
    Effect.gen(function* () {
      const session = yield* authenticate(body.session, body.loginSecret)
      const now = yield* nowSeconds
      if (body.deadline !== undefined && !deadlineAccepted(body.deadline, now, config.bindDeadlineSeconds))
        return yield* Effect.fail(new BadRequest({ message: deadlineRefusal(config.bindDeadlineSeconds) }))
      const deadline = body.deadline ?? defaultDeadline(now, config.bindDeadlineSeconds)
      const found = yield* indexedEscrows(platformIdOf(session.platform), session.userId, session.ids)
      const wanted = body.ids === undefined ? undefined : new Set(body.ids.map((id) => id.toLowerCase()))
      const escrows =
        wanted === undefined
          ? found.escrows
          : found.escrows.filter((e) => wanted.has(e.escrow.beneficiaryId.toLowerCase()))
      if (body.contest === true) {
        yield* contest(body.session, session, escrows[0], found.escrows, now, config)
        return { binds: [] }
      }
      const plan = planBinds(escrows, session.stealthOwner, body.visibility)
      if (Either.isLeft(plan)) return yield* Effect.fail(new BadRequest({ message: plan.left }))
      return { binds: yield* sign(session, plan.right, deadline, now, config) }
    })

/** The bind configuration of these settings; the chain id read once from the RPC when not configured. */
export const bindConfig = Effect.gen(function* () {
  const settings = yield* AttestorSettings
  const chainId = (yield* ChainId).get
  return {
    signer: bindSigner(Redacted.value(settings.signingKey), settings.vault),
    bindDeadlineSeconds: settings.bindDeadlineSeconds,
    autoVeto: settings.autoVeto,
    chainId
  } satisfies BindConfig
})
