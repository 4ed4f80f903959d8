/**
 * The embedded database's settings and the creation of its cluster, shared by the service
 * (src/store/sql.ts) and the child process that creates the cluster on a first start
 * (src/store/createCluster.ts).
 */
import { PGlite } from "@electric-sql/pglite"

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

/** PGlite's options for every instance over a service's data directory. */
export const embeddedOptions = () => ({ postgresqlconf: [...EMBEDDED_POSTGRESQL_CONF] })

/** Creates the cluster in `dataDir` (initdb) and closes the instance that created it. */
export const createCluster = async (dataDir: string): Promise<void> =>
  (await PGlite.create(dataDir, embeddedOptions())).close()
