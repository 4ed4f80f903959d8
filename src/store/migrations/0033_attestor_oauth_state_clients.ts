/**
 * OAuth state bounds (docs/attestor.md §8, src/attestor/logins/oauth/OAuthStates.ts): each state is kept
 * with a keyed digest of the client address that started it, so the live states of one client
 * can be counted and bounded. Written to run on a database past it (IF NOT EXISTS).
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient
  // Lowercase hex HMAC-SHA256 of the client address under a key derived from PEPPER: never the
  // address itself. Null for a state stored before this migration (counted in the total only).
  yield* sql`ALTER TABLE attestor_oauth_states ADD COLUMN IF NOT EXISTS client_digest text`
  yield* sql`
    CREATE INDEX IF NOT EXISTS attestor_oauth_states_client
    ON attestor_oauth_states (client_digest, expires_at)`
})
