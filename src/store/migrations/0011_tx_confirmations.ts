/**
 * Confirmation depth of the sender's transactions: a mined transaction stays watched for reorgs
 * until it is `TX_CONFIRMATIONS` blocks deep, and only then is `confirmed_at` set.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient
  // Null while the transaction is pending, dropped, or mined and still shallow enough for a
  // reorg to take it out (then it goes back to pending). Transactions mined before this
  // migration were never watched after their receipt, so they count as confirmed.
  yield* sql`ALTER TABLE relayer_txs ADD COLUMN confirmed_at timestamptz`
  yield* sql`UPDATE relayer_txs SET confirmed_at = settled_at WHERE state = 'mined'`
  yield* sql`
    CREATE INDEX relayer_txs_unconfirmed ON relayer_txs (chain_id, sender, nonce)
    WHERE state = 'mined' AND confirmed_at IS NULL`
})
