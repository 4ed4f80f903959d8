/**
 * Schema migrations, one dialect for PostgreSQL and PGlite. Tables are append-only by design:
 * the event store never updates or deletes a row (ARCHITECTURE.md, "State changes enter through
 * the event store").
 */
import * as Migrator from "@effect/sql/Migrator"
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect, Schedule } from "effect"

const m0001_event_store = Effect.gen(function* () {
  const sql = yield* SqlClient
  // Decoded vault logs. Amounts inside `args` are exact decimal strings.
  yield* sql`
    CREATE TABLE vault_events (
      chain_id     integer     NOT NULL,
      vault        text        NOT NULL,
      block_number bigint      NOT NULL,
      block_hash   text        NOT NULL,
      log_index    integer     NOT NULL,
      tx_hash      text        NOT NULL,
      event_name   text        NOT NULL,
      args         jsonb       NOT NULL,
      appended_at  timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (chain_id, block_hash, log_index)
    )`
  yield* sql`CREATE INDEX vault_events_by_block ON vault_events (chain_id, vault, block_number, log_index)`
  // Headers of the unfinalized range, to detect reorgs by parent hash.
  yield* sql`
    CREATE TABLE block_headers (
      chain_id    integer     NOT NULL,
      number      bigint      NOT NULL,
      hash        text        NOT NULL,
      parent_hash text        NOT NULL,
      seen_at     timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (chain_id, hash)
    )`
  // A reorg appends here instead of deleting events: readers skip events of orphaned blocks.
  yield* sql`
    CREATE TABLE orphaned_blocks (
      chain_id    integer     NOT NULL,
      hash        text        NOT NULL,
      orphaned_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (chain_id, hash)
    )`
})

export const migrations = {
  "0001_event_store": m0001_event_store
} as const

const runMigrations = Migrator.make({})({
  loader: Migrator.fromRecord(migrations),
  table: "schema_migrations"
})

/**
 * Applies pending migrations. Replicas sharing one database may start together: the migrator
 * refuses a concurrent run ("locked"), so the loser waits and tries again, finding nothing to do.
 */
export const migrate = runMigrations.pipe(
  Effect.retry({
    while: (e) => e._tag === "MigrationError" && e.reason === "locked",
    schedule: Schedule.spaced("200 millis"),
    times: 50
  })
)
