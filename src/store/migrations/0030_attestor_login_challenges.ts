/**
 * Login challenges (docs/protocol.md §10 "Login challenge"): the SHA-256 of the client's
 * `loginSecret` a login was started with, kept with its OAuth state and then with its session, so
 * that the session answers only to the client that started the login. Null: started without one.
 * Written to run on a database past it (migrations.ts, `migrateSkipped`).
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient
  // Lowercase 0x-prefixed hex of 32 bytes, as the challenge arrives.
  yield* sql`ALTER TABLE attestor_oauth_states ADD COLUMN IF NOT EXISTS login_challenge text`
  yield* sql`ALTER TABLE attestor_sessions ADD COLUMN IF NOT EXISTS login_challenge text`
})
