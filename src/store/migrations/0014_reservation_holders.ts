/**
 * Nonce reservations record the relayer process that took them (src/relayer/NonceReservations.ts), so
 * a row left unlinked by a process that is gone (killed, or its database session ended) is free at
 * once rather than after the unsent TTL; and relayed requests are found again by their call, so the
 * same signed request sent again is answered with the hash it was stored under (docs/relayer.md §4).
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient
  // The key of the session advisory lock the taking process holds while it runs; NULL for rows
  // taken before this migration, which keep only the unsent TTL.
  // IF NOT EXISTS: `migrate` also runs a migration numbered below one already applied.
  yield* sql`ALTER TABLE relayer_nonce_reservations ADD COLUMN IF NOT EXISTS holder bigint`
  // A request's transaction by its vault call (the calldata carries every signature of the request).
  yield* sql`CREATE INDEX IF NOT EXISTS relayer_txs_by_call ON relayer_txs (to_address, md5(data))`
})
