/**
 * The event store: decoded vault logs, block headers of the unfinalized range and orphan
 * markers. Events and markers are never updated or deleted; headers below the finality horizon
 * are pruned by the indexer (src/store/EventStore.ts `pruneHeaders`).
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient
  // Decoded vault logs. Amounts inside `args` are exact decimal strings. A log is identified by
  // its block hash and index, so the same log appended twice (two indexers, a retried batch) is
  // one row, and the same height on two branches is two.
  yield* sql`
    CREATE TABLE vault_events (
      chain_id     integer     NOT NULL,
      vault        text        NOT NULL,
      block_number bigint      NOT NULL,
      block_hash   text        NOT NULL,
      log_index    integer     NOT NULL,
      tx_hash      text        NOT NULL,
      event_name   text        NOT NULL,
      args         jsonb       NOT NULL,
      appended_at  timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (chain_id, block_hash, log_index)
    )`
  yield* sql`CREATE INDEX vault_events_by_block ON vault_events (chain_id, vault, block_number, log_index)`
  // Headers of the unfinalized range, to detect reorgs by parent hash and find the common ancestor.
  yield* sql`
    CREATE TABLE block_headers (
      chain_id    integer     NOT NULL,
      number      bigint      NOT NULL,
      hash        text        NOT NULL,
      parent_hash text        NOT NULL,
      seen_at     timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (chain_id, hash)
    )`
  yield* sql`CREATE INDEX block_headers_by_number ON block_headers (chain_id, number)`
  // A reorg appends a marker per abandoned block instead of deleting its events; readers skip
  // events of orphaned blocks. The latest marker of a hash decides: a block that becomes
  // canonical again (a chain that flips back) gets a later marker with `orphaned = false`.
  // `seq` orders the markers, so a reader can fetch only those it has not seen.
  yield* sql`
    CREATE TABLE orphaned_blocks (
      seq         bigserial   PRIMARY KEY,
      chain_id    integer     NOT NULL,
      hash        text        NOT NULL,
      number      bigint      NOT NULL,
      orphaned    boolean     NOT NULL,
      marked_at   timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX orphaned_blocks_by_hash ON orphaned_blocks (chain_id, hash, seq)`
})
