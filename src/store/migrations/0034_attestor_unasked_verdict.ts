/**
 * The committee veto rule's verdict `unasked` (docs/attestor.md "The committee",
 * src/attestor/veto/vetoVerdicts.ts): a proposal this attestor was not asked for, counted and never
 * vetoed. The record of judged proposals accepts it. Written to run on a database past it.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient
  yield* sql`ALTER TABLE attestor_bind_proposals DROP CONSTRAINT IF EXISTS attestor_bind_proposals_verdict_check`
  yield* sql`
    ALTER TABLE attestor_bind_proposals ADD CONSTRAINT attestor_bind_proposals_verdict_check
    CHECK (verdict IN ('attested', 'unattested', 'unknown_id', 'unasked'))`
})
