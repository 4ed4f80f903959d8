/**
 * The veto watcher's record of the bind proposals it judged (docs/attestor.md §3 veto row): one
 * row per proposal, keyed by escrow id and the bind nonce `proposeBind` consumed, with the last
 * verdict (so each verdict is counted once, across restarts) and the veto's progress: `none`,
 * `sending` (claimed by one process, before anything is sent), `sent` (the hash of the
 * attestor's `vetoBind`). `skipped` is no longer written (src/attestor/veto/VetoWatcher.ts says when
 * a veto goes back to `none`).
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient
  // Ids lowercase hex; `bind_nonce` a decimal string (uint256); `updated_at` unix seconds.
  yield* sql`
    CREATE TABLE attestor_bind_proposals (
      beneficiary_id text   NOT NULL,
      bind_nonce     text   NOT NULL,
      verdict        text   NOT NULL CHECK (verdict IN ('attested', 'unattested', 'unknown_id')),
      veto           text   NOT NULL DEFAULT 'none' CHECK (veto IN ('none', 'sending', 'sent', 'skipped')),
      tx_hash        text,
      updated_at     bigint NOT NULL,
      PRIMARY KEY (beneficiary_id, bind_nonce)
    )`
})
