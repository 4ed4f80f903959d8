/**
 * The handle commitments this attestor issued through `POST /v1/public-handle` (docs/attestor.md
 * §2 PublicHandle response, §4 visibility): an escrow launched to one of them is `public`.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient
  // `handle_commitment` lowercase hex; the platform and time of the attestation, for operators.
  // Neither the user id nor the handle is kept: the commitment alone decides visibility.
  yield* sql`
    CREATE TABLE attestor_public_commitments (
      handle_commitment text   PRIMARY KEY,
      platform_id       int    NOT NULL,
      issued_at         bigint NOT NULL
    )`
})
