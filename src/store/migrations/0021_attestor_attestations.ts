/**
 * The attestor's bind attestations (docs/attestor.md §3 contest and veto rows, §4 visibility):
 * every `BindOwner` signature `/v1/bind` issued, so that the veto watcher can tell a proposal this
 * attestor attested from one it did not, a contest can revoke them, and a stealth owner used for
 * one visibility is refused for the other. Rows are kept: they are this attestor's record of what
 * it signed.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient
  // Addresses and ids lowercase hex; `bind_nonce` and `deadline` decimal strings (uint256);
  // `issued_at` unix seconds of the attestor's clock. A signature is deterministic (RFC 6979),
  // so the same four message fields are the same attestation: the key makes a re-issue a no-op.
  yield* sql`
    CREATE TABLE attestor_attestations (
      beneficiary_id text    NOT NULL,
      new_owner      text    NOT NULL,
      bind_nonce     text    NOT NULL,
      deadline       text    NOT NULL,
      visibility     text    NOT NULL CHECK (visibility IN ('public', 'private')),
      revoked        boolean NOT NULL DEFAULT false,
      issued_at      bigint  NOT NULL,
      PRIMARY KEY (beneficiary_id, new_owner, bind_nonce, deadline)
    )`
  yield* sql`CREATE INDEX attestor_attestations_owner ON attestor_attestations (new_owner)`
})
