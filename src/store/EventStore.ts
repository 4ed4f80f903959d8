/**
 * The event store of one database: decoded vault logs, block headers of the unfinalized range,
 * orphan markers, the ranges the indexer has completed and nonce corrections.
 *
 * Events, orphan markers, ranges and nonce corrections are append-only: never updated or
 * deleted. A reorg appends orphan markers and readers skip events of orphaned blocks. Block
 * headers only serve reorg detection (finding the common ancestor near the indexed tip), so the
 * writer prunes those below the finality horizon of every vault of the chain (`pruneHeaders`).
 * Losing one is never wrong, only coarser: event blocks and range ends stay stored, and a walk
 * back that finds no header still finds an ancestor among them.
 *
 * Writes are transactions that first take a per-chain transaction lock, so rows of one chain are
 * committed in the order of their sequence numbers and a reader fetching "everything after seq n"
 * never skips a row. Each write also checks that the writer's view is still current (no range
 * committed meanwhile, its base block still canonical): with two writers racing, the later one
 * fails with `WriterConflict` instead of appending a branch the store has already left.
 */

import { SqlClient } from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import { Context, Data, Effect, Layer, type Scope } from "effect"
import type { Address, Hex } from "viem"
import {
  advisoryKey,
  inProcessLock,
  isEmbeddedDatabase,
  sessionLock,
  transactionLock
} from "./advisoryLock.js"

export interface VaultRef {
  readonly chainId: number
  readonly vault: Address
}

export interface BlockRef {
  readonly number: number
  readonly hash: Hex
}

export interface BlockHeader extends BlockRef {
  readonly parentHash: Hex
}

/** A decoded vault log; `args` is JSON with uint256 values as exact decimal strings. */
export interface StoredEvent {
  readonly blockNumber: number
  readonly blockHash: Hex
  readonly logIndex: number
  readonly txHash: Hex
  readonly eventName: string
  readonly args: Readonly<Record<string, unknown>>
}

/** All vault logs of blocks `fromBlock..toBlock` of the chain ending in `toHash` are stored. */
export interface IndexedRange {
  readonly seq: number
  readonly fromBlock: number
  readonly toBlock: number
  readonly toHash: Hex
}

export interface OrphanMarker {
  readonly seq: number
  readonly hash: Hex
  readonly number: number
  /** False when a block orphaned earlier became canonical again. */
  readonly orphaned: boolean
}

/** The vault's `nonces(id)` and `bindNonces(id)` read at the end of a block. */
export interface NonceReconciliation {
  readonly blockNumber: number
  readonly blockHash: Hex
  readonly id: Hex
  readonly nonce: bigint
  readonly bindNonce: bigint
}

/** One commit of the indexer: a range with its events, headers and nonce corrections. */
export interface AppendBatch {
  readonly fromBlock: number
  readonly toBlock: number
  readonly toHash: Hex
  /** Hash of block `fromBlock - 1` the batch extends; absent for the first range. */
  readonly baseHash: Hex | undefined
  readonly events: ReadonlyArray<StoredEvent>
  readonly headers: ReadonlyArray<BlockHeader>
  readonly reconciliations: ReadonlyArray<NonceReconciliation>
}

/** A reorg as the indexer found it by walking back from its tip. */
export interface ReorgRecord {
  /** The highest block both branches share; absent when no stored block survives. */
  readonly ancestor: BlockRef | undefined
  /** Every stored canonical block above the ancestor; each gets an orphan marker. */
  readonly abandoned: ReadonlyArray<BlockRef>
  /** Ranges re-appended so what an invalidated range covered up to the ancestor stays covered. */
  readonly kept: ReadonlyArray<Omit<IndexedRange, "seq">>
}

/** What one `pruneHeaders` call did. */
export interface HeaderPruning {
  /** Headers below this block were eligible; absent when no horizon was safe for every vault. */
  readonly horizon: number | undefined
  /** Headers deleted by this call; `limit` or more means more may remain below the horizon. */
  readonly deleted: number
}

export interface Progress {
  readonly ranges: ReadonlyArray<IndexedRange>
  readonly markers: ReadonlyArray<OrphanMarker>
}

export class EventStoreError extends Data.TaggedError("EventStoreError")<{
  readonly operation: string
  readonly cause: SqlError
}> {
  /** The database's messages can quote the row that failed, so only the SQLSTATE is shown. */
  override get message() {
    const inner: unknown = this.cause.cause
    const code =
      typeof inner === "object" && inner !== null && "code" in inner && typeof inner.code === "string"
        ? ` (SQLSTATE ${inner.code})`
        : ""
    return `event store ${this.operation} failed${code}`
  }
}

/** Another writer committed since this one last looked; it must reload before writing again. */
export class WriterConflict extends Data.TaggedError("WriterConflict")<{
  readonly reason: string
}> {
  override get message() {
    return `another writer changed the index: ${this.reason}`
  }
}

/**
 * Single-writer election for one vault: on PostgreSQL a session advisory lock on a connection of
 * its own; on the embedded database an in-process election among the leaderships of one client.
 */
export interface Leadership {
  /** Takes the lock if it is free; true while this holder holds it. */
  readonly tryAcquire: Effect.Effect<boolean, EventStoreError>
  /** Fails when the connection that holds the lock is gone (and with it the lock). */
  readonly check: Effect.Effect<void, EventStoreError>
}

export interface EventStoreShape {
  readonly append: (
    ref: VaultRef,
    expectedRangeSeq: number,
    batch: AppendBatch
  ) => Effect.Effect<number, EventStoreError | WriterConflict>
  readonly recordReorg: (
    ref: VaultRef,
    expectedRangeSeq: number,
    reorg: ReorgRecord
  ) => Effect.Effect<number, EventStoreError | WriterConflict>
  /**
   * Ranges and markers appended after the given sequence numbers, in commit order. From the
   * beginning (`rangeSeq` 0) ranges start at the latest one that begins at or before `startBlock`:
   * every older range is contained in it or reaches beyond it and is listed too.
   */
  readonly progress: (
    ref: VaultRef,
    after: { readonly rangeSeq: number; readonly markerSeq: number; readonly startBlock: number }
  ) => Effect.Effect<Progress, EventStoreError>
  /** Canonical events of blocks `fromBlock..toBlock` in chain order, handed over page by page. */
  readonly canonicalEvents: <E, R>(
    ref: VaultRef,
    fromBlock: number,
    toBlock: number,
    onPage: (page: ReadonlyArray<StoredEvent>) => Effect.Effect<void, E, R>
  ) => Effect.Effect<void, EventStoreError | E, R>
  readonly reconciliations: (
    ref: VaultRef,
    fromBlock: number,
    toBlock: number
  ) => Effect.Effect<ReadonlyArray<NonceReconciliation>, EventStoreError>
  /** Canonical stored blocks (headers, event blocks, range ends) of `fromBlock..toBlock`, highest first. */
  readonly storedBlocks: (
    ref: VaultRef,
    fromBlock: number,
    toBlock: number
  ) => Effect.Effect<ReadonlyArray<BlockRef>, EventStoreError>
  /**
   * Deletes block headers of the vault's chain strictly below the horizon: the least, over every
   * vault of the chain with indexed ranges, of its indexed tip minus `window`, and never above
   * `keepFromBlock`. A vault whose tip is unknown (its latest ranges all orphaned) holds every
   * header back. The lowest heights go first, whole heights, until `limit` are deleted. Events,
   * markers, ranges and corrections stay.
   */
  readonly pruneHeaders: (
    ref: VaultRef,
    options: { readonly keepFromBlock: number; readonly window: number; readonly limit: number }
  ) => Effect.Effect<HeaderPruning, EventStoreError>
  /** Runs `effect` in one repeatable-read transaction: every read sees the same commit. */
  readonly consistentRead: <A, E, R>(
    effect: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | EventStoreError, R>
  readonly leadership: (ref: VaultRef) => Effect.Effect<Leadership, EventStoreError, Scope.Scope>
}

const chainWriteKey = (chainId: number) => advisoryKey(`event-store-writes:${chainId}`)
export const indexerLockKey = (ref: VaultRef) =>
  advisoryKey(`vault-indexer:${ref.chainId}:${ref.vault.toLowerCase()}`)

const PAGE_SIZE = 5_000
/**
 * A vault's indexed tip, for the pruning horizon, is the highest end among its latest this many
 * canonical ranges: the index on (chain, vault, seq) answers it without reading every range (a
 * row per followed block), and it can only be lower than the true highest, which prunes less.
 */
const TIP_RANGES = 64
const INSERT_CHUNK = 2_000

const chunks = <A>(items: ReadonlyArray<A>, size: number): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}

interface EventRow {
  readonly block_number: string | number
  readonly block_hash: string
  readonly log_index: number
  readonly tx_hash: string
  readonly event_name: string
  readonly args: Readonly<Record<string, unknown>>
}

export const makeEventStore = Effect.gen(function* () {
  const sql = yield* SqlClient

  const failed =
    (operation: string) =>
    (cause: SqlError): EventStoreError =>
      new EventStoreError({ operation, cause })

  /** Hashes of `chainId` whose latest marker says orphaned. */
  const orphanedHashes = (chainId: number) => sql`
    SELECT hash FROM (
      SELECT DISTINCT ON (hash) hash, orphaned FROM orphaned_blocks
      WHERE chain_id = ${chainId} ORDER BY hash, seq DESC
    ) latest WHERE orphaned`

  const lockChainWrites = (chainId: number) => transactionLock(sql, chainWriteKey(chainId))

  const latestRangeSeq = (ref: VaultRef) =>
    Effect.map(
      sql<{ seq: string | null }>`
        SELECT max(seq) AS seq FROM indexed_ranges WHERE chain_id = ${ref.chainId} AND vault = ${ref.vault}`,
      (rows) => Number(rows[0]?.seq ?? 0)
    )

  const isOrphaned = (chainId: number, hash: Hex) =>
    Effect.map(
      sql<{ orphaned: boolean }>`
        SELECT orphaned FROM orphaned_blocks WHERE chain_id = ${chainId} AND hash = ${hash}
        ORDER BY seq DESC LIMIT 1`,
      (rows) => rows[0]?.orphaned === true
    )

  /** Inside a write transaction: the writer's view must still be the store's. */
  const checkCurrent = (ref: VaultRef, expectedRangeSeq: number, base: Hex | undefined) =>
    Effect.gen(function* () {
      const actual = yield* latestRangeSeq(ref)
      if (actual !== expectedRangeSeq)
        return yield* Effect.fail(
          new WriterConflict({ reason: `ranges advanced to ${actual}, writer expected ${expectedRangeSeq}` })
        )
      if (base !== undefined && (yield* isOrphaned(ref.chainId, base)))
        return yield* Effect.fail(new WriterConflict({ reason: "the base block was orphaned" }))
    })

  const insertRange = (ref: VaultRef, range: Omit<IndexedRange, "seq">) =>
    Effect.map(
      sql<{ seq: string }>`
        INSERT INTO indexed_ranges (chain_id, vault, from_block, to_block, to_hash)
        VALUES (${ref.chainId}, ${ref.vault}, ${range.fromBlock}, ${range.toBlock}, ${range.toHash})
        RETURNING seq`,
      (rows) => Number(rows[0]?.seq ?? 0)
    )

  const insertEvents = (ref: VaultRef, events: ReadonlyArray<StoredEvent>) =>
    Effect.forEach(
      chunks(events, INSERT_CHUNK),
      (chunk) => {
        const rows = JSON.stringify(
          chunk.map((e) => ({
            block_number: e.blockNumber,
            block_hash: e.blockHash,
            log_index: e.logIndex,
            tx_hash: e.txHash,
            event_name: e.eventName,
            args: e.args
          }))
        )
        return sql`
          INSERT INTO vault_events (chain_id, vault, block_number, block_hash, log_index, tx_hash, event_name, args)
          SELECT ${ref.chainId}::integer, ${ref.vault}::text, r.block_number, r.block_hash, r.log_index,
                 r.tx_hash, r.event_name, r.args
          FROM jsonb_to_recordset(${rows}::jsonb) AS r(
            block_number bigint, block_hash text, log_index integer, tx_hash text, event_name text, args jsonb)
          ON CONFLICT DO NOTHING`
      },
      { discard: true }
    )

  const insertHeaders = (chainId: number, headers: ReadonlyArray<BlockHeader>) =>
    headers.length === 0
      ? Effect.void
      : sql`
          INSERT INTO block_headers (chain_id, number, hash, parent_hash)
          SELECT ${chainId}::integer, h.number, h.hash, h.parent_hash
          FROM jsonb_to_recordset(${JSON.stringify(
            headers.map((h) => ({ number: h.number, hash: h.hash, parent_hash: h.parentHash }))
          )}::jsonb) AS h(number bigint, hash text, parent_hash text)
          ON CONFLICT DO NOTHING`.pipe(Effect.asVoid)

  /** Blocks seen again on the canonical chain after being orphaned get a marker saying so. */
  const restoreSeen = (chainId: number, blocks: ReadonlyArray<BlockRef>) =>
    blocks.length === 0
      ? Effect.void
      : sql`
          INSERT INTO orphaned_blocks (chain_id, hash, number, orphaned)
          SELECT DISTINCT ${chainId}::integer, b.hash, b.number, false
          FROM jsonb_to_recordset(${JSON.stringify(blocks)}::jsonb) AS b(hash text, number bigint)
          WHERE b.hash IN (${orphanedHashes(chainId)})`.pipe(Effect.asVoid)

  const insertReconciliations = (ref: VaultRef, rows: ReadonlyArray<NonceReconciliation>) =>
    rows.length === 0
      ? Effect.void
      : sql`
          INSERT INTO nonce_reconciliations (chain_id, vault, block_number, block_hash, account_id, nonce, bind_nonce)
          SELECT ${ref.chainId}::integer, ${ref.vault}::text, r.block_number, r.block_hash, r.account_id,
                 r.nonce::numeric, r.bind_nonce::numeric
          FROM jsonb_to_recordset(${JSON.stringify(
            rows.map((r) => ({
              block_number: r.blockNumber,
              block_hash: r.blockHash,
              account_id: r.id,
              nonce: r.nonce.toString(),
              bind_nonce: r.bindNonce.toString()
            }))
          )}::jsonb) AS r(block_number bigint, block_hash text, account_id text, nonce text, bind_nonce text)
          ON CONFLICT DO NOTHING`.pipe(Effect.asVoid)

  const append: EventStoreShape["append"] = (ref, expectedRangeSeq, batch) =>
    Effect.gen(function* () {
      yield* lockChainWrites(ref.chainId)
      yield* checkCurrent(ref, expectedRangeSeq, batch.baseHash)
      const seen = new Map<Hex, number>()
      for (const e of batch.events) seen.set(e.blockHash, e.blockNumber)
      for (const h of batch.headers) seen.set(h.hash, h.number)
      seen.set(batch.toHash, batch.toBlock)
      yield* restoreSeen(
        ref.chainId,
        [...seen].map(([hash, number]) => ({ hash, number }))
      )
      yield* insertEvents(ref, batch.events)
      yield* insertHeaders(ref.chainId, batch.headers)
      yield* insertReconciliations(ref, batch.reconciliations)
      return yield* insertRange(ref, {
        fromBlock: batch.fromBlock,
        toBlock: batch.toBlock,
        toHash: batch.toHash
      })
    }).pipe(
      sql.withTransaction,
      Effect.catchTag("SqlError", (e) => Effect.fail(failed("append")(e)))
    )

  const recordReorg: EventStoreShape["recordReorg"] = (ref, expectedRangeSeq, reorg) =>
    Effect.gen(function* () {
      yield* lockChainWrites(ref.chainId)
      yield* checkCurrent(ref, expectedRangeSeq, reorg.ancestor?.hash)
      if (reorg.abandoned.length > 0)
        yield* sql`
          INSERT INTO orphaned_blocks (chain_id, hash, number, orphaned)
          SELECT ${ref.chainId}::integer, b.hash, b.number, true
          FROM jsonb_to_recordset(${JSON.stringify(reorg.abandoned)}::jsonb) AS b(hash text, number bigint)`
      let seq = expectedRangeSeq
      for (const range of reorg.kept) seq = yield* insertRange(ref, range)
      return seq
    }).pipe(
      sql.withTransaction,
      Effect.catchTag("SqlError", (e) => Effect.fail(failed("recordReorg")(e)))
    )

  const rangesAfter = (ref: VaultRef, after: { readonly rangeSeq: number; readonly startBlock: number }) =>
    after.rangeSeq > 0
      ? sql<{ seq: string; from_block: string; to_block: string; to_hash: Hex }>`
          SELECT seq, from_block, to_block, to_hash FROM indexed_ranges
          WHERE chain_id = ${ref.chainId} AND vault = ${ref.vault} AND seq > ${after.rangeSeq}
          ORDER BY seq`
      : sql<{ seq: string; from_block: string; to_block: string; to_hash: Hex }>`
          WITH floor AS (
            SELECT seq, to_block FROM indexed_ranges
            WHERE chain_id = ${ref.chainId} AND vault = ${ref.vault} AND from_block <= ${after.startBlock}
            ORDER BY seq DESC LIMIT 1
          )
          SELECT seq, from_block, to_block, to_hash FROM indexed_ranges
          WHERE chain_id = ${ref.chainId} AND vault = ${ref.vault}
            AND (NOT EXISTS (SELECT 1 FROM floor)
                 OR seq >= (SELECT seq FROM floor) OR to_block > (SELECT to_block FROM floor))
          ORDER BY seq`

  const progress: EventStoreShape["progress"] = (ref, after) =>
    Effect.all({
      ranges: rangesAfter(ref, after),
      markers: sql<{ seq: string; hash: Hex; number: string; orphaned: boolean }>`
        SELECT seq, hash, number, orphaned FROM orphaned_blocks
        WHERE chain_id = ${ref.chainId} AND seq > ${after.markerSeq}
        ORDER BY seq`
    }).pipe(
      Effect.map(({ ranges, markers }) => ({
        ranges: ranges.map((r) => ({
          seq: Number(r.seq),
          fromBlock: Number(r.from_block),
          toBlock: Number(r.to_block),
          toHash: r.to_hash
        })),
        markers: markers.map((m) => ({
          seq: Number(m.seq),
          hash: m.hash,
          number: Number(m.number),
          orphaned: m.orphaned
        }))
      })),
      Effect.mapError(failed("progress"))
    )

  const toStoredEvent = (r: EventRow): StoredEvent => ({
    blockNumber: Number(r.block_number),
    blockHash: r.block_hash as Hex,
    logIndex: r.log_index,
    txHash: r.tx_hash as Hex,
    eventName: r.event_name,
    args: r.args
  })

  const canonicalEvents: EventStoreShape["canonicalEvents"] = (ref, fromBlock, toBlock, onPage) =>
    Effect.gen(function* () {
      // Keyset pages: (block, log index) is unique among canonical events.
      let after: readonly [number, number] = [fromBlock, -1]
      while (true) {
        const rows = yield* sql<EventRow>`
          SELECT block_number, block_hash, log_index, tx_hash, event_name, args FROM vault_events
          WHERE chain_id = ${ref.chainId} AND vault = ${ref.vault}
            AND (block_number, log_index) > (${after[0]}, ${after[1]}) AND block_number <= ${toBlock}
            AND block_hash NOT IN (${orphanedHashes(ref.chainId)})
          ORDER BY block_number, log_index
          LIMIT ${PAGE_SIZE}`.pipe(Effect.mapError(failed("canonicalEvents")))
        if (rows.length === 0) return
        const page = rows.map(toStoredEvent)
        yield* onPage(page)
        const last = page[page.length - 1] as StoredEvent
        if (rows.length < PAGE_SIZE) return
        after = [last.blockNumber, last.logIndex]
      }
    })

  const reconciliations: EventStoreShape["reconciliations"] = (ref, fromBlock, toBlock) =>
    sql<{ block_number: string; block_hash: Hex; account_id: Hex; nonce: string; bind_nonce: string }>`
      SELECT block_number, block_hash, account_id, nonce, bind_nonce FROM nonce_reconciliations
      WHERE chain_id = ${ref.chainId} AND vault = ${ref.vault}
        AND block_number BETWEEN ${fromBlock} AND ${toBlock}
        AND block_hash NOT IN (${orphanedHashes(ref.chainId)})
      ORDER BY block_number, account_id`.pipe(
      Effect.map((rows) =>
        rows.map((r) => ({
          blockNumber: Number(r.block_number),
          blockHash: r.block_hash,
          id: r.account_id,
          nonce: BigInt(r.nonce),
          bindNonce: BigInt(r.bind_nonce)
        }))
      ),
      Effect.mapError(failed("reconciliations"))
    )

  const storedBlocks: EventStoreShape["storedBlocks"] = (ref, fromBlock, toBlock) =>
    sql<{ number: string; hash: Hex }>`
      SELECT DISTINCT number, hash FROM (
        SELECT number, hash FROM block_headers
        WHERE chain_id = ${ref.chainId} AND number BETWEEN ${fromBlock} AND ${toBlock}
        UNION
        SELECT block_number, block_hash FROM vault_events
        WHERE chain_id = ${ref.chainId} AND vault = ${ref.vault} AND block_number BETWEEN ${fromBlock} AND ${toBlock}
        UNION
        SELECT to_block, to_hash FROM indexed_ranges
        WHERE chain_id = ${ref.chainId} AND vault = ${ref.vault} AND to_block BETWEEN ${fromBlock} AND ${toBlock}
      ) stored
      WHERE hash NOT IN (${orphanedHashes(ref.chainId)})
      ORDER BY number DESC`.pipe(
      Effect.map((rows) => rows.map((r) => ({ number: Number(r.number), hash: r.hash }))),
      Effect.mapError(failed("storedBlocks"))
    )

  const pruneHeaders: EventStoreShape["pruneHeaders"] = (ref, { keepFromBlock, window, limit }) =>
    Effect.gen(function* () {
      // The chain's vaults by a skip scan of the ranges' index, then each one's tip from its
      // latest canonical ranges. No lock: a tip only falls by a reorg (within the window), and a
      // header deleted too eagerly is only a coarser ancestor for a walk back.
      const [bound] = yield* sql<{ horizon: string | null }>`
        WITH RECURSIVE vaults (vault) AS (
          (SELECT vault FROM indexed_ranges WHERE chain_id = ${ref.chainId} ORDER BY vault LIMIT 1)
          UNION ALL
          SELECT (SELECT r.vault FROM indexed_ranges r
                  WHERE r.chain_id = ${ref.chainId} AND r.vault > v.vault ORDER BY r.vault LIMIT 1)
          FROM vaults v WHERE v.vault IS NOT NULL
        )
        SELECT CASE WHEN count(*) = 0 OR bool_or(tip.to_block IS NULL) THEN NULL
                    ELSE LEAST(${keepFromBlock}::bigint, min(tip.to_block) - ${window}::bigint) END AS horizon
        FROM vaults v
        CROSS JOIN LATERAL (
          SELECT max(latest.to_block) AS to_block FROM (
            SELECT r.to_block FROM indexed_ranges r
            WHERE r.chain_id = ${ref.chainId} AND r.vault = v.vault
              AND r.to_hash NOT IN (${orphanedHashes(ref.chainId)})
            ORDER BY r.seq DESC LIMIT ${TIP_RANGES}
          ) latest
        ) tip
        WHERE v.vault IS NOT NULL`
      const horizon = bound?.horizon == null ? undefined : Number(bound.horizon)
      if (horizon === undefined || limit <= 0) return { horizon, deleted: 0 }
      // The lowest heights first, whole heights, up to the one holding the `limit`-th header:
      // a range of the (chain, number) index, where a join on hashes would read the whole table.
      const [result] = yield* sql<{ deleted: string }>`
        WITH deleted AS (
          DELETE FROM block_headers
          WHERE chain_id = ${ref.chainId} AND number <= LEAST(${horizon - 1}::bigint, (
            SELECT number FROM block_headers WHERE chain_id = ${ref.chainId} AND number < ${horizon}
            ORDER BY number OFFSET ${limit - 1} LIMIT 1))
          RETURNING 1
        )
        SELECT count(*) AS deleted FROM deleted`
      return { horizon, deleted: Number(result?.deleted ?? 0) }
    }).pipe(Effect.mapError(failed("pruneHeaders")))

  const consistentRead: EventStoreShape["consistentRead"] = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`.pipe(
      Effect.zipRight(effect),
      sql.withTransaction,
      Effect.mapError((e): E | EventStoreError => (e instanceof SqlError ? failed("consistentRead")(e) : e))
    )

  const leadership: EventStoreShape["leadership"] = (ref) =>
    Effect.gen(function* () {
      const key = indexerLockKey(ref)
      // The embedded database is this process's alone, and its single connection must not be
      // held for the lifetime of the indexer: the election is decided in-process, per client.
      if (
        yield* isEmbeddedDatabase.pipe(
          Effect.provideService(SqlClient, sql),
          Effect.mapError(failed("leadership"))
        )
      ) {
        const lock = yield* inProcessLock(sql, key)
        return { tryAcquire: lock.tryLock, check: lock.check } satisfies Leadership
      }
      const lock = yield* sessionLock(sql, key).pipe(Effect.mapError(failed("leadership")))
      return {
        tryAcquire: lock.tryLock.pipe(Effect.mapError(failed("leadership"))),
        check: lock.check.pipe(Effect.mapError(failed("leadership")))
      } satisfies Leadership
    })

  return {
    append,
    recordReorg,
    progress,
    canonicalEvents,
    reconciliations,
    storedBlocks,
    pruneHeaders,
    consistentRead,
    leadership
  } satisfies EventStoreShape
})

export class EventStore extends Context.Tag("EventStore")<EventStore, EventStoreShape>() {
  static readonly layer: Layer.Layer<EventStore, never, SqlClient> = Layer.effect(EventStore, makeEventStore)
}
