/**
 * Revert cooldowns of the relayer's write path (src/relayer/RevertCooldowns.ts): accounts and
 * ERC-1271 owner code whose relayed transaction passed simulation and then reverted on chain,
 * refused until `until_ms`, shared by every replica on the database.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient
  // One row per (vault, kind, value): kind `id` (an account id) or `code` (the keccak-256 of an
  // owner contract's code). `strikes` counts reverts since the row was last quiet for a whole
  // maximum cooldown; `last_tx` is the mined hash that struck last, so a revert is counted once
  // however many replicas see it. Times are Unix milliseconds from the relayer's clock.
  // IF NOT EXISTS: `migrate` also runs a migration numbered below one already applied.
  yield* sql`
    CREATE TABLE IF NOT EXISTS relayer_revert_cooldowns (
      vault    text    NOT NULL,
      kind     text    NOT NULL,
      value    text    NOT NULL,
      strikes  integer NOT NULL,
      until_ms bigint  NOT NULL,
      last_tx  text    NOT NULL,
      PRIMARY KEY (vault, kind, value)
    )`
})
