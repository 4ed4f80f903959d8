/**
 * The owners a contest ruled out (docs/attestor.md §3 contest row, §4 "POST /v1/bind"): per escrow
 * id, every stealth owner that `POST /v1/bind` with `contest: true` named as not the user's. No
 * replica signs `BindOwner` for a contested (id, owner) again, and the veto watcher judges a
 * proposal to a contested owner unattested (src/attestor/binds/AttestationStore.ts, VetoWatcher.ts).
 * Rows are kept: a contest lasts. A contest also ends the user's other sessions (migration 0020),
 * which an index by user finds. What contests record since is migration 0031's.
 *
 * As first released, but for IF NOT EXISTS: written to run on a database past it
 * (migrations.ts, `migrateSkipped`).
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
  // A contest also ends the user's other sessions, found by platform and user id.
  yield* sql`CREATE INDEX IF NOT EXISTS attestor_sessions_user ON attestor_sessions (platform, user_id)`
})
