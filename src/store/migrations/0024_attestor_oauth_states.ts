/**
 * OAuth states (docs/attestor.md §3 "OAuth state", §8): the intent a login was started for, kept
 * server-side until the provider's callback presents the state, at most `OAUTH_STATE_TTL_SECONDS`.
 * In the database, not in memory, so a callback may reach any replica.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient
  // One row per started login, keyed by the SHA-256 of the state (lowercase hex): the state itself
  // travels through the browser and the provider, so the database keeps nothing a reader could
  // present. `ids` is a JSON array of bytes32 hex strings; `redirect` null for a JSON callback;
  // `code_verifier` the PKCE verifier (null for a platform without PKCE), sent to the provider
  // once with the code. A row is deleted when it is used (single use) or once it has expired.
  yield* sql`
    CREATE TABLE attestor_oauth_states (
      state_hash    text    PRIMARY KEY,
      platform      text    NOT NULL,
      stealth_owner text    NOT NULL,
      ids           jsonb   NOT NULL,
      redirect      text,
      code_verifier text,
      created_at    bigint  NOT NULL,
      expires_at    bigint  NOT NULL,
      CHECK (created_at < expires_at)
    )`
  yield* sql`CREATE INDEX attestor_oauth_states_expiry ON attestor_oauth_states (expires_at)`
})
