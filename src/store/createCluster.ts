/**
 * Creates the embedded database's cluster in `DATA_DIR` and exits, run as a child process by
 * `embeddedPostgres` (src/store/sql.ts) on a service's first start:
 *
 *   node dist/services/createCluster.js <dataDir>      (tsx src/store/createCluster.ts from source)
 *
 * Creating a cluster (initdb inside PGlite) grows the WASM heap by several hundred megabytes, and
 * a process keeps that memory after the instance closes; in a process of its own it is returned
 * when the process exits, and the service opens the created cluster at its steady-state size.
 */
import { createCluster } from "./embeddedCluster.js"

const dataDir = process.argv[2]
if (dataDir === undefined) {
  process.stderr.write("usage: node createCluster.js <dataDir>\n")
  process.exit(2)
}
await createCluster(dataDir)
