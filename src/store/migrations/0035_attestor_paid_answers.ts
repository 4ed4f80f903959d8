/**
 * The answers of paid lookups, kept so that the same payment asks again and gets them again
 * (docs/attestor.md §4 "Paid handle lookup flow", replay; src/attestor/lookups/payments/PaymentStore.ts):
 * one row per authorization whose lookup was answered (a commitment, a public-handle attestation,
 * or not found), written before the payment is settled, so that a crash between settlement and
 * the answer loses nothing. `request_digest` names the request it answers; `payment_id` the hash of the x402
 * `payment-identifier` id the payer chose (paidLookup.ts `paymentIdHash`), unique per payer; `from_block` the chain's block before the
 * settlement was asked for (where a settlement whose answer was lost is looked for). `expires_at`
 * (unix seconds) is the end of the replay window, after which the row is pruned.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient
  // IF NOT EXISTS: the attestor's migrations may be applied after a later-numbered one of another
  // module (src/store/migrations.ts).
  yield* sql`
    CREATE TABLE IF NOT EXISTS attestor_paid_answers (
      authorization_key text PRIMARY KEY,
      payer text NOT NULL,
      payment_id text,
      request_digest text NOT NULL,
      outcome text NOT NULL,
      answer text,
      payment_response text,
      from_block bigint NOT NULL,
      expires_at bigint NOT NULL
    )`
  yield* sql`
    CREATE UNIQUE INDEX IF NOT EXISTS attestor_paid_answers_payment_id
    ON attestor_paid_answers (payer, payment_id) WHERE payment_id IS NOT NULL`
  yield* sql`CREATE INDEX IF NOT EXISTS attestor_paid_answers_expiry ON attestor_paid_answers (expires_at)`
})
