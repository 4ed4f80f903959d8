/**
 * The day's budget of unpaid bind transactions (src/relayer/BindBudget.ts): how many propose-bind
 * and cancel-bind transactions the relayer sent for an account id, or for an owner, in the current
 * day's window, shared by every replica on the database.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient
  // One row per `<vault>:<kind>:<value>`: kind `id` (an account id) or `owner` (an owner address),
  // lower-case hex. `spent` counts the transactions sent in the window that ends at `expires_at`
  // (Unix seconds from the relayer's clock); a charge after it starts a new window. Expired rows
  // are pruned in passing (src/store/expiringRows.ts).
  // IF NOT EXISTS: `migrate` also runs a migration numbered below one already applied.
  yield* sql`
    CREATE TABLE IF NOT EXISTS relayer_bind_budgets (
      budget_key text    PRIMARY KEY,
      spent      integer NOT NULL,
      expires_at bigint  NOT NULL
    )`
  yield* sql`CREATE INDEX IF NOT EXISTS relayer_bind_budgets_expiry ON relayer_bind_budgets (expires_at)`
})
