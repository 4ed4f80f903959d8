/**
 * What the indexer has done: the block ranges whose vault logs are all in the event store, and
 * the nonce corrections made after reading the chain. Append-only like the event store.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient
  // Every commit of the indexer appends one range: all vault logs of blocks from_block..to_block
  // of the chain ending in `to_hash` are stored. A range holds while `to_hash` is canonical, so a
  // reorg invalidates exactly the ranges that reach into the abandoned blocks, and a restart
  // fetches only what no valid range covers. `seq` is the commit order.
  yield* sql`
    CREATE TABLE indexed_ranges (
      seq        bigserial   PRIMARY KEY,
      chain_id   integer     NOT NULL,
      vault      text        NOT NULL,
      from_block bigint      NOT NULL,
      to_block   bigint      NOT NULL,
      to_hash    text        NOT NULL,
      indexed_at timestamptz NOT NULL DEFAULT now(),
      CHECK (from_block <= to_block)
    )`
  yield* sql`CREATE INDEX indexed_ranges_by_vault ON indexed_ranges (chain_id, vault, seq)`
  // When the nonces counted from events disagree with the vault's own at the end of a batch, the
  // chain wins: the values read are recorded at that block and applied after its events, so a
  // rebuilt projection makes the same correction. They belong to their block like events do and
  // are skipped when it is orphaned.
  yield* sql`
    CREATE TABLE nonce_reconciliations (
      chain_id     integer      NOT NULL,
      vault        text         NOT NULL,
      block_number bigint       NOT NULL,
      block_hash   text         NOT NULL,
      account_id   text         NOT NULL,
      nonce        numeric(78)  NOT NULL,
      bind_nonce   numeric(78)  NOT NULL,
      appended_at  timestamptz  NOT NULL DEFAULT now(),
      PRIMARY KEY (chain_id, vault, block_hash, account_id)
    )`
  yield* sql`
    CREATE INDEX nonce_reconciliations_by_block ON nonce_reconciliations (chain_id, vault, block_number)`
})
