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
 *    escrow alone would leave the others to it. In one transaction, under the ids' locks: every
 *    owner but the session's stealth owner that this attestor attested for any of these escrows,
 *    and every indexed pending owner of them that is another key, become contested for each, and
 *    their attestations are revoked (`AttestationStore.contest`); the contest's time is recorded
 *    for the user, so a login started before it makes no session, and the sessions of the same
 *    platform and user id created at or before this one end (`SessionStore.endOthers`). A bind of
 *    an ended session that had passed its checks finds its session gone when it records (step 7). The veto watcher
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
 *    refuses as contested is left out; the session is read again under the ids' locks, and one a
 *    contest ended meanwhile is 401 `invalid_session` with nothing recorded or signed; the
 *    database not answering is 503 `unavailable` and no signature leaves.
 *
 * Metrics `attestor_binds_total{outcome}` and `attestor_bind_signatures_total`. Nothing of the
 * session, escrows, owners or signatures reaches a log line or a metric.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Context, Effect, Either, Layer, Metric, Option } from "effect"
import type { BindRequest, BindResponse, BindSignature } from "../../../schema/attestor.js"
import { BadRequest, InvalidSession, Unavailable } from "../../../schema/errors.js"
import { ChainId } from "../../chain/chainId.js"
import { nowSeconds } from "../../clock.js"
import { AttestorSettings } from "../../config/attestor.js"
import { SessionEscrows } from "../escrows/SessionEscrows.js"
import { escrowOf, type IndexedEscrow } from "../escrows/userEscrows.js"
import {
  INVALID_SESSION_MESSAGE,
  SessionStore,
  type StoredSession,
  sessionStoreUnavailable
} from "../logins/SessionStore.js"
import { bindSignatures } from "../metrics.js"
import { type Attestation, AttestationStore, attestationStoreUnavailable } from "./AttestationStore.js"
import type { BindError } from "./api.js"
import {
  type BindCandidate,
  bindSigner,
  contestedPendingOwner,
  deadlineAccepted,
  deadlineRefusal,
  defaultDeadline,
  otherVisibilityUsed,
  planBinds
} from "./bindRules.js"

const CONTEST_UNAVAILABLE =
  "the attestor's database is not answering: the contest was not recorded, send it again"

export interface BindSignaturesShape {
  /** Answers a decoded bind request: the signatures, or a contest's revocations. */
  readonly sign: (request: BindRequest) => Effect.Effect<BindResponse, BindError>
}

export class BindSignatures extends Context.Tag("BindSignatures")<BindSignatures, BindSignaturesShape>() {
  /** Signing with the settings' key for their vault; the chain id read once from the RPC when not configured. */
  static readonly layer: Layer.Layer<
    BindSignatures,
    never,
    AttestorSettings | ChainId | SessionEscrows | SessionStore | AttestationStore | SqlClient
  > = Layer.effect(
    BindSignatures,
    Effect.gen(function* () {
      const settings = yield* AttestorSettings
      const chainId = (yield* ChainId).get
      const escrows = yield* SessionEscrows
      const sessions = yield* SessionStore
      const store = yield* AttestationStore
      const sql = yield* SqlClient
      /** Whether the session of `token` is still valid: read inside the record's transaction. */
      const sessionValid = (token: BindRequest["session"]) => Effect.map(sessions.read(token), Option.isSome)
      const signer = bindSigner(settings.signingKey, settings.vault)
      const { bindDeadlineSeconds, autoVeto } = settings

      const contest = (
        token: BindRequest["session"],
        session: StoredSession,
        target: IndexedEscrow | undefined,
        all: ReadonlyArray<IndexedEscrow>,
        now: number
      ) =>
        Effect.gen(function* () {
          // Not one of the session's escrows: nothing to contest.
          if (target === undefined) return
          // One decision: the rulings and the end of the user's older sessions commit together,
          // under the ids' locks, so a bind of an older session either commits before (and is
          // ruled out) or finds its session ended (`AttestationStore.record`).
          yield* Effect.zipRight(
            store.contest(
              all.map((e) => ({
                id: e.escrow.beneficiaryId,
                pendingOwner: contestedPendingOwner(e, session.stealthOwner)
              })),
              session.stealthOwner,
              now
            ),
            sessions.endOthers(session, token, now)
          ).pipe(
            sql.withTransaction,
            Effect.mapError(() => new Unavailable({ message: CONTEST_UNAVAILABLE }))
          )
          yield* Effect.logInfo(
            autoVeto
              ? "bind contested: other owners ruled out on the user's escrows, the user's older sessions ended; the veto watcher vetoes a proposal to them"
              : "bind contested: other owners ruled out on the user's escrows, the user's older sessions ended; AUTO_VETO is off, the veto watcher only counts a proposal to them"
          )
        })

      const signFor = (
        token: BindRequest["session"],
        session: StoredSession,
        candidates: ReadonlyArray<BindCandidate>,
        deadline: bigint,
        now: number
      ) =>
        Effect.gen(function* () {
          if (candidates.length === 0) return []
          const kind = candidates[0]!.visibility
          const used = yield* store
            .visibilitiesOf(session.stealthOwner)
            .pipe(Effect.mapError(attestationStoreUnavailable))
          if ([...used].some((v) => v !== kind))
            return yield* Effect.fail(new BadRequest({ message: otherVisibilityUsed(kind) }))
          const id = yield* chainId
          const binds: Array<BindSignature> = []
          const records: Array<Attestation> = []
          for (const candidate of candidates) {
            const beneficiaryId = candidate.indexed.escrow.beneficiaryId
            const message = {
              id: beneficiaryId,
              newOwner: session.stealthOwner,
              bindNonce: candidate.bindNonce,
              deadline
            }
            const signature = yield* signer.signBindOwner(id, message)
            binds.push({
              beneficiaryId: beneficiaryId as BindSignature["beneficiaryId"],
              newOwner: session.stealthOwner,
              bindNonce: candidate.bindNonce,
              deadline,
              signature: signature as BindSignature["signature"],
              attestor: signer.address as BindSignature["attestor"],
              register: escrowOf(candidate.indexed).register
            })
            records.push({ ...message, visibility: candidate.visibility })
          }
          // The store is the authority on visibility: the read above refuses early, the record refuses
          // a request that raced another of the same key for the other kind. It is the authority on
          // contests too, whatever this replica's index shows: what it refuses is left out.
          const refused = yield* store.record(records, now, sessionValid(token)).pipe(
            Effect.catchTags({
              AttestationStoreError: (e) => Effect.fail(attestationStoreUnavailable(e)),
              SessionStoreError: (e) => Effect.fail(sessionStoreUnavailable(e)),
              SessionEnded: () => Effect.fail(new InvalidSession({ message: INVALID_SESSION_MESSAGE })),
              VisibilityConflict: () => Effect.fail(new BadRequest({ message: otherVisibilityUsed(kind) }))
            })
          )
          const contested = new Set(refused.map((a) => a.id.toLowerCase()))
          const signed = binds.filter((b) => !contested.has(b.beneficiaryId.toLowerCase()))
          yield* Metric.incrementBy(bindSignatures, signed.length)
          return signed
        })

      const sign: BindSignaturesShape["sign"] = (body) =>
        Effect.gen(function* () {
          const session = yield* escrows.authenticate(body.session, body.loginSecret)
          const now = yield* nowSeconds
          if (body.deadline !== undefined && !deadlineAccepted(body.deadline, now, bindDeadlineSeconds))
            return yield* Effect.fail(new BadRequest({ message: deadlineRefusal(bindDeadlineSeconds) }))
          const deadline = body.deadline ?? defaultDeadline(now, bindDeadlineSeconds)
          const found = yield* escrows.ofSession(session)
          const wanted = body.ids === undefined ? undefined : new Set(body.ids.map((id) => id.toLowerCase()))
          const considered =
            wanted === undefined
              ? found.escrows
              : found.escrows.filter((e) => wanted.has(e.escrow.beneficiaryId.toLowerCase()))
          if (body.contest === true) {
            yield* contest(body.session, session, considered[0], found.escrows, now)
            return { binds: [] }
          }
          const plan = planBinds(considered, session.stealthOwner, body.visibility)
          if (Either.isLeft(plan)) return yield* Effect.fail(new BadRequest({ message: plan.left }))
          return { binds: yield* signFor(body.session, session, plan.right, deadline, now) }
        })

      return { sign }
    })
  )
}
