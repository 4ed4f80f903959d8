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
