/**
 * Handle-lookup payments (docs/attestor.md §3 "handle lookup payment", §4 "Paid handle lookup
 * flow"): each payment authorization presented, by payer and Permit2 nonce, with its state. The
 * row is written before the facilitator is asked, so an authorization buys one attempt, across
 * restarts and replicas.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient
  // `authorization_key` is `<payer lowercase hex>:<Permit2 nonce decimal>`. States: `unpaid` (held,
  // not verified yet), `authorized` (verified), `settled`, `failed` (refused, or nothing to buy:
  // the authorization is spent either way), `indeterminate` (a settle whose answer never came: never
  // settled again). `transaction` is the settlement's hash once known. Times are unix seconds.
  yield* sql`
    CREATE TABLE attestor_payments (
      authorization_key text   PRIMARY KEY,
      state             text   NOT NULL
        CHECK (state IN ('unpaid', 'authorized', 'settled', 'failed', 'indeterminate')),
      network           text   NOT NULL,
      asset             text   NOT NULL,
      amount            text   NOT NULL,
      transaction       text,
      created_at        bigint NOT NULL,
      updated_at        bigint NOT NULL
    )`
})
