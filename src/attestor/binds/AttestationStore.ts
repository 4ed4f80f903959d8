/**
 * The attestor's record of the `BindOwner` signatures it issued (migration 0021): what `/v1/bind`
 * signed, per escrow id, new owner, bind nonce and deadline, with the escrow's visibility and a
 * revoked flag; and the owners contests ruled out (migration 0028). The veto watcher
 * (`VetoWatcher.ts`) vetoes a pending proposal whose id, new owner and bind nonce have no unrevoked
 * attestation here, or whose new owner is contested for the id.
 *
 * A contest (docs/attestor.md §4 "POST /v1/bind" contest) covers every escrow of the user this
 * attestor knows: every owner but the contester's key attested for any of them, and every pending
 * owner that is not that key, is recorded as contested for each of them, and their attestations
 * are revoked. The attacker's signatures cover all the user's escrows, so the user's word that a
 * key is not theirs does too. From then on `record` refuses a contested (id, owner), whichever
 * replica asks and whatever its index shows: both run in transactions that first take the lock of
 * each id (`pg_advisory_xact_lock`, in sorted order), so a contest and a record of one id on
 * replicas sharing the database never interleave. Either the record commits first, and the
 * contest then finds its owner attested and contests it, or the contest does, and the record
 * then finds the owner contested, or the asking session ended by the contest (`SessionEnded`:
 * a key the contest could not know of, never attested nor proposed, gets nothing either).
 *
 * Nothing stored here reaches a log line, a metric or an error message.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Data, Effect, Layer } from "effect"
import type { Address, Hex } from "viem"
import type { Visibility } from "../../../schema/attestor.js"
import { Unavailable } from "../../../schema/errors.js"
import { advisoryKey, transactionLock } from "../../store/advisoryLock.js"
import { stubLayer } from "../../stubLayer.js"
import type { SessionStoreError } from "../logins/SessionStore.js"

export interface Attestation {
  readonly id: Hex
  readonly newOwner: Address
  readonly bindNonce: bigint
  readonly deadline: bigint
  readonly visibility: Visibility
}

export interface StoredAttestation extends Attestation {
  readonly revoked: boolean
  readonly issuedAt: number
}

/** The database did not answer; the cause stays here, never in a response or a log line. */
export class AttestationStoreError extends Data.TaggedError("AttestationStoreError")<{
  readonly operation: string
  readonly cause: SqlError
}> {
  override get message() {
    return `attestation store failed during ${this.operation}`
  }
}

/**
 * A stealth owner this attestor already attested for the other visibility (docs/attestor.md §4): nothing of
 * the request is recorded.
 */
export class VisibilityConflict extends Data.TaggedError("VisibilityConflict")<{
  readonly visibility: Visibility
}> {}

/** One of the contesting user's escrows, with the owner its bind proposal names, if any. */
export interface ContestedEscrow {
  readonly id: Hex
  readonly pendingOwner: Address | undefined
}

export interface AttestationStoreShape {
  /**
   * Records issued attestations (one transaction) but those whose (id, owner) a contest ruled
   * out: these are left out, recorded nothing, and returned. Re-recording one that exists
   * changes nothing: in particular a revoked attestation stays revoked. The first record of an
   * owner fixes its visibility (migration 0023); a record of it for the other kind fails with
   * `VisibilityConflict` and records nothing, also when the two race on several replicas.
   */
  readonly record: (
    attestations: ReadonlyArray<Attestation>,
    issuedAt: number,
    /**
     * Whether the session that asked is still valid, read once the ids' locks are held: false
     * fails with `SessionEnded` and records nothing (a contest of its user ended it meanwhile).
     */
    sessionValid?: Effect.Effect<boolean, SessionStoreError>
  ) => Effect.Effect<
    ReadonlyArray<Attestation>,
    AttestationStoreError | VisibilityConflict | SessionEnded | SessionStoreError
  >
  /** The visibilities a stealth owner was attested for, revoked attestations included. */
  readonly visibilitiesOf: (
    newOwner: Address
  ) => Effect.Effect<ReadonlySet<Visibility>, AttestationStoreError>
  /**
   * A contest by the user whose key is `keep`, over the user's escrows this attestor knows (one
   * transaction, under each id's lock): every owner but `keep` attested for any of the ids, and
   * each escrow's `pendingOwner` unless it is `keep`, becomes contested for every one of the ids,
   * and their attestations of the ids are revoked. How many (id, owner) pairs were newly contested.
   */
  readonly contest: (
    escrows: ReadonlyArray<ContestedEscrow>,
    keep: Address,
    now: number
  ) => Effect.Effect<number, AttestationStoreError>
  /** The owners contested for `id`, lowercase (for the veto watcher and tests). */
  readonly contestedOf: (id: Hex) => Effect.Effect<ReadonlyArray<Address>, AttestationStoreError>
  /** Every attestation of `id` (for the veto watcher and tests). */
  readonly ofId: (id: Hex) => Effect.Effect<ReadonlyArray<StoredAttestation>, AttestationStoreError>
}

export class AttestationStore extends Context.Tag("AttestationStore")<
  AttestationStore,
  AttestationStoreShape
>() {
  /** The store on the SQL client (migrations applied). */
  static readonly layer: Layer.Layer<AttestationStore, never, SqlClient> = Layer.effect(
    AttestationStore,
    Effect.suspend(() => makeAttestationStore)
  )

  /** For tests: the members given; any other use dies naming it (src/stubLayer.ts). */
  static readonly test = stubLayer(AttestationStore, {
    record: "function",
    visibilitiesOf: "function",
    contest: "function",
    contestedOf: "function",
    ofId: "function"
  })
}

/**
 * The session that asked for the signatures ended before they were recorded: a contest of its
 * user, committed under the same ids' locks, ended it. Nothing is recorded, nothing is signed.
 */
export class SessionEnded extends Data.TaggedError("SessionEnded")<{}> {}

interface AttestationRow {
  readonly beneficiary_id: string
  readonly new_owner: string
  readonly bind_nonce: string
  readonly deadline: string
  readonly visibility: string
  readonly revoked: boolean
  readonly issued_at: string | number
}

const lower = (value: string) => value.toLowerCase()

/** The transaction lock of an escrow id that orders its contests and records (see above). */
const idLockKey = (id: string) => advisoryKey(`attestor-contest:${lower(id)}`)

export const makeAttestationStore = Effect.gen(function* () {
  const sql = yield* SqlClient
  const failed = (operation: string) => (cause: SqlError) => new AttestationStoreError({ operation, cause })

  /**
   * Fixes `owner` to `visibility` unless it is fixed already, then reads what it is fixed to. A
   * concurrent transaction inserting the same owner waits for this one on the primary key, then
   * reads the committed row (each statement reads afresh under READ COMMITTED).
   */
  const claimVisibility = (owner: string, visibility: Visibility) =>
    sql`
      INSERT INTO attestor_owner_visibility (new_owner, visibility) VALUES (${owner}, ${visibility})
      ON CONFLICT (new_owner) DO NOTHING`.pipe(
      Effect.zipRight(
        sql<{ readonly visibility: string }>`
          SELECT visibility FROM attestor_owner_visibility WHERE new_owner = ${owner}`
      ),
      Effect.flatMap((rows) =>
        rows[0]?.visibility === visibility ? Effect.void : Effect.fail(new VisibilityConflict({ visibility }))
      )
    )

  /**
   * Takes the transaction lock of each id, in one order so two transactions never wait on each
   * other. On the embedded database every transaction holds its single connection, so they
   * never interleave anyway.
   */
  const lockIds = (ids: Iterable<string>) =>
    Effect.forEach([...new Set([...ids].map(lower))].sort(), (id) => transactionLock(sql, idLockKey(id)), {
      discard: true
    })

  const record: AttestationStoreShape["record"] = (attestations, issuedAt, sessionValid) => {
    if (attestations.length === 0) return Effect.succeed([])
    return Effect.gen(function* () {
      // The ids' locks first: a contest of one of them commits before this reads, or waits.
      yield* lockIds(attestations.map((a) => a.id))
      // A contest commits the end of the user's older sessions with its rulings, under these
      // locks: a session it ended reads as gone here, whatever key it holds.
      if (sessionValid !== undefined && !(yield* sessionValid)) return yield* new SessionEnded()
      const ids = [...new Set(attestations.map((a) => lower(a.id)))]
      const contested = yield* sql<{ readonly beneficiary_id: string; readonly owner: string }>`
        SELECT beneficiary_id, owner FROM attestor_contests WHERE beneficiary_id IN ${sql.in(ids)}`
      const ruledOut = new Set(contested.map((row) => `${row.beneficiary_id}:${row.owner}`))
      const isRuledOut = (a: Attestation) => ruledOut.has(`${lower(a.id)}:${lower(a.newOwner)}`)
      const kept = attestations.filter((a) => !isRuledOut(a))
      const owners = new Map(kept.map((a) => [`${lower(a.newOwner)}:${a.visibility}`, a]))
      yield* Effect.forEach(owners.values(), (a) => claimVisibility(lower(a.newOwner), a.visibility), {
        discard: true
      })
      yield* Effect.forEach(
        kept,
        (a) => sql`
          INSERT INTO attestor_attestations
            (beneficiary_id, new_owner, bind_nonce, deadline, visibility, revoked, issued_at)
          VALUES (${lower(a.id)}, ${lower(a.newOwner)}, ${a.bindNonce.toString()},
            ${a.deadline.toString()}, ${a.visibility}, false, ${issuedAt})
          ON CONFLICT (beneficiary_id, new_owner, bind_nonce, deadline) DO NOTHING`,
        { discard: true }
      )
      return attestations.filter(isRuledOut)
    }).pipe(
      sql.withTransaction,
      Effect.catchTag("SqlError", (cause) => Effect.fail(failed("recording attestations")(cause)))
    )
  }

  const visibilitiesOf: AttestationStoreShape["visibilitiesOf"] = (newOwner) =>
    sql<{ readonly visibility: string }>`
      SELECT DISTINCT visibility FROM attestor_attestations WHERE new_owner = ${lower(newOwner)}`.pipe(
      Effect.mapError(failed("reading attestations")),
      Effect.map((rows) => new Set(rows.map((row) => row.visibility as Visibility)))
    )

  const contest: AttestationStoreShape["contest"] = (escrows, keep, now) => {
    const ids = [...new Set(escrows.map((e) => lower(e.id)))].sort()
    if (ids.length === 0) return Effect.succeed(0)
    return Effect.gen(function* () {
      yield* lockIds(ids)
      // Every other owner attested for any of the ids, revoked or not, and the pending ones.
      const attested = yield* sql<{ readonly new_owner: string }>`
        SELECT DISTINCT new_owner FROM attestor_attestations
        WHERE beneficiary_id IN ${sql.in(ids)} AND new_owner <> ${lower(keep)}`
      const owners = new Set(attested.map((row) => row.new_owner))
      for (const e of escrows)
        if (e.pendingOwner !== undefined && lower(e.pendingOwner) !== lower(keep))
          owners.add(lower(e.pendingOwner))
      let added = 0
      for (const id of ids)
        for (const owner of [...owners].sort()) {
          const inserted = yield* sql<{ readonly owner: string }>`
            INSERT INTO attestor_contests (beneficiary_id, owner, contested_at)
            VALUES (${id}, ${owner}, ${now})
            ON CONFLICT (beneficiary_id, owner) DO NOTHING
            RETURNING owner`
          added += inserted.length
        }
      yield* sql`
        UPDATE attestor_attestations SET revoked = true
        WHERE beneficiary_id IN ${sql.in(ids)} AND new_owner <> ${lower(keep)} AND NOT revoked`
      return added
    }).pipe(
      sql.withTransaction,
      Effect.catchTag("SqlError", (cause) => Effect.fail(failed("recording a contest")(cause)))
    )
  }

  const contestedOf: AttestationStoreShape["contestedOf"] = (id) =>
    sql<{ readonly owner: string }>`
      SELECT owner FROM attestor_contests WHERE beneficiary_id = ${lower(id)} ORDER BY owner`.pipe(
      Effect.mapError(failed("reading contests")),
      Effect.map((rows) => rows.map((row) => row.owner as Address))
    )

  const ofId: AttestationStoreShape["ofId"] = (id) =>
    sql<AttestationRow>`
      SELECT beneficiary_id, new_owner, bind_nonce, deadline, visibility, revoked, issued_at
      FROM attestor_attestations WHERE beneficiary_id = ${lower(id)}
      ORDER BY issued_at, new_owner, bind_nonce, deadline`.pipe(
      Effect.mapError(failed("reading attestations")),
      Effect.map((rows) =>
        rows.map((row) => ({
          id: row.beneficiary_id as Hex,
          newOwner: row.new_owner as Address,
          bindNonce: BigInt(row.bind_nonce),
          deadline: BigInt(row.deadline),
          visibility: row.visibility as Visibility,
          revoked: row.revoked,
          issuedAt: Number(row.issued_at)
        }))
      )
    )

  return { record, visibilitiesOf, contest, contestedOf, ofId } satisfies AttestationStoreShape
})

export const ATTESTATION_STORE_UNAVAILABLE = "the attestation store is not answering"

export const attestationStoreUnavailable = (_: AttestationStoreError): Unavailable =>
  new Unavailable({ message: ATTESTATION_STORE_UNAVAILABLE })
