/**
 * The databases a storage test runs on: embedded PGlite always, PostgreSQL too when
 * `DATABASE_URL` is set. Each PostgreSQL layer gets a schema of its own, dropped afterwards, so
 * test files running side by side never see each other's tables.
 */
import { randomBytes } from "node:crypto"
import { Reactivity } from "@effect/experimental"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Option, Redacted } from "effect"
import { sqlLayer } from "../../src/store/sql.js"

export interface TestDatabase {
  readonly name: "pglite" | "postgresql"
  readonly layer: Layer.Layer<PgClient.PgClient | import("@effect/sql/SqlClient").SqlClient, unknown>
}

const isolatedPostgres = (databaseUrl: string) =>
  Layer.unwrapScoped(
    Effect.gen(function* () {
      const schema = `test_${randomBytes(6).toString("hex")}`
      const admin = PgClient.make({ url: Redacted.make(databaseUrl), maxConnections: 1 }).pipe(
        Effect.provide(Reactivity.layer)
      )
      yield* Effect.acquireRelease(
        Effect.scoped(Effect.flatMap(admin, (sql) => sql.unsafe(`CREATE SCHEMA ${schema}`))),
        () =>
          Effect.scoped(Effect.flatMap(admin, (sql) => sql.unsafe(`DROP SCHEMA ${schema} CASCADE`))).pipe(
            Effect.orDie
          )
      )
      const url = new URL(databaseUrl)
      url.searchParams.set("options", `-c search_path=${schema}`)
      return sqlLayer({
        databaseUrl: Option.some(Redacted.make(url.toString())),
        dataDir: "",
        applicationName: "test"
      })
    })
  )

export const testDatabases = (): ReadonlyArray<TestDatabase> => {
  const url = process.env.DATABASE_URL
  const embedded: TestDatabase = {
    name: "pglite",
    layer: sqlLayer({ databaseUrl: Option.none(), dataDir: "memory://", applicationName: "test" })
  }
  return url ? [embedded, { name: "postgresql", layer: isolatedPostgres(url) }] : [embedded]
}
