/**
 * Contests (docs/attestor.md §3 contest row, §4 "POST /v1/bind"; docs/protocol.md §10 "Contests").
 *
 * - `attestor_contests`: the owners a contest ruled out, per escrow id. No replica signs
 *   `BindOwner` for a contested (id, owner) again, and the veto watcher judges a proposal to a
 *   contested owner unattested (src/attestor/AttestationStore.ts, VetoWatcher.ts). Rows are kept:
 *   a contest lasts. Contests made before this table existed only revoked attestations: each
 *   revoked attestation's (id, owner) is contested here, so they last too.
 * - `attestor_user_contests`: when a user (platform, user id) last contested. A login started
 *   before it makes no session (src/attestor/SessionStore.ts): a login someone prepared as the user
 *   before the contest cannot be redeemed after it.
 * - A contest ends the user's sessions created at or before the contesting one (migration 0020),
 *   which an index by user finds.
 *
 * Written to run on a database past it (migrations.ts, `migrateSkipped`).
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient
  // Ids and owners lowercase hex; `contested_at` unix seconds of the attestor's clock (the first
  // contest that named the owner).
  yield* sql`
    CREATE TABLE IF NOT EXISTS attestor_contests (
      beneficiary_id text   NOT NULL,
      owner          text   NOT NULL,
      contested_at   bigint NOT NULL,
      PRIMARY KEY (beneficiary_id, owner)
    )`
  // Only a contest ever revoked an attestation: its owner was contested for its id. When is not
  // known any more; the upgrade's time stands for it.
  yield* sql`
    INSERT INTO attestor_contests (beneficiary_id, owner, contested_at)
    SELECT DISTINCT beneficiary_id, new_owner, floor(extract(epoch FROM now()))::bigint
    FROM attestor_attestations WHERE revoked
    ON CONFLICT (beneficiary_id, owner) DO NOTHING`
  // Unix seconds of the attestor's clock of the user's last contest.
  yield* sql`
    CREATE TABLE IF NOT EXISTS attestor_user_contests (
      platform     text   NOT NULL,
      user_id      text   NOT NULL,
      contested_at bigint NOT NULL,
      PRIMARY KEY (platform, user_id)
    )`
  yield* sql`CREATE INDEX IF NOT EXISTS attestor_sessions_user ON attestor_sessions (platform, user_id)`
})
