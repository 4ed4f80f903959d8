/**
 * Schema migrations, one dialect for PostgreSQL and PGlite. The event store is append-only by
 * design (docs/architecture.md, "State changes enter through the event store"): events, orphan markers,
 * ranges and nonce reconciliations are never updated or deleted; block headers, which only serve
 * reorg detection, are pruned below the finality horizon.
 */
import * as Migrator from "@effect/sql/Migrator"
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { advisoryKey, scopedKey } from "./advisoryLock.js"
import m0001_event_store from "./migrations/0001_event_store.js"
import m0002_indexer_progress from "./migrations/0002_indexer_progress.js"
import m0010_tx_sender from "./migrations/0010_tx_sender.js"
import m0011_tx_confirmations from "./migrations/0011_tx_confirmations.js"
import m0012_nonce_reservations from "./migrations/0012_nonce_reservations.js"
import m0013_relayer_revert_cooldowns from "./migrations/0013_relayer_revert_cooldowns.js"
import m0014_reservation_holders from "./migrations/0014_reservation_holders.js"
import m0015_relayer_bind_budgets from "./migrations/0015_relayer_bind_budgets.js"
import m0020_attestor_sessions from "./migrations/0020_attestor_sessions.js"
import m0021_attestor_attestations from "./migrations/0021_attestor_attestations.js"
import m0022_attestor_bind_proposals from "./migrations/0022_attestor_bind_proposals.js"
import m0023_attestor_owner_visibility from "./migrations/0023_attestor_owner_visibility.js"
import m0024_attestor_oauth_states from "./migrations/0024_attestor_oauth_states.js"
import m0025_attestor_public_commitments from "./migrations/0025_attestor_public_commitments.js"
import m0026_attestor_payments from "./migrations/0026_attestor_payments.js"
import m0027_tx_mined_block_hash from "./migrations/0027_tx_mined_block_hash.js"
import m0028_attestor_contests from "./migrations/0028_attestor_contests.js"
import m0029_attestor_payment_leases from "./migrations/0029_attestor_payment_leases.js"
import m0030_attestor_login_challenges from "./migrations/0030_attestor_login_challenges.js"
import m0031_attestor_user_contests from "./migrations/0031_attestor_user_contests.js"
import m0032_attestor_payment_retention from "./migrations/0032_attestor_payment_retention.js"
import m0033_attestor_oauth_state_clients from "./migrations/0033_attestor_oauth_state_clients.js"
import m0034_attestor_unasked_verdict from "./migrations/0034_attestor_unasked_verdict.js"
import m0035_attestor_paid_answers from "./migrations/0035_attestor_paid_answers.js"

/** Every migration, by `<id>_<name>`; a module adds its tables with a new file and one line here. */
export const migrations = {
  "0001_event_store": m0001_event_store,
  "0002_indexer_progress": m0002_indexer_progress,
  "0010_tx_sender": m0010_tx_sender,
  "0011_tx_confirmations": m0011_tx_confirmations,
  "0012_nonce_reservations": m0012_nonce_reservations,
  "0013_relayer_revert_cooldowns": m0013_relayer_revert_cooldowns,
  "0014_reservation_holders": m0014_reservation_holders,
  "0015_relayer_bind_budgets": m0015_relayer_bind_budgets,
  "0020_attestor_sessions": m0020_attestor_sessions,
  "0021_attestor_attestations": m0021_attestor_attestations,
  "0022_attestor_bind_proposals": m0022_attestor_bind_proposals,
  "0023_attestor_owner_visibility": m0023_attestor_owner_visibility,
  "0024_attestor_oauth_states": m0024_attestor_oauth_states,
  "0025_attestor_public_commitments": m0025_attestor_public_commitments,
  "0026_attestor_payments": m0026_attestor_payments,
  "0027_tx_mined_block_hash": m0027_tx_mined_block_hash,
  "0028_attestor_contests": m0028_attestor_contests,
  "0029_attestor_payment_leases": m0029_attestor_payment_leases,
  "0030_attestor_login_challenges": m0030_attestor_login_challenges,
  "0031_attestor_user_contests": m0031_attestor_user_contests,
  "0032_attestor_payment_retention": m0032_attestor_payment_retention,
  "0033_attestor_oauth_state_clients": m0033_attestor_oauth_state_clients,
  "0034_attestor_unasked_verdict": m0034_attestor_unasked_verdict,
  "0035_attestor_paid_answers": m0035_attestor_paid_answers
} as const

/** Everything above the highest migration a database has applied. */
const migrateAbove = Migrator.make({})({
  loader: Migrator.fromRecord(migrations),
  table: "schema_migrations"
})

/**
 * Migrations numbered below one the database has applied already (each module has its own range
 * of numbers, so a module's new migration can sort below another module's older one), which
 * `Migrator` skips: applied here in order, under the same lock. Each such migration must be
 * written to run on a database that is past it (IF NOT EXISTS).
 */
const migrateSkipped = Effect.gen(function* () {
  const sql = yield* SqlClient
  return yield* Effect.gen(function* () {
    yield* sql`LOCK TABLE schema_migrations IN ACCESS EXCLUSIVE MODE`
    const rows = yield* sql<{
      readonly migration_id: number | string
    }>`SELECT migration_id FROM schema_migrations`
    const applied = new Set(rows.map((row) => Number(row.migration_id)))
    const skipped = Object.entries(migrations)
      .map(([key, effect]) => [Number(key.split("_")[0]), key.slice(key.indexOf("_") + 1), effect] as const)
      .filter(([id]) => !applied.has(id))
      .sort(([a], [b]) => a - b)
    for (const [id, name, effect] of skipped) {
      yield* effect
      yield* sql`INSERT INTO schema_migrations (migration_id, name) VALUES (${id}, ${name})`
    }
    return skipped.map(([id, name]) => [id, name] as const)
  }).pipe(sql.withTransaction)
})

/**
 * A session advisory lock every process takes around its migrations. The migrator's own table
 * lock comes after it creates its table, and two PostgreSQL sessions creating one table at once
 * (`CREATE TABLE IF NOT EXISTS`) can fail; replicas on a fresh database start together.
 */
// A function, not a constant: advisoryLock.ts and this module import each other (through sql.ts).
const migrationsLock = () => advisoryKey("schema-migrations")

/**
 * Holds the migrations lock on a connection of its own while `effect` runs (PostgreSQL only). The
 * wait is in PostgreSQL (`pg_advisory_lock`) and cannot be interrupted half-way: a replica waits
 * until the one migrating is done.
 */
const withMigrationsLock = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const version = yield* sql<{ readonly v: string }>`SELECT version() AS v`
    // The embedded database belongs to one process and its pool has a single connection.
    if (/PGlite/i.test(version[0]?.v ?? "")) return yield* effect
    return yield* Effect.scoped(
      Effect.gen(function* () {
        const key = yield* scopedKey(sql, migrationsLock())
        const connection = yield* sql.reserve
        yield* Effect.acquireRelease(
          connection.execute("SELECT pg_advisory_lock($1::bigint)", [key], undefined),
          () =>
            connection.execute("SELECT pg_advisory_unlock($1::bigint)", [key], undefined).pipe(Effect.ignore)
        )
        return yield* effect
      })
    )
  })

/**
 * Applies pending migrations; returns `[id, name]` of each it ran. Replicas sharing one database
 * may start together: one migrates while the others wait, then find nothing left to do.
 */
export const migrate = withMigrationsLock(
  Effect.gen(function* () {
    const above = yield* migrateAbove
    const skipped = yield* migrateSkipped
    return [...above, ...skipped]
  })
)
