/**
 * Which handle commitments were made public (docs/attestor.md §4 visibility): those this attestor
 * issued with a PublicHandle attestation (`POST /v1/public-handle`). An escrow whose hint carries one
 * of them is `public`; every other escrow is `private`. Kept in the database (migration 0025) so a
 * restart and every replica agree.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Context, Effect, Layer } from "effect"
import type { Hex } from "viem"
import { Unavailable } from "../../../schema/errors.js"

const STORE_UNAVAILABLE = "the attestor's database is not answering"

export interface PublicCommitmentsShape {
  /** Records a commitment issued with a PublicHandle attestation. */
  readonly record: (
    handleCommitment: Hex,
    platformId: number,
    issuedAt: number
  ) => Effect.Effect<void, Unavailable>
  /** Which of `commitments` are public (lowercase hex). */
  readonly publicAmong: (commitments: ReadonlyArray<Hex>) => Effect.Effect<ReadonlySet<string>, Unavailable>
}

export class PublicCommitments extends Context.Tag("PublicCommitments")<
  PublicCommitments,
  PublicCommitmentsShape
>() {
  static readonly layer: Layer.Layer<PublicCommitments, never, SqlClient> = Layer.effect(
    PublicCommitments,
    Effect.map(SqlClient, (sql) => ({
      record: (handleCommitment, platformId, issuedAt) =>
        sql`
          INSERT INTO attestor_public_commitments (handle_commitment, platform_id, issued_at)
          VALUES (${handleCommitment.toLowerCase()}, ${platformId}, ${issuedAt})
          ON CONFLICT (handle_commitment) DO NOTHING`.pipe(
          Effect.asVoid,
          Effect.mapError(() => new Unavailable({ message: STORE_UNAVAILABLE }))
        ),
      publicAmong: (commitments) =>
        commitments.length === 0
          ? Effect.succeed(new Set<string>())
          : sql<{ readonly handle_commitment: string }>`
              SELECT handle_commitment FROM attestor_public_commitments
              WHERE ${sql.in(
                "handle_commitment",
                commitments.map((c) => c.toLowerCase())
              )}`.pipe(
              Effect.map((rows) => new Set(rows.map((r) => r.handle_commitment))),
              Effect.mapError(() => new Unavailable({ message: STORE_UNAVAILABLE }))
            )
    }))
  )

  /** For wiring without a database (tests of other routes): nothing is public, nothing is recorded. */
  static readonly none: Layer.Layer<PublicCommitments> = Layer.succeed(PublicCommitments, {
    record: () => Effect.dieMessage("PublicCommitments.none: this wiring records nothing"),
    publicAmong: () => Effect.succeed(new Set<string>())
  })
}
