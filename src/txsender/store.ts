/**
 * The sender's outbox in SQL (migration 0010): transactions with the nonce they hold and how they
 * ended, and every signed attempt, written before it is broadcast.
 */

import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type * as Statement from "@effect/sql/Statement"
import { Data, Effect, Option } from "effect"
import type { Address, Hex } from "viem"

export class TxStoreError extends Data.TaggedError("TxStoreError")<{
  readonly operation: string
  readonly cause: SqlError
}> {
  override get message() {
    return `transaction store failed during ${this.operation}`
  }
}

/**
 * The database answered the statement with an error (an ErrorResponse: a SQLSTATE and a
 * severity), so it was rolled back. Without one its answer was lost (a connection closed), and an
 * autocommitted statement may have been stored, or may still be.
 */
export const refusedByDatabase = (error: SqlError): boolean => {
  const cause: unknown = error.cause
  return (
    typeof cause === "object" &&
    cause !== null &&
    "code" in cause &&
    "severity" in cause &&
    typeof cause.code === "string" &&
    /^[0-9A-Z]{5}$/.test(cause.code) &&
    typeof cause.severity === "string"
  )
}

/** Why a transaction exists: a caller's request, or a no-op self-transfer filling a nonce gap. */
export type TxPurpose = "request" | "filler"

/**
 * How an attempt came about: the first signature, a re-signature at submission with higher fees
 * (`reprice`), a fee bump of a stuck one, a no-op at the same nonce replacing one that would now
 * revert, or a re-signature at a new nonce (`renonce`): an outsider used the old one, or, before
 * it was ever broadcast, a refusal below it in its batch freed a lower one (src/txsender/submit.ts).
 */
export type AttemptKind = "original" | "reprice" | "bump" | "cancel" | "renonce"

export type TxState = "pending" | "mined" | "dropped"
export type MinedOutcome = "success" | "reverted" | "cancelled"

export interface Payload {
  readonly to: Address
  readonly data: Hex
  readonly value: bigint
  readonly gas: bigint
}

export interface SignedAttempt {
  readonly hash: Hex
  readonly nonce: bigint
  readonly kind: AttemptKind
  readonly maxFeePerGas: bigint
  readonly maxPriorityFeePerGas: bigint
  readonly raw: Hex
}

/** A transaction about to be stored with its first signature (`insert`). */
export interface NewTransaction {
  readonly purpose: TxPurpose
  readonly payload: Payload
  readonly attempt: SignedAttempt
  /** The requester's own write, part of the statement (`TxRequest.storedWith`). */
  readonly storedWith?: Statement.Fragment | undefined
}

export interface StoredAttempt extends SignedAttempt {
  /** Milliseconds since it was signed, by the database's clock (shared by every replica). */
  readonly ageMs: number
  /** A replacement the node refused when it was broadcast (`markRefused`). */
  readonly refused: boolean
}

export interface StoredTx {
  readonly id: string
  readonly nonce: bigint
  readonly purpose: TxPurpose
  readonly payload: Payload
  readonly state: TxState
  readonly outcome: string | null
  readonly blockNumber: bigint | null
  /** The attempt that was mined, while `state` is mined. */
  readonly minedHash: Hex | null
  /** The hash of the block its receipt named (none for those mined before migration 0027). */
  readonly minedBlockHash: Hex | null
  /** Mined and at least `TX_CONFIRMATIONS` deep: no longer watched for reorgs. */
  readonly confirmed: boolean
  /** Oldest first; never empty. */
  readonly attempts: ReadonlyArray<StoredAttempt>
}

interface TxRow {
  readonly id: string
  readonly nonce: string
  readonly purpose: string
  readonly to_address: string
  readonly data: string
  readonly value: string
  readonly gas: string
  readonly state: string
  readonly outcome: string | null
  readonly block_number: string | null
  readonly mined_hash: string | null
  readonly mined_block_hash: string | null
  readonly confirmed: boolean
}

interface AttemptRow {
  readonly tx_id: string
  readonly hash: string
  readonly nonce: string
  readonly kind: string
  readonly max_fee_per_gas: string
  readonly max_priority_fee_per_gas: string
  readonly raw: string
  readonly age_ms: string
}

const attemptKinds: ReadonlyArray<AttemptKind> = ["original", "reprice", "bump", "cancel", "renonce"]
const states: ReadonlyArray<TxState> = ["pending", "mined", "dropped"]

/**
 * A replacement the node refused keeps its kind with this mark (`bump:refused`): the kind still
 * says what the attempt is, should a later re-broadcast of it be mined (a no-op is `cancelled`).
 */
const REFUSED_MARK = ":refused"

const attemptOf = (row: AttemptRow): StoredAttempt => {
  const refused = row.kind.endsWith(REFUSED_MARK)
  const kind = refused ? row.kind.slice(0, -REFUSED_MARK.length) : row.kind
  return {
    hash: row.hash as Hex,
    nonce: BigInt(row.nonce),
    kind: attemptKinds.find((k) => k === kind) ?? "original",
    maxFeePerGas: BigInt(row.max_fee_per_gas),
    maxPriorityFeePerGas: BigInt(row.max_priority_fee_per_gas),
    raw: row.raw as Hex,
    ageMs: Number(row.age_ms),
    refused
  }
}

const txOf = (row: TxRow, attempts: ReadonlyArray<StoredAttempt>): StoredTx => ({
  id: String(row.id),
  nonce: BigInt(row.nonce),
  purpose: row.purpose === "filler" ? "filler" : "request",
  payload: {
    to: row.to_address as Address,
    data: row.data as Hex,
    value: BigInt(row.value),
    gas: BigInt(row.gas)
  },
  state: states.find((s) => s === row.state) ?? "pending",
  outcome: row.outcome,
  blockNumber: row.block_number === null ? null : BigInt(row.block_number),
  minedHash: row.mined_hash === null ? null : (row.mined_hash as Hex),
  minedBlockHash: row.mined_block_hash === null ? null : (row.mined_block_hash as Hex),
  confirmed: row.confirmed === true,
  attempts
})

/** Where a transaction was mined: which attempt, how it went, and in which block. */
export interface MinedRecord {
  readonly txId: string
  readonly outcome: MinedOutcome
  readonly hash: Hex
  readonly blockNumber: bigint
  readonly blockHash: Hex
}

const recordOf = (record: MinedRecord) => ({
  id: record.txId,
  outcome: record.outcome,
  hash: record.hash,
  block_hash: record.blockHash,
  block_number: record.blockNumber.toString()
})

export interface Sender {
  readonly chainId: number
  /** Lowercase, as stored. */
  readonly address: Address
}

/** Wraps every operation of the store, e.g. to serialize statements on an embedded database. */
export type StatementGuard = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>

export const makeTxStore = (guard: StatementGuard) =>
  Effect.map(SqlClient, (sql) => {
    const failed =
      (operation: string) =>
      (cause: SqlError): TxStoreError =>
        new TxStoreError({ operation, cause })

    const insertAttempt = (txId: string, attempt: SignedAttempt) =>
      sql`
      INSERT INTO relayer_tx_attempts
        (hash, tx_id, nonce, kind, max_fee_per_gas, max_priority_fee_per_gas, raw)
      VALUES (${attempt.hash}, ${txId}, ${attempt.nonce.toString()}, ${attempt.kind},
        ${attempt.maxFeePerGas.toString()}, ${attempt.maxPriorityFeePerGas.toString()}, ${attempt.raw})
      ON CONFLICT (hash, tx_id) DO NOTHING`

    const attemptsOf = (ids: ReadonlyArray<string>) =>
      ids.length === 0
        ? Effect.succeed(new Map<string, Array<StoredAttempt>>())
        : sql<AttemptRow>`
          SELECT tx_id, hash, nonce, kind, max_fee_per_gas, max_priority_fee_per_gas, raw,
            floor(EXTRACT(EPOCH FROM (now() - signed_at)) * 1000)::bigint AS age_ms
          FROM relayer_tx_attempts WHERE tx_id IN ${sql.in(ids)} ORDER BY seq`.pipe(
            Effect.map((rows) => {
              const byTx = new Map<string, Array<StoredAttempt>>()
              for (const row of rows) {
                const key = String(row.tx_id)
                const list = byTx.get(key) ?? []
                list.push(attemptOf(row))
                byTx.set(key, list)
              }
              return byTx
            })
          )

    const withAttempts = (rows: ReadonlyArray<TxRow>) =>
      Effect.map(attemptsOf(rows.map((r) => String(r.id))), (byTx) =>
        rows.flatMap((row) => {
          const attempts = byTx.get(String(row.id)) ?? []
          return attempts.length === 0 ? [] : [txOf(row, attempts)]
        })
      )

    const columns = sql.literal(
      "id, nonce, purpose, to_address, data, value, gas, state, outcome, block_number, mined_hash, mined_block_hash, confirmed_at IS NOT NULL AS confirmed"
    )

    const ops = {
      /** One above the highest nonce held by a live (pending or mined) transaction; 0 when none. */
      nextNonce: (sender: Sender) =>
        sql<{ readonly next: string | null }>`
        SELECT MAX(nonce) + 1 AS next FROM relayer_txs
        WHERE chain_id = ${sender.chainId} AND sender = ${sender.address} AND state <> 'dropped'`.pipe(
          Effect.map((rows) => {
            const next = rows[0]?.next
            return next === null || next === undefined ? 0n : BigInt(next)
          }),
          Effect.mapError(failed("nextNonce"))
        ),

      /**
       * Stores new transactions, each with its first signature, at the nonces they were signed at
       * (distinct); returns their ids in the order given. One statement, so one round trip for a
       * whole batch of requests (src/txsender/submit.ts) and all of it or nothing; each
       * `storedWith` is a part of it.
       */
      insert: (sender: Sender, entries: ReadonlyArray<NewTransaction>) => {
        const rows = JSON.stringify(
          entries.map(({ purpose, payload, attempt }, i) => ({
            i,
            nonce: attempt.nonce.toString(),
            purpose,
            to_address: payload.to.toLowerCase(),
            data: payload.data,
            value: payload.value.toString(),
            gas: payload.gas.toString(),
            hash: attempt.hash,
            kind: attempt.kind,
            max_fee_per_gas: attempt.maxFeePerGas.toString(),
            max_priority_fee_per_gas: attempt.maxPriorityFeePerGas.toString(),
            raw: attempt.raw
          }))
        )
        const links = entries.reduce(
          (fragment, entry, i) =>
            entry.storedWith === undefined
              ? fragment
              : sql`${fragment}, ${sql.literal(`stored_with_${i}`)} AS (${entry.storedWith})`,
          sql.literal("")
        )
        return sql<{ readonly i: number; readonly id: string }>`
          WITH input AS (
            SELECT * FROM jsonb_to_recordset(${rows}::jsonb) AS r(i integer, nonce bigint,
              purpose text, to_address text, data text, value numeric, gas numeric, hash text, kind text,
              max_fee_per_gas numeric, max_priority_fee_per_gas numeric, raw text)
          ), tx AS (
            INSERT INTO relayer_txs (chain_id, sender, nonce, purpose, to_address, data, value, gas, state)
            SELECT ${sender.chainId}, ${sender.address}, nonce, purpose, to_address, data, value, gas, 'pending'
            FROM input ORDER BY i
            RETURNING id, nonce
          ), first_attempt AS (
            INSERT INTO relayer_tx_attempts
              (hash, tx_id, nonce, kind, max_fee_per_gas, max_priority_fee_per_gas, raw)
            SELECT input.hash, tx.id, input.nonce, input.kind, input.max_fee_per_gas,
              input.max_priority_fee_per_gas, input.raw
            FROM input JOIN tx ON tx.nonce = input.nonce ORDER BY input.i
          )${links}
          SELECT input.i, tx.id FROM input JOIN tx ON tx.nonce = input.nonce ORDER BY input.i`.pipe(
          Effect.flatMap((rows) =>
            rows.length === entries.length
              ? Effect.succeed(rows.map((row) => String(row.id)))
              : Effect.dieMessage("the store answered for another number of transactions")
          ),
          Effect.mapError(failed("insert"))
        )
      },

      /**
       * Stores another signature of a transaction; a new nonce moves the transaction with it (an
       * outsider used the old one, or a refusal below it in its batch freed a lower one).
       */
      addAttempt: (txId: string, attempt: SignedAttempt) =>
        Effect.gen(function* () {
          yield* sql`
          UPDATE relayer_txs SET nonce = ${attempt.nonce.toString()}
          WHERE id = ${txId} AND nonce <> ${attempt.nonce.toString()}`
          yield* insertAttempt(txId, attempt)
        }).pipe(sql.withTransaction, Effect.mapError(failed("addAttempt"))),

      /**
       * The node refused a replacement when it was broadcast: it no longer counts toward
       * `TX_MAX_REPLACEMENTS` (src/txsender/decisions.ts `replacementsOf`). The one change ever
       * made to a stored attempt; its fees stay, so the next replacement still bumps over them.
       */
      markRefused: (txId: string, hash: Hex) =>
        sql`
        UPDATE relayer_tx_attempts SET kind = kind || ${REFUSED_MARK}
        WHERE tx_id = ${txId} AND hash = ${hash} AND kind IN ('bump', 'cancel')`.pipe(
          Effect.asVoid,
          Effect.mapError(failed("markRefused"))
        ),

      /**
       * Records pending transactions as mined, all in one statement: a round settles every
       * transaction of a block at once.
       */
      markMined: (settled: ReadonlyArray<MinedRecord>) =>
        settled.length === 0
          ? Effect.void
          : sql`
        UPDATE relayer_txs t
        SET state = 'mined', outcome = r.outcome, mined_hash = r.hash, mined_block_hash = r.block_hash,
          block_number = r.block_number, settled_at = now()
        FROM jsonb_to_recordset(${JSON.stringify(settled.map(recordOf))}::jsonb)
          AS r(id bigint, outcome text, hash text, block_hash text, block_number bigint)
        WHERE t.id = r.id AND t.state = 'pending'`.pipe(Effect.asVoid, Effect.mapError(failed("markMined"))),

      /**
       * A reorg moved a mined, unconfirmed transaction: another of its attempts, or another
       * block, holds it now.
       */
      remined: (record: MinedRecord) =>
        sql`
        UPDATE relayer_txs
        SET outcome = ${record.outcome}, mined_hash = ${record.hash}, mined_block_hash = ${record.blockHash},
          block_number = ${record.blockNumber.toString()}, settled_at = now()
        WHERE id = ${record.txId} AND state = 'mined' AND confirmed_at IS NULL`.pipe(
          Effect.asVoid,
          Effect.mapError(failed("remined"))
        ),

      /** A reorg took a mined, unconfirmed transaction out of the chain: it is pending again. */
      unmined: (txId: string) =>
        sql`
        UPDATE relayer_txs
        SET state = 'pending', outcome = NULL, mined_hash = NULL, mined_block_hash = NULL, block_number = NULL,
          settled_at = NULL
        WHERE id = ${txId} AND state = 'mined' AND confirmed_at IS NULL`.pipe(
          Effect.asVoid,
          Effect.mapError(failed("unmined"))
        ),

      /** Deep enough: no longer watched for reorgs. One statement for a round's transactions. */
      markConfirmed: (txIds: ReadonlyArray<string>) =>
        txIds.length === 0
          ? Effect.void
          : sql`
        UPDATE relayer_txs SET confirmed_at = now()
        WHERE id IN ${sql.in(txIds)} AND state = 'mined' AND confirmed_at IS NULL`.pipe(
              Effect.asVoid,
              Effect.mapError(failed("markConfirmed"))
            ),

      /** For a transaction no node holds: its nonce is free again. */
      markDropped: (txId: string, reason: string) =>
        sql`
        UPDATE relayer_txs SET state = 'dropped', outcome = ${reason}, settled_at = now()
        WHERE id = ${txId} AND state = 'pending'`.pipe(Effect.asVoid, Effect.mapError(failed("markDropped"))),

      /** Every pending transaction of the sender, lowest nonce first. */
      pending: (sender: Sender) =>
        sql<TxRow>`
        SELECT ${columns} FROM relayer_txs
        WHERE chain_id = ${sender.chainId} AND sender = ${sender.address} AND state = 'pending'
        ORDER BY nonce`.pipe(Effect.flatMap(withAttempts), Effect.mapError(failed("pending"))),

      /** Mined transactions of the sender still watched for reorgs, lowest nonce first. */
      unconfirmed: (sender: Sender) =>
        sql<TxRow>`
        SELECT ${columns} FROM relayer_txs
        WHERE chain_id = ${sender.chainId} AND sender = ${sender.address} AND state = 'mined'
          AND confirmed_at IS NULL
        ORDER BY nonce`.pipe(Effect.flatMap(withAttempts), Effect.mapError(failed("unconfirmed"))),

      /** How many transactions of the sender are pending, and the nonce the next one gets. */
      summary: (sender: Sender) =>
        sql<{ readonly pending: string | number; readonly next: string | null }>`
        SELECT count(*) FILTER (WHERE state = 'pending') AS pending,
          MAX(nonce) FILTER (WHERE state <> 'dropped') + 1 AS next
        FROM relayer_txs WHERE chain_id = ${sender.chainId} AND sender = ${sender.address}`.pipe(
          Effect.map((rows) => ({
            pending: Number(rows[0]?.pending ?? 0),
            nextNonce: rows[0]?.next === null || rows[0]?.next === undefined ? 0n : BigInt(rows[0].next)
          })),
          Effect.mapError(failed("summary"))
        ),

      /** The transaction a hash was sent under, by any of its attempts; a live one before a dropped one. */
      byHash: (hash: Hex) =>
        sql<TxRow>`
        SELECT t.id, t.nonce, t.purpose, t.to_address, t.data, t.value, t.gas, t.state, t.outcome,
          t.block_number, t.mined_hash, t.mined_block_hash, t.confirmed_at IS NOT NULL AS confirmed
        FROM relayer_tx_attempts a JOIN relayer_txs t ON t.id = a.tx_id
        WHERE a.hash = ${hash.toLowerCase()}
        ORDER BY t.state = 'dropped', a.seq DESC
        LIMIT 1`.pipe(
          Effect.flatMap(withAttempts),
          Effect.map((txs) => Option.fromNullable(txs[0])),
          Effect.mapError(failed("byHash"))
        )
    }
    return {
      nextNonce: (sender: Sender) => guard(ops.nextNonce(sender)),
      insert: (sender: Sender, entries: ReadonlyArray<NewTransaction>) => guard(ops.insert(sender, entries)),
      addAttempt: (txId: string, attempt: SignedAttempt) => guard(ops.addAttempt(txId, attempt)),
      markRefused: (txId: string, hash: Hex) => guard(ops.markRefused(txId, hash)),
      markMined: (settled: ReadonlyArray<MinedRecord>) => guard(ops.markMined(settled)),
      markDropped: (txId: string, reason: string) => guard(ops.markDropped(txId, reason)),
      remined: (record: MinedRecord) => guard(ops.remined(record)),
      unmined: (txId: string) => guard(ops.unmined(txId)),
      markConfirmed: (txIds: ReadonlyArray<string>) => guard(ops.markConfirmed(txIds)),
      pending: (sender: Sender) => guard(ops.pending(sender)),
      unconfirmed: (sender: Sender) => guard(ops.unconfirmed(sender)),
      summary: (sender: Sender) => guard(ops.summary(sender)),
      byHash: (hash: Hex) => guard(ops.byHash(hash))
    }
  })

export type TxStore = Effect.Effect.Success<ReturnType<typeof makeTxStore>>
