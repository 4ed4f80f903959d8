import { SqlClient } from "@effect/sql/SqlClient"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { migrate, migrations } from "../../src/store/migrations.js"
import { testDatabases } from "../support/database.js"

const UINT256_MAX = (2n ** 256n - 1n).toString()
const INT64_MAX = (2n ** 63n - 1n).toString()

for (const database of testDatabases()) {
  describe(database.name, () => {
    layer(database.layer, { timeout: 60_000 })((it) => {
      it.effect("applies every migration once, and a second run finds nothing to do", () =>
        Effect.gen(function* () {
          const first = yield* migrate
          expect(first.map(([id]) => id)).toEqual(Object.keys(migrations).map((k) => Number(k.split("_")[0])))
          const second = yield* migrate
          expect(second).toEqual([])
          const sql = yield* SqlClient
          const tables = yield* sql<{ table_name: string }>`
            SELECT table_name FROM information_schema.tables
            WHERE table_schema = current_schema() ORDER BY table_name`
          expect(tables.map((t) => t.table_name)).toEqual(
            expect.arrayContaining(["block_headers", "orphaned_blocks", "schema_migrations", "vault_events"])
          )
        })
      )

      it.effect("NUMERIC and bigint come back as exact decimal strings", () =>
        Effect.gen(function* () {
          const sql = yield* SqlClient
          yield* sql`CREATE TABLE numbers (amount numeric(78, 0) NOT NULL, block bigint NOT NULL)`
          yield* sql`INSERT INTO numbers ${sql.insert([
            { amount: UINT256_MAX, block: INT64_MAX },
            { amount: "0", block: "0" },
            { amount: "1", block: "1" }
          ])}`
          const rows = yield* sql<{ amount: unknown; block: unknown }>`
            SELECT amount, block FROM numbers ORDER BY amount DESC`
          expect(rows).toEqual([
            { amount: UINT256_MAX, block: INT64_MAX },
            { amount: "1", block: "1" },
            { amount: "0", block: "0" }
          ])
          const sum = yield* sql<{
            total: unknown
          }>`SELECT sum(amount) AS total FROM numbers WHERE amount < 2`
          expect(sum[0]?.total).toBe("1")
        })
      )

      it.effect("jsonb keeps big decimal strings exactly", () =>
        Effect.gen(function* () {
          const sql = yield* SqlClient
          yield* sql`CREATE TABLE docs (body jsonb NOT NULL)`
          yield* sql`INSERT INTO docs (body) VALUES (${JSON.stringify({ amount: UINT256_MAX, n: 7 })}::jsonb)`
          const rows = yield* sql<{ body: unknown }>`SELECT body FROM docs`
          expect(rows[0]?.body).toEqual({ amount: UINT256_MAX, n: 7 })
        })
      )
    })
  })
}

// Replicas share PostgreSQL only: an embedded database belongs to one process, which migrates once.
for (const database of testDatabases().filter((d) => d.name === "postgresql")) {
  describe(`${database.name}, replicas starting together`, () => {
    // A fresh database (schema) of its own: the race is on creating the migrations table.
    layer(database.layer, { timeout: 60_000 })((it) => {
      it.effect(
        "several migrations at once on a fresh database all succeed, and each migration runs once",
        () =>
          Effect.gen(function* () {
            const runs = yield* Effect.all(
              Array.from({ length: 4 }, () => migrate),
              { concurrency: "unbounded" }
            )
            const ran = runs.flatMap((run) => run.map(([id]) => id)).sort((a, b) => a - b)
            expect(ran).toEqual(Object.keys(migrations).map((k) => Number(k.split("_")[0])))
          })
      )
    })
  })
}
