/**
 * The attestor's record of the `BindOwner` signatures it issued (migration 0021): what `/v1/bind`
 * signed, per escrow id, new owner, bind nonce and deadline, with the escrow's visibility and a
 * revoked flag. The veto watcher (`VetoWatcher.ts`) vetoes a pending proposal whose id, new owner
 * and bind nonce have no unrevoked attestation here; a contest revokes the attestations of an id
 * for every other owner.
 *
 * Nothing stored here reaches a log line, a metric or an error message.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Data, Effect, Layer } from "effect"
import type { Address, Hex } from "viem"
import type { Visibility } from "../../schema/attestor.js"
import { Unavailable } from "../../schema/errors.js"

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

export interface AttestationStoreShape {
  /**
   * Records issued attestations (one transaction). Re-recording one that exists changes nothing:
   * in particular a revoked attestation stays revoked. The first record of an owner fixes its
   * visibility (migration 0023); a record of it for the other kind fails with
   * `VisibilityConflict` and records nothing, also when the two race on several replicas.
   */
  readonly record: (
    attestations: ReadonlyArray<Attestation>,
    issuedAt: number
  ) => Effect.Effect<void, AttestationStoreError | VisibilityConflict>
  /** The visibilities a stealth owner was attested for, revoked attestations included. */
  readonly visibilitiesOf: (
    newOwner: Address
  ) => Effect.Effect<ReadonlySet<Visibility>, AttestationStoreError>
  /** Revokes the unrevoked attestations of `id` for every owner but `keep`; how many were revoked. */
  readonly revokeOthers: (id: Hex, keep: Address) => Effect.Effect<number, AttestationStoreError>
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

  /** For wiring that signs no bind (tests of other routes): any use is a defect saying so. */
  static readonly unused: Layer.Layer<AttestationStore> = Layer.succeed(AttestationStore, {
    record: () => Effect.dieMessage("AttestationStore.unused: this wiring has no attestation store"),
    visibilitiesOf: () => Effect.dieMessage("AttestationStore.unused: this wiring has no attestation store"),
    revokeOthers: () => Effect.dieMessage("AttestationStore.unused: this wiring has no attestation store"),
    ofId: () => Effect.dieMessage("AttestationStore.unused: this wiring has no attestation store")
  })
}

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

  const record: AttestationStoreShape["record"] = (attestations, issuedAt) => {
    if (attestations.length === 0) return Effect.void
    const owners = new Map(attestations.map((a) => [`${lower(a.newOwner)}:${a.visibility}`, a]))
    return Effect.forEach(owners.values(), (a) => claimVisibility(lower(a.newOwner), a.visibility), {
      discard: true
    }).pipe(
      Effect.zipRight(
        Effect.forEach(
          attestations,
          (a) => sql`
            INSERT INTO attestor_attestations
              (beneficiary_id, new_owner, bind_nonce, deadline, visibility, revoked, issued_at)
            VALUES (${lower(a.id)}, ${lower(a.newOwner)}, ${a.bindNonce.toString()},
              ${a.deadline.toString()}, ${a.visibility}, false, ${issuedAt})
            ON CONFLICT (beneficiary_id, new_owner, bind_nonce, deadline) DO NOTHING`,
          { discard: true }
        )
      ),
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

  const revokeOthers: AttestationStoreShape["revokeOthers"] = (id, keep) =>
    sql<{ readonly beneficiary_id: string }>`
      UPDATE attestor_attestations SET revoked = true
      WHERE beneficiary_id = ${lower(id)} AND new_owner <> ${lower(keep)} AND NOT revoked
      RETURNING beneficiary_id`.pipe(
      Effect.mapError(failed("revoking attestations")),
      Effect.map((rows) => rows.length)
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

  return { record, visibilitiesOf, revokeOthers, ofId } satisfies AttestationStoreShape
})

export const ATTESTATION_STORE_UNAVAILABLE = "the attestation store is not answering"

export const attestationStoreUnavailable = (_: AttestationStoreError): Unavailable =>
  new Unavailable({ message: ATTESTATION_STORE_UNAVAILABLE })
