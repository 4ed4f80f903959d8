/**
 * The one SQL client both services use. With `DATABASE_URL` it is PostgreSQL; without it an
 * embedded PGlite database under `DATA_DIR`, served over the Postgres wire protocol so that the
 * very same `@effect/sql-pg` client (and the same SQL) talks to either. It is served on a Unix
 * socket in a directory only this process's user can enter, never on a TCP port: the embedded
 * database has no password and every connection is its superuser (docs/operations.md "The
 * embedded database").
 */
import { spawn } from "node:child_process"
import { access, chmod, mkdir, mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { extname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as PgClient from "@effect/sql-pg/PgClient"
import { PGlite } from "@electric-sql/pglite"
import { PGLiteSocketServer } from "@electric-sql/pglite-socket"
import { Data, Effect, Layer, Option, Redacted } from "effect"
import { type DatabaseStartError, databaseStartError } from "./databaseFailure.js"
import { createCluster, embeddedOptions } from "./embeddedCluster.js"
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

/** A refusal of the embedded database's own setup, whose message names what to change. */
class OwnSetupError extends Error {}

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

const clusterExists = (dataDir: string) =>
  access(join(dataDir, "PG_VERSION")).then(
    () => true,
    () => false
  )

/** This process's loader flags, not a profiler's or a debugger's (whose port is taken). */
const runtimeFlags = () => process.execArgv.filter((flag) => !/^--(inspect|cpu-prof|heap-prof)/.test(flag))

/**
 * Runs src/store/createCluster with this process's runtime: from beside this module, which is the
 * service's bundle under plain node (dist/services, scripts/bundle.ts) or the `.ts` source under the
 * same loader flags. False when the child did not create the cluster.
 */
export const createClusterInChild = async (
  dataDir: string,
  runtime: ReadonlyArray<string> = runtimeFlags()
): Promise<boolean> => {
  const here = fileURLToPath(import.meta.url)
  const script = join(here, "..", `createCluster${extname(here)}`)
  const exitCode = await new Promise<number | null>((resolve) => {
    const child = spawn(process.execPath, [...runtime, script, dataDir], {
      stdio: ["ignore", "ignore", "pipe"]
    })
    // Drained so the child never blocks on a full pipe; on failure the in-process creation that
    // follows reports the cause itself.
    child.stderr.resume()
    child.on("error", () => resolve(null))
    child.on("exit", (code) => resolve(code))
  })
  // Exiting 0 is not enough: the cluster must be there.
  return exitCode === 0 && clusterExists(dataDir)
}

/**
 * The longest socket path a Unix socket can bind on every platform the services run on (Linux
 * allows 107 bytes, macOS 103).
 */
const MAX_SOCKET_PATH = 103

/** A fresh directory of mode 0700 (`mkdtemp`'s) under the system's temporary directory. */
const temporarySocketDirectory = async () => ({
  directory: await mkdtemp(join(tmpdir(), "fee-vault-db-")),
  temporary: true
})

/**
 * The directory of the embedded database's socket: `DATA_DIR/socket`, or a fresh temporary one for
 * a database in memory or a `DATA_DIR` too deep for a socket path (`socketFits`). Mode 0700, set
 * again on a directory that was already there, so only this user's processes, which can read the
 * database files anyway, can reach the socket. `chmod` fails on a directory another user owns, and
 * the start with it.
 */
const socketDirectory = async (dataDir: string, socketName: string) => {
  if (dataDir.startsWith("memory://")) return temporarySocketDirectory()
  // Absolute: node-postgres takes a host for a socket directory only when it starts with "/".
  const directory = resolve(dataDir, "socket")
  if (!socketFits(join(directory, socketName))) return temporarySocketDirectory()
  await mkdir(directory, { recursive: true, mode: 0o700 })
  await chmod(directory, 0o700)
  return { directory, temporary: false }
}

const socketFits = (path: string) => Buffer.byteLength(path) <= MAX_SOCKET_PATH

/**
 * `@effect/sql-pg` (node-postgres) reaches a Unix socket through a `host` that is a directory, at
 * `<host>/.s.PGSQL.<port>`. The port is this process's id: a socket left by a process killed
 * before it closed its own, on the same `DATA_DIR`, has another name or is this process's to
 * replace.
 */
const socketPort = () => process.pid

/**
 * `DATA_DIR` itself at mode 0700, set again at every start: PGlite writes its files readable and
 * writable by everyone (mode 0666), so a directory others can enter would let another user copy
 * the database or write a session into its files (docs/operations.md "The embedded database").
 * A directory of another user's cannot be closed, and its owner (and a group writing it) could do
 * the same at any time: the start stops, saying so.
 */
export const closeDataDirectory = async (dataDir: string) => {
  await mkdir(dataDir, { recursive: true, mode: 0o700 })
  await chmod(dataDir, 0o700).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== "EPERM") throw error
    throw new OwnSetupError(
      `DATA_DIR ${dataDir} belongs to another user, so it cannot be closed to everyone else: make the service's user its owner`
    )
  })
}

/** Starts PGlite and its socket server; both stop when the scope closes. */
export const embeddedPostgres = (dataDir: string) =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        // PGlite writes `postgresql.conf` from `postgresqlconf` at every start and fails when the
        // file is there already; it holds nothing but those lines, so it is written afresh.
        const freshConf = () => rm(join(dataDir, "postgresql.conf"), { force: true })
        if (!dataDir.startsWith("memory://")) {
          await closeDataDirectory(dataDir)
          await freshConf()
          if (!(await clusterExists(dataDir))) {
            // Creating the cluster grows PGlite's heap by several hundred megabytes that this
            // process would keep after the instance closes: it is created by a child process
            // (src/store/createCluster.ts), whose memory goes when it exits. Where no child can
            // run this module (a test runner's transform), it is created here as before.
            if (!(await createClusterInChild(dataDir))) await createCluster(dataDir)
            await freshConf()
          }
        }
        const port = socketPort()
        const socketName = `.s.PGSQL.${port}`
        const { directory, temporary } = await socketDirectory(dataDir, socketName)
        const path = join(directory, socketName)
        const removeSocket = () => rm(temporary ? directory : path, { recursive: true, force: true })
        if (!socketFits(path)) {
          await removeSocket()
          throw new OwnSetupError(
            `the socket path ${path} is longer than ${MAX_SOCKET_PATH} bytes: set TMPDIR to a shorter directory`
          )
        }
        await rm(path, { force: true })
        const db = await PGlite.create(dataDir, embeddedOptions())
        const server = new PGLiteSocketServer({ db, path, maxConnections: EMBEDDED_MAX_CONNECTIONS })
        try {
          await server.start()
        } catch (e) {
          await db.close()
          await removeSocket()
          throw e
        }
        return { db, server, host: directory, port, removeSocket }
      },
      catch: (cause) =>
        new EmbeddedDatabaseError({
          // Why, when it is one of ours (a path, a mode); a library's cause stays in `cause`.
          message: `cannot open the embedded database in ${dataDir}${cause instanceof OwnSetupError ? `: ${cause.message}` : ""}`,
          cause
        })
    }),
    ({ db, server, removeSocket }) =>
      Effect.promise(() =>
        server
          .stop()
          .then(() => db.close())
          .finally(removeSocket)
      )
  )

export const sqlLayer = (
  options: StorageOptions
): Layer.Layer<SqlClient | PgClient.PgClient, DatabaseStartError | SqlError | EmbeddedDatabaseError> =>
  Option.match(options.databaseUrl, {
    onSome: (url) =>
      PgClient.layer({ url, maxConnections: POOL_SIZE, applicationName: options.applicationName }).pipe(
        // One line naming DATABASE_URL and the cause, instead of the client's "Failed to connect".
        Layer.catchAll((error) => Layer.fail(databaseStartError(Redacted.value(url), error)))
      ),
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
