/**
 * The event store: decoded vault logs, block headers of the unfinalized range and orphan
 * markers. Append-only: rows are never updated or deleted.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient
  // Decoded vault logs. Amounts inside `args` are exact decimal strings.
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
  // Headers of the unfinalized range, to detect reorgs by parent hash.
  yield* sql`
    CREATE TABLE block_headers (
      chain_id    integer     NOT NULL,
      number      bigint      NOT NULL,
      hash        text        NOT NULL,
      parent_hash text        NOT NULL,
      seen_at     timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (chain_id, hash)
    )`
  // A reorg appends here instead of deleting events: readers skip events of orphaned blocks.
  yield* sql`
    CREATE TABLE orphaned_blocks (
      chain_id    integer     NOT NULL,
      hash        text        NOT NULL,
      orphaned_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (chain_id, hash)
    )`
})
