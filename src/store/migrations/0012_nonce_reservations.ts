/**
 * Nonce reservations of the relayer's write path (src/relayer/NonceReservations.ts): which account
 * nonce or bind nonce a transaction of this relayer, or of another replica on the same database,
 * is about to consume, so that a second request for it is refused before it costs gas.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient
  // One row per (vault, id, kind, value) ever reserved; the key is what replicas race on. A row
  // is live while its transaction (`tx_hash`, any attempt of it in relayer_tx_attempts) is
  // pending, or, not sent yet, for a short while after `taken_at`; a dead row is taken over in
  // place. `token` tells the request that holds the row from one that took it over.
  // IF NOT EXISTS: `migrate` also runs a migration numbered below one already applied.
  yield* sql`
    CREATE TABLE IF NOT EXISTS relayer_nonce_reservations (
      vault      text          NOT NULL,
      account_id text          NOT NULL,
      kind       text          NOT NULL,
      value      numeric(78,0) NOT NULL,
      token      text          NOT NULL,
      tx_hash    text,
      taken_at   timestamptz   NOT NULL DEFAULT now(),
      PRIMARY KEY (vault, account_id, kind, value)
    )`
  // Liveness looks a hash up in relayer_tx_attempts: its UNIQUE (hash, tx_id) index serves that.
})
