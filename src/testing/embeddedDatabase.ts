/**
 * A database for tests that need one and no server: PGlite in memory (or under `dataDir`), served
 * to the same `@effect/sql-pg` client the services use, with every migration applied, closed when
 * the layer's scope closes (src/store/sql.ts).
 */
import { Option } from "effect"
import { storageLayer } from "../store/sql.js"

export interface EmbeddedDatabaseOptions {
  /** Where the cluster lives; by default in memory, gone with the layer. */
  readonly dataDir?: string
}

/** The `SqlClient` (and `PgClient`) of a fresh embedded database, migrated. */
export const embeddedDatabase = (options: EmbeddedDatabaseOptions = {}) =>
  storageLayer({
    databaseUrl: Option.none(),
    dataDir: options.dataDir ?? "memory://",
    applicationName: "test"
  })
