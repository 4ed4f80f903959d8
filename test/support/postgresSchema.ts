/**
 * A PostgreSQL schema of its own on a shared database: the URL to reach it (its `search_path`
 * set through the connection's options) and `drop`, which removes it with everything in it.
 * For tests and benches whose processes must not see each other's tables.
 */
import { randomBytes } from "node:crypto"
import { Reactivity } from "@effect/experimental"
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"

export const freshPostgresSchema = async (
  databaseUrl: string,
  prefix: string
): Promise<{ readonly url: string; readonly drop: () => Promise<void> }> => {
  const schema = `${prefix}_${randomBytes(6).toString("hex")}`
  const admin = PgClient.make({ url: Redacted.make(databaseUrl), maxConnections: 1 }).pipe(
    Effect.provide(Reactivity.layer)
  )
  const run = (statement: string) =>
    Effect.runPromise(Effect.scoped(Effect.flatMap(admin, (sql) => sql.unsafe(statement))))
  await run(`CREATE SCHEMA ${schema}`)
  const url = new URL(databaseUrl)
  url.searchParams.set("options", `-c search_path=${schema}`)
  return { url: url.toString(), drop: () => run(`DROP SCHEMA ${schema} CASCADE`).then(() => {}) }
}
