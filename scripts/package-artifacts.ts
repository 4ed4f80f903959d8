/**
 * Writes the reference contracts' artifacts (ABI and bytecode) beside the compiled
 * contracts/build.js, where `loadArtifacts` reads them when no sources are there: the devnet of
 * `fee-vault-services/testing` deploys them from an installed package. `npm run build` runs it
 * after tsc.
 *
 *   tsx scripts/package-artifacts.ts [dist/contracts/artifacts.json]
 */
import { mkdir, writeFile } from "node:fs/promises"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { loadArtifacts } from "../contracts/build.js"

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..")
const file = process.argv[2] ?? join(ROOT, "dist", "contracts", "artifacts.json")
await mkdir(dirname(file), { recursive: true })
await writeFile(file, JSON.stringify(await loadArtifacts()))
