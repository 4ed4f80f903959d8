/**
 * The record of the veto watcher's judged proposals (migration 0022, `attestor_bind_proposals`,
 * keyed by id and bind nonce; docs/attestor.md §6): each proposal's last verdict, so
 * `attestor_bind_proposals_total{verdict}` counts a verdict once per proposal (again only when it
 * changes), across restarts; and its veto: claimed (`sending`) in the database before anything is
 * sent, and made `sent` with its hash by the very statement that stores the transaction
 * (`TxRequest.storedWith`), so a proposal is vetoed once whatever restarts or replicas do.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Data, Effect, Layer, Option } from "effect"
import type { Hex } from "viem"
import type { TxRequest } from "../../txsender/TxSenderShape.js"
import type { Handled, Verdict, VetoState } from "./vetoVerdicts.js"

/**
 * A claim (`sending`) this old with no transaction stored is one whose process stopped or failed
 * between claiming and recording: a stored veto turns its row `sent` in the statement that stores
 * it, so the claim can be taken again.
 */
export const STALE_CLAIM_SECONDS = 600

export class ProposalStoreError extends Data.TaggedError("ProposalStoreError")<{
  readonly operation: string
  readonly cause: SqlError
}> {
  override get message() {
    return `bind proposal store failed during ${this.operation}`
  }
}

export interface ProposalStoreShape {
  readonly get: (id: Hex, bindNonce: bigint) => Effect.Effect<Option.Option<Handled>, ProposalStoreError>
  /** Records the verdict (creating the row with no veto). */
  readonly setVerdict: (
    id: Hex,
    bindNonce: bigint,
    verdict: Verdict,
    now: number
  ) => Effect.Effect<void, ProposalStoreError>
  /**
   * Claims the veto (`none`, `skipped` or a stale `sending` → `sending`); false when another
   * process or pass has it.
   */
  readonly claimVeto: (id: Hex, bindNonce: bigint, now: number) => Effect.Effect<boolean, ProposalStoreError>
  /** The sender's part of storing the veto: the claimed row becomes `sent` with its hash. */
  readonly linkVeto: (id: Hex, bindNonce: bigint) => NonNullable<TxRequest["storedWith"]>
  /** A `sent` veto whose transaction reverted or was dropped: `none` again, to be sent again. */
  readonly reopenVeto: (
    id: Hex,
    bindNonce: bigint,
    txHash: Hex,
    now: number
  ) => Effect.Effect<void, ProposalStoreError>
  /** Ends a claimed veto: `sent` with the hash, or `none` again (nothing was sent). */
  readonly endVeto: (
    id: Hex,
    bindNonce: bigint,
    veto: Exclude<VetoState, "sending">,
    txHash: Hex | undefined,
    now: number
  ) => Effect.Effect<void, ProposalStoreError>
}

interface ProposalRow {
  readonly verdict: string
  readonly veto: string
  readonly tx_hash: string | null
}

export const makeProposalStore = Effect.gen(function* () {
  const sql = yield* SqlClient
  const failed = (operation: string) => (cause: SqlError) => new ProposalStoreError({ operation, cause })
  const lower = (id: Hex) => id.toLowerCase()

  const get: ProposalStoreShape["get"] = (id, bindNonce) =>
    sql<ProposalRow>`
      SELECT verdict, veto, tx_hash FROM attestor_bind_proposals
      WHERE beneficiary_id = ${lower(id)} AND bind_nonce = ${bindNonce.toString()}`.pipe(
      Effect.mapError(failed("reading proposals")),
      Effect.map((rows) =>
        Option.map(Option.fromNullable(rows[0]), (row) => ({
          verdict: row.verdict as Verdict,
          veto: row.veto as VetoState,
          ...(row.tx_hash === null ? {} : { txHash: row.tx_hash as Hex })
        }))
      )
    )

  const setVerdict: ProposalStoreShape["setVerdict"] = (id, bindNonce, verdict, now) =>
    sql`
      INSERT INTO attestor_bind_proposals (beneficiary_id, bind_nonce, verdict, veto, updated_at)
      VALUES (${lower(id)}, ${bindNonce.toString()}, ${verdict}, 'none', ${now})
      ON CONFLICT (beneficiary_id, bind_nonce)
      DO UPDATE SET verdict = excluded.verdict, updated_at = excluded.updated_at`.pipe(
      Effect.asVoid,
      Effect.mapError(failed("recording a verdict"))
    )

  const claimVeto: ProposalStoreShape["claimVeto"] = (id, bindNonce, now) =>
    sql<{ readonly veto: string }>`
      UPDATE attestor_bind_proposals SET veto = 'sending', tx_hash = NULL, updated_at = ${now}
      WHERE beneficiary_id = ${lower(id)} AND bind_nonce = ${bindNonce.toString()}
        AND (veto IN ('none', 'skipped') OR (veto = 'sending' AND updated_at < ${now - STALE_CLAIM_SECONDS}))
      RETURNING veto`.pipe(
      Effect.map((rows) => rows.length === 1),
      Effect.mapError(failed("claiming a veto"))
    )

  const linkVeto: ProposalStoreShape["linkVeto"] = (id, bindNonce) => (txHash) =>
    sql`
      UPDATE attestor_bind_proposals SET veto = 'sent', tx_hash = ${txHash.toLowerCase()}
      WHERE beneficiary_id = ${lower(id)} AND bind_nonce = ${bindNonce.toString()} AND veto = 'sending'`

  const reopenVeto: ProposalStoreShape["reopenVeto"] = (id, bindNonce, txHash, now) =>
    sql`
      UPDATE attestor_bind_proposals SET veto = 'none', tx_hash = NULL, updated_at = ${now}
      WHERE beneficiary_id = ${lower(id)} AND bind_nonce = ${bindNonce.toString()}
        AND veto = 'sent' AND tx_hash = ${txHash.toLowerCase()}`.pipe(
      Effect.asVoid,
      Effect.mapError(failed("reopening a veto"))
    )

  const endVeto: ProposalStoreShape["endVeto"] = (id, bindNonce, veto, txHash, now) =>
    sql`
      UPDATE attestor_bind_proposals
      SET veto = ${veto}, tx_hash = ${txHash === undefined ? null : txHash.toLowerCase()}, updated_at = ${now}
      WHERE beneficiary_id = ${lower(id)} AND bind_nonce = ${bindNonce.toString()} AND veto = 'sending'`.pipe(
      Effect.asVoid,
      Effect.mapError(failed("recording a veto"))
    )

  return { get, setVerdict, claimVeto, linkVeto, reopenVeto, endVeto } satisfies ProposalStoreShape
})

export class ProposalStore extends Context.Tag("ProposalStore")<ProposalStore, ProposalStoreShape>() {
  /** The record in the attestor's database. */
  static readonly layer: Layer.Layer<ProposalStore, never, SqlClient> = Layer.effect(
    ProposalStore,
    makeProposalStore
  )
}
