/**
 * Payers with a lookup payment in flight (docs/attestor.md §4 "Paid handle lookup flow"): at most
 * one per payer at once, across replicas, so that many authorizations backed by one balance buy one
 * directory lookup at a time. A lease ends when its payment's flow ends, or lapses at `expires_at`
 * (the quote's `maxTimeoutSeconds` after it was taken) when the process holding it stopped.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient
  // `payer` is the lowercase hex address, `authorization_key` the payment holding the lease (as in
  // `attestor_payments`), `expires_at` unix seconds. IF NOT EXISTS: the attestor's migrations may
  // be applied after a later-numbered one of another module (src/store/migrations.ts).
  yield* sql`
    CREATE TABLE IF NOT EXISTS attestor_payment_leases (
      payer             text   PRIMARY KEY,
      authorization_key text   NOT NULL,
      expires_at        bigint NOT NULL
    )`
  yield* sql`
    CREATE INDEX IF NOT EXISTS attestor_payment_leases_expiry ON attestor_payment_leases (expires_at)`
})
