/**
 * The block hash a mined transaction's receipt named. While the block at that height still has
 * this hash, the transaction is where it was recorded, so the sender's reorg watch asks the chain
 * for one header per block instead of one receipt per transaction (src/txsender/monitor.ts).
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient
  // Null for transactions mined before this migration: those are looked up by receipt as before.
  yield* sql`ALTER TABLE relayer_txs ADD COLUMN mined_block_hash text`
})
