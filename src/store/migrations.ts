/**
 * Schema migrations, one dialect for PostgreSQL and PGlite. The event store is append-only by
 * design (ARCHITECTURE.md, "State changes enter through the event store"): events, orphan markers,
 * ranges and nonce reconciliations are never updated or deleted; block headers, which only serve
 * reorg detection, are pruned below the finality horizon.
 */
import * as Migrator from "@effect/sql/Migrator"
import m0001_event_store from "./migrations/0001_event_store.js"
import m0002_indexer_progress from "./migrations/0002_indexer_progress.js"
import m0010_tx_sender from "./migrations/0010_tx_sender.js"
import m0011_tx_confirmations from "./migrations/0011_tx_confirmations.js"
import m0020_attestor_sessions from "./migrations/0020_attestor_sessions.js"
import m0021_attestor_attestations from "./migrations/0021_attestor_attestations.js"
import m0022_attestor_bind_proposals from "./migrations/0022_attestor_bind_proposals.js"

/** Every migration, by `<id>_<name>`; a module adds its tables with a new file and one line here. */
export const migrations = {
  "0001_event_store": m0001_event_store,
  "0002_indexer_progress": m0002_indexer_progress,
  "0010_tx_sender": m0010_tx_sender,
  "0011_tx_confirmations": m0011_tx_confirmations,
  "0020_attestor_sessions": m0020_attestor_sessions,
  "0021_attestor_attestations": m0021_attestor_attestations,
  "0022_attestor_bind_proposals": m0022_attestor_bind_proposals
} as const

/**
 * Applies pending migrations. Replicas sharing one database may start together: the migrator
 * holds an exclusive lock on its table while it runs, so the others wait and then find nothing
 * left to do.
 */
export const migrate = Migrator.make({})({
  loader: Migrator.fromRecord(migrations),
  table: "schema_migrations"
})
