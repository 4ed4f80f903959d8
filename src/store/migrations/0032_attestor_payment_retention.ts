/**
 * Lookup payments are pruned (docs/operations.md "Paid lookups"; src/attestor/lookups/payments/PaymentStore.ts):
 * each row keeps its authorization's Permit2 `deadline` and the time it may be deleted,
 * `expires_at`, a retention after that deadline that depends on its state. An authorization past
 * its deadline is refused before its row is looked at, so a pruned row buys nothing again.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient
  // Unix seconds. IF NOT EXISTS: the attestor's migrations may be applied after a later-numbered
  // one of another module (src/store/migrations.ts).
  yield* sql`ALTER TABLE attestor_payments ADD COLUMN IF NOT EXISTS deadline bigint`
  yield* sql`ALTER TABLE attestor_payments ADD COLUMN IF NOT EXISTS expires_at bigint`
  // Rows written before: their deadline is unknown but no later than the longest quote allowed
  // after they were held (HANDLE_LOOKUP_MAX_TIMEOUT_SECONDS at most 3600, and 30 s of payer clock
  // skew); they keep the default retentions: 30 days (2592000 s), a day (86400 s) when nothing moved.
  yield* sql`
    UPDATE attestor_payments SET deadline = created_at + 3630 WHERE deadline IS NULL`
  yield* sql`
    UPDATE attestor_payments
    SET expires_at = deadline + CASE WHEN state IN ('unpaid', 'failed') THEN 86400 ELSE 2592000 END
    WHERE expires_at IS NULL`
  yield* sql`ALTER TABLE attestor_payments ALTER COLUMN deadline SET NOT NULL`
  yield* sql`ALTER TABLE attestor_payments ALTER COLUMN expires_at SET NOT NULL`
  yield* sql`CREATE INDEX IF NOT EXISTS attestor_payments_expiry ON attestor_payments (expires_at)`
})
