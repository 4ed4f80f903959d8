/**
 * Which visibility each stealth owner was first attested for (docs/attestor.md §4 visibility): one
 * row per owner, so that two `/v1/bind` requests of one key for the two kinds, on one replica or
 * several sharing a database, cannot both pass (src/attestor/binds/AttestationStore.ts `record`).
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient
  yield* sql`
    CREATE TABLE attestor_owner_visibility (
      new_owner  text NOT NULL PRIMARY KEY,
      visibility text NOT NULL CHECK (visibility IN ('public', 'private'))
    )`
  // Owners attested before this table existed keep their kind. One attested for both (possible
  // before) is held to the first it was attested for.
  yield* sql`
    INSERT INTO attestor_owner_visibility (new_owner, visibility)
    SELECT DISTINCT ON (new_owner) new_owner, visibility
    FROM attestor_attestations
    ORDER BY new_owner, issued_at, visibility`
})
