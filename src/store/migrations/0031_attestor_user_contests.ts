/**
 * Contests that last (docs/attestor.md §3 contest row; docs/protocol.md §10 "Contests"), added
 * after migration 0028 was first applied, so a database past 0028 gets them too:
 *
 * - `attestor_user_contests`: when a user (platform, user id) last contested. A login started
 *   before it makes no session (src/attestor/logins/SessionStore.ts): a login someone prepared as the user
 *   before the contest cannot be redeemed after it.
 * - Contests made before `attestor_contests` recorded them only revoked attestations: each revoked
 *   attestation's (id, owner) is contested there, so they last too.
 *
 * Written to run again harmlessly (IF NOT EXISTS, ON CONFLICT DO NOTHING).
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient
  // Unix seconds of the attestor's clock of the user's last contest.
  yield* sql`
    CREATE TABLE IF NOT EXISTS attestor_user_contests (
      platform     text   NOT NULL,
      user_id      text   NOT NULL,
      contested_at bigint NOT NULL,
      PRIMARY KEY (platform, user_id)
    )`
  // Only a contest ever revoked an attestation: its owner was contested for its id. When is not
  // known any more; the upgrade's time stands for it.
  yield* sql`
    INSERT INTO attestor_contests (beneficiary_id, owner, contested_at)
    SELECT DISTINCT beneficiary_id, new_owner, floor(extract(epoch FROM now()))::bigint
    FROM attestor_attestations WHERE revoked
    ON CONFLICT (beneficiary_id, owner) DO NOTHING`
})
