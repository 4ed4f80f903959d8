/**
 * Exclusion between replicas sharing one PostgreSQL: session advisory locks, each on a reserved
 * connection of its own, given back when their scope closes. Used by the indexer's writer
 * election (`EventStore.leadership`) and the tx sender's hot-key lock (`txsender/lock.ts`).
 *
 * A lock request interrupted while its answer was on the way may have been granted: the lock is
 * then held by a session the caller no longer knows about, and on a pooled connection it would
 * outlive the caller and keep every other replica out. So the lock is treated as possibly held
 * from the moment its request leaves until it is answered "not granted", and the scope's end
 * unlocks it on the same connection (queued behind the request) whenever it may be held.
 *
 * The embedded database (PGlite) multiplexes every connection onto one session, where advisory
 * locks are re-entrant and exclude nothing; it belongs to one process, so exclusion there is
 * decided in-process (`inProcessLock`, or the callers' semaphores) and no connection is held.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, type Scope } from "effect"
import { keccak256, stringToHex } from "viem"

export { isEmbeddedDatabase } from "./sql.js"

/** A signed 64-bit advisory lock key derived from a name (decimal, for a `::bigint` parameter). */
export const advisoryKey = (name: string): string =>
  BigInt.asIntN(64, BigInt(keccak256(stringToHex(name)).slice(0, 18))).toString()

/** Per SQL client, the schema its tables are in. */
const schemas = new WeakMap<SqlClient, string>()

/**
 * `key` as this client takes it. Advisory locks belong to the whole database, while a deployment's
 * tables belong to its schema: two deployments in schemas of one database would otherwise exclude
 * each other, one indexer standing by for another's vault. The schema is the one the migrations'
 * table resolves to through the search path, where every table of the deployment is, and not
 * `current_schema()`, which a schema created later earlier in the path (one named after the role)
 * would change under replicas already running. In `public` a key is itself, as before, so replicas
 * of an earlier version still exclude these.
 */
export const scopedKey = (sql: SqlClient, key: string): Effect.Effect<string, SqlError> => {
  const known = schemas.get(sql)
  const derive = (schema: string) => (schema === "public" ? key : advisoryKey(`${schema}:${key}`))
  if (known !== undefined) return Effect.succeed(derive(known))
  return Effect.map(
    sql<{ readonly tables: string | null; readonly current: string | null }>`
      SELECT (SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
              WHERE c.oid = to_regclass('schema_migrations')) AS tables,
             current_schema() AS current`,
    (rows) => {
      const tables = rows[0]?.tables ?? null
      // Settled once the migrations' table exists; before (the first migration, under its lock),
      // the schema it is about to be created in.
      if (tables !== null) schemas.set(sql, tables)
      const schema = tables ?? rows[0]?.current ?? null
      // No schema of the search path exists: nothing can be created, so any key will do.
      return schema === null ? key : derive(schema)
    }
  )
}

/** The transaction advisory lock of `key` (in this client's schema), held until the transaction ends. */
export const transactionLock = (sql: SqlClient, key: string): Effect.Effect<void, SqlError> =>
  Effect.flatMap(scopedKey(sql, key), (scoped) => sql`SELECT pg_advisory_xact_lock(${scoped}::bigint)`).pipe(
    Effect.asVoid
  )

export interface ExclusiveLock<E = SqlError> {
  /** Takes the lock if it is free, never waiting; true while this holder holds it. */
  readonly tryLock: Effect.Effect<boolean, E>
  /** Fails when the session that holds the lock is gone (and with it the lock). */
  readonly check: Effect.Effect<void, E>
  /**
   * Whether this holder holds the lock at this moment: asked of the database, so a session that
   * ended (an idle timeout, a proxy) and a connection that came back as another session both
   * answer false, or fail.
   */
  readonly held: Effect.Effect<boolean, E>
}

/** The two oids of a signed 64-bit advisory key as `pg_locks` shows it (with `objsubid = 1`). */
const lockOids = (key: string): readonly [string, string] => {
  const unsigned = BigInt.asUintN(64, BigInt(key))
  return [(unsigned >> 32n).toString(), (unsigned & 0xffffffffn).toString()]
}

/**
 * A session advisory lock on `name` (an `advisoryKey`, taken in this client's schema: `scopedKey`)
 * over a connection reserved for it. The scope's end unlocks it whenever it may be held (see
 * above), then returns the connection to the pool.
 */
export const sessionLock = (
  sql: SqlClient,
  name: string,
  options: {
    /** `name` is unique to the whole database already (a random key): taken as it is. */
    readonly databaseWide?: boolean
  } = {}
): Effect.Effect<ExclusiveLock, SqlError, Scope.Scope> =>
  Effect.gen(function* () {
    const key = options.databaseWide === true ? name : yield* scopedKey(sql, name)
    const connection = yield* sql.reserve
    // True from the moment a lock request leaves until it is answered "not granted".
    let mayHold = false
    let held = false
    // Added after the reservation, so it runs before the connection goes back to the pool. All
    // of the session's locks: an interrupted request may have added a grant to the count.
    yield* Effect.addFinalizer(() =>
      mayHold
        ? connection.execute("SELECT pg_advisory_unlock_all()", [], undefined).pipe(Effect.ignore)
        : Effect.void
    )
    const request = Effect.suspend(() => {
      mayHold = true
      return connection.execute("SELECT pg_try_advisory_lock($1::bigint) AS locked", [key], undefined)
    }).pipe(
      Effect.map((rows) => {
        const first: unknown = rows[0]
        held = typeof first === "object" && first !== null && "locked" in first && first.locked === true
        mayHold = held
        return held
      })
    )
    const [classid, objid] = lockOids(key)
    return {
      // Once held, not asked again: session locks are re-entrant and each grant needs its unlock.
      tryLock: Effect.suspend(() => (held ? Effect.succeed(true) : request)),
      check: connection.execute("SELECT 1", [], undefined).pipe(Effect.asVoid),
      held: connection
        .execute(
          `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted
             AND pid = pg_backend_pid() AND classid = $1::oid AND objid = $2::oid AND objsubid = 1) AS held`,
          [classid, objid],
          undefined
        )
        .pipe(
          Effect.map((rows) => {
            const first: unknown = rows[0]
            return typeof first === "object" && first !== null && "held" in first && first.held === true
          })
        )
    } satisfies ExclusiveLock
  })

/** Per SQL client, the holder of each key in this process. */
const inProcessHolders = new WeakMap<SqlClient, Map<string, object>>()

/**
 * The in-process election of an embedded database among the locks of one client; the scope's
 * end gives the lock up. No connection is held, so the single embedded one stays free.
 */
export const inProcessLock = (
  sql: SqlClient,
  key: string
): Effect.Effect<ExclusiveLock<never>, never, Scope.Scope> =>
  Effect.gen(function* () {
    let holders = inProcessHolders.get(sql)
    if (holders === undefined) {
      holders = new Map()
      inProcessHolders.set(sql, holders)
    }
    const table = holders
    const token = {}
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        if (table.get(key) === token) table.delete(key)
      })
    )
    return {
      tryLock: Effect.sync(() => {
        const holder = table.get(key)
        if (holder === undefined) table.set(key, token)
        return holder === undefined || holder === token
      }),
      check: Effect.void,
      held: Effect.sync(() => table.get(key) === token)
    } satisfies ExclusiveLock<never>
  })
