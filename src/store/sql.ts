/**
 * The one SQL client both services use. With `DATABASE_URL` it is PostgreSQL; without it an
 * embedded PGlite database under `DATA_DIR`, served over the Postgres wire protocol on a loopback
 * port so that the very same `@effect/sql-pg` client (and the same SQL) talks to either.
 */
import { access, mkdir, rm } from "node:fs/promises"
import { join } from "node:path"
import { SqlClient } from "@effect/sql/SqlClient"
import { PgClient } from "@effect/sql-pg"
import { PGlite } from "@electric-sql/pglite"
import { PGLiteSocketServer } from "@electric-sql/pglite-socket"
import { Data, Effect, Layer, Option, type Redacted } from "effect"
import { migrate } from "./migrations.js"

/** Pool size of the client on PostgreSQL. */
export const POOL_SIZE = 8
/**
 * The embedded database is one PGlite session that the socket server feeds one protocol message at
 * a time: the Parse/Bind/Execute sequences of two connections could interleave and bind one
 * statement with another's parameters. One client connection keeps every statement whole.
 */
const EMBEDDED_POOL_SIZE = 1
/** The socket server accepts a few more, so a replaced connection never waits for a slot. */
const EMBEDDED_MAX_CONNECTIONS = 4

/**
 * The embedded database's memory. PostgreSQL's defaults (128 MB of shared buffers) are sized for a
 * server; one service's tables fit in far less, and every megabyte of PGlite's heap is resident.
 * With these an idle embedded database holds about 170 MB instead of 300-750 MB.
 */
export const EMBEDDED_POSTGRESQL_CONF = [
  "shared_buffers = 16MB",
  "maintenance_work_mem = 16MB",
  "wal_buffers = 1MB",
  "temp_buffers = 2MB"
] as const

export class EmbeddedDatabaseError extends Data.TaggedError("EmbeddedDatabaseError")<{
  readonly message: string
  readonly cause: unknown
}> {}

export interface StorageOptions {
  readonly databaseUrl: Option.Option<Redacted.Redacted>
  /** Directory of the embedded database, or `memory://` for a throwaway one. */
  readonly dataDir: string
  readonly applicationName: string
}

/** Starts PGlite and its socket server; both stop when the scope closes. */
export const embeddedPostgres = (dataDir: string) =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        const options = { postgresqlconf: [...EMBEDDED_POSTGRESQL_CONF] }
        // PGlite writes `postgresql.conf` from `postgresqlconf` at every start and fails when the
        // file is there already; it holds nothing but those lines, so it is written afresh.
        const freshConf = () => rm(join(dataDir, "postgresql.conf"), { force: true })
        if (!dataDir.startsWith("memory://")) {
          await mkdir(dataDir, { recursive: true })
          await freshConf()
          const initialized = await access(join(dataDir, "PG_VERSION")).then(
            () => true,
            () => false
          )
          if (!initialized) {
            // Creating the cluster keeps several hundred megabytes of PGlite's memory for the
            // life of that instance; a second instance over the created cluster does not.
            await (await PGlite.create(dataDir, options)).close()
            await freshConf()
          }
        }
        const db = await PGlite.create(dataDir, options)
        const server = new PGLiteSocketServer({
          db,
          host: "127.0.0.1",
          port: 0,
          maxConnections: EMBEDDED_MAX_CONNECTIONS
        })
        try {
          await server.start()
        } catch (e) {
          await db.close()
          throw e
        }
        const [host, port] = server.getServerConn().split(":")
        return { db, server, host: host ?? "127.0.0.1", port: Number(port) }
      },
      catch: (cause) =>
        new EmbeddedDatabaseError({ message: `cannot open the embedded database in ${dataDir}`, cause })
    }),
    ({ db, server }) => Effect.promise(() => server.stop().then(() => db.close()))
  )

export const sqlLayer = (options: StorageOptions) =>
  Option.match(options.databaseUrl, {
    onSome: (url) =>
      PgClient.layer({ url, maxConnections: POOL_SIZE, applicationName: options.applicationName }),
    onNone: () =>
      Layer.unwrapScoped(
        Effect.map(embeddedPostgres(options.dataDir), ({ host, port }) =>
          PgClient.layer({
            host,
            port,
            database: "postgres",
            username: "postgres",
            maxConnections: EMBEDDED_POOL_SIZE,
            applicationName: options.applicationName
          })
        )
      )
  })

/** The SQL client with every migration applied before anything else uses it. */
export const storageLayer = (options: StorageOptions) =>
  Layer.effectDiscard(migrate).pipe(Layer.provideMerge(sqlLayer(options)))

/**
 * Whether the client talks to the embedded database. It belongs to this process alone, so
 * single-writer elections (advisory locks) are decided in-process there.
 */
export const isEmbeddedDatabase = Effect.flatMap(SqlClient, (sql) =>
  sql<{ readonly v: string }>`SELECT version() AS v`.pipe(
    Effect.map((rows) => /PGlite/i.test(rows[0]?.v ?? ""))
  )
)
