/**
 * Advisory locks belong to the whole PostgreSQL database, a deployment's tables to its schema.
 * Two deployments in two schemas of one database (PostgreSQL only, when DATABASE_URL is set) must
 * not exclude each other: each indexes its own vault, each sends from its own hot key, even when
 * vault address and key are the same (two devnets, a staging copy). Within one schema the locks
 * still exclude, and in `public` a key is what it always was.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Layer, Option, Redacted } from "effect"
import { advisoryKey, scopedKey, sessionLock } from "../../src/store/advisoryLock.js"
import { sqlLayer } from "../../src/store/sql.js"
import { makeKeyLock } from "../../src/txsender/lock.js"
import { testDatabases } from "../support/database.js"

const postgresLayers = () =>
  testDatabases()
    .filter((d) => d.name === "postgresql")
    .map((d) => d.layer)

describe.skipIf(process.env.DATABASE_URL === undefined)(
  "advisory locks in two schemas of one database",
  () => {
    it.live(
      "exclude within a schema and not across schemas",
      () =>
        Effect.gen(function* () {
          const [first, second] = [postgresLayers()[0]!, postgresLayers()[0]!]
          const inFirst = yield* Layer.build(first)
          const inSecond = yield* Layer.build(second)
          const key = advisoryKey(
            `vault-indexer:31337:0x5fbdb2315678afecb367f032d93f642f64180aa3:${Math.random()}`
          )
          const take = (ctx: typeof inFirst) =>
            Effect.flatMap(SqlClient, (sql) => sessionLock(sql, key)).pipe(
              Effect.flatMap((lock) => lock.tryLock),
              Effect.provide(ctx)
            )
          // The first deployment's indexer leads its vault; another session of the same schema cannot.
          expect(yield* take(inFirst)).toBe(true)
          expect(yield* take(inFirst)).toBe(false)
          // The second deployment, same vault address, its own schema: it leads its own.
          expect(yield* take(inSecond)).toBe(true)

          // The hot-key lock likewise: both deployments send from the same key at once.
          const hotKey = advisoryKey(
            `relayer-tx-sender:0x70997970c51812dc3a010c7d01b50e0d17dc79c8:${Math.random()}`
          )
          const keyLock = (ctx: typeof inFirst) =>
            makeKeyLock({
              key: hotKey,
              timeout: Duration.millis(500),
              embedded: false,
              semaphore: Effect.unsafeMakeSemaphore(1)
            }).pipe(Effect.provide(ctx))
          const holdFirst = yield* keyLock(inFirst)
          const holdSecond = yield* keyLock(inSecond)
          const otherInFirst = yield* keyLock(inFirst)
          const nested = yield* holdFirst(
            Effect.all([
              Effect.either(holdSecond(Effect.succeed("sent"))),
              Effect.either(otherInFirst(Effect.void))
            ])
          )
          expect(nested[0]._tag).toBe("Right")
          expect(nested[1]._tag === "Left" && nested[1].left._tag).toBe("LockTimeout")
        }).pipe(Effect.scoped),
      30_000
    )

    it.effect("derive a schema's keys from it, and keep them as they were in public", () =>
      Effect.gen(function* () {
        const key = advisoryKey("event-store-writes:31337")
        const inSchema = yield* Effect.flatMap(SqlClient, (sql) =>
          Effect.all([sql<{ readonly s: string }>`SELECT current_schema() AS s`, scopedKey(sql, key)])
        ).pipe(Effect.provide(postgresLayers()[0]!))
        const schema = inSchema[0][0]!.s
        expect(schema).not.toBe("public")
        expect(inSchema[1]).toBe(advisoryKey(`${schema}:${key}`))
        const inPublic = yield* Effect.flatMap(SqlClient, (sql) => scopedKey(sql, key)).pipe(
          Effect.provide(
            sqlLayer({
              databaseUrl: Option.some(Redacted.make(process.env.DATABASE_URL as string)),
              dataDir: "",
              applicationName: "test"
            })
          )
        )
        expect(inPublic).toBe(key)
      }).pipe(Effect.scoped)
    )

    it.live("keep a deployment's keys when a schema is created earlier in its search path", () =>
      Effect.gen(function* () {
        const suffix = Math.random().toString(16).slice(2, 10)
        const tables = `scoped_tables_${suffix}`
        const later = `scoped_later_${suffix}`
        const url = new URL(process.env.DATABASE_URL as string)
        url.searchParams.set("options", `-c search_path=${later},${tables}`)
        const admin = sqlLayer({
          databaseUrl: Option.some(Redacted.make(process.env.DATABASE_URL as string)),
          dataDir: "",
          applicationName: "test"
        })
        const run = (statement: string) =>
          Effect.flatMap(SqlClient, (sql) => sql.unsafe(statement)).pipe(Effect.provide(admin), Effect.scoped)
        const keyOfNewReplica = (key: string) =>
          Effect.flatMap(SqlClient, (sql) => scopedKey(sql, key)).pipe(
            Effect.provide(
              sqlLayer({
                databaseUrl: Option.some(Redacted.make(url.toString())),
                dataDir: "",
                applicationName: "test"
              })
            ),
            Effect.scoped
          )
        yield* run(`CREATE SCHEMA ${tables}`)
        yield* run(`CREATE TABLE ${tables}.schema_migrations (migration_id integer)`)
        const key = advisoryKey("relayer-tx-sender:0x70997970c51812dc3a010c7d01b50e0d17dc79c8")
        const keys = yield* Effect.gen(function* () {
          const before = yield* keyOfNewReplica(key)
          // A schema named earlier in the path appears (one named after the role, say): the
          // tables stay where they are, and so do the keys of replicas started afterwards.
          yield* run(`CREATE SCHEMA ${later}`)
          return [before, yield* keyOfNewReplica(key)] as const
        }).pipe(
          Effect.ensuring(
            Effect.all([
              run(`DROP SCHEMA IF EXISTS ${later} CASCADE`),
              run(`DROP SCHEMA ${tables} CASCADE`)
            ]).pipe(Effect.orDie)
          )
        )
        expect(keys[0]).toBe(advisoryKey(`${tables}:${key}`))
        expect(keys[1]).toBe(keys[0])
      })
    )
  }
)
