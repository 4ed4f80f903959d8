/**
 * The attestor's login state (docs/attestor.md §3): sessions, which a login creates and
 * `/v1/escrows` and `/v1/bind` read, and the login payloads already used, so that each one makes
 * one session at most. Both are short-lived: a row is deleted once it has expired. Kept in the
 * database, not in memory, so they survive a restart and are shared by replicas.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient
  // One row per session. Only the SHA-256 of the token (lowercase hex) is kept, so neither the
  // database nor a backup of it can be used to act as a logged-in user. `ids` is a JSON array of
  // bytes32 hex strings (empty: every escrow of the user). Times are unix seconds of the
  // attestor's clock; a session is valid while `now < expires_at`.
  yield* sql`
    CREATE TABLE attestor_sessions (
      token_hash    text    PRIMARY KEY,
      platform      text    NOT NULL,
      user_id       text    NOT NULL,
      stealth_owner text    NOT NULL,
      ids           jsonb   NOT NULL,
      created_at    bigint  NOT NULL,
      expires_at    bigint  NOT NULL,
      CHECK (created_at < expires_at)
    )`
  yield* sql`CREATE INDEX attestor_sessions_expiry ON attestor_sessions (expires_at)`
  // Login payloads that made a session, by a digest of what identifies them, until the payload
  // would have been refused as too old anyway (`expires_at`, unix seconds).
  yield* sql`
    CREATE TABLE attestor_used_logins (
      digest     text   PRIMARY KEY,
      expires_at bigint NOT NULL
    )`
  yield* sql`CREATE INDEX attestor_used_logins_expiry ON attestor_used_logins (expires_at)`
})
