/**
 * `npm run bench`: every benchmark in turn, each in its own process (so one's memory and JIT state
 * never colour the next), then the table of bench/results.json.
 *
 * BENCH_ONLY=quote,commitment,claim,idle,indexer,soak runs a subset; the soak (five minutes of
 * faults, PostgreSQL required) runs only when named there. With DATABASE_URL set, the relayers of
 * the quote and claim benches run on it (BENCH_DATABASE_URL, bench/lib/devnet.ts). A bench that
 * fails is reported and the others still run; the exit code says whether all passed.
 */
import { spawn } from "node:child_process"
import { join } from "node:path"
import { ensureBuild } from "./lib/build.js"
import { ROOT } from "./lib/processes.js"
import { printTable } from "./lib/results.js"

const BENCHES = {
  quote: "bench/relayer/quote.ts",
  commitment: "bench/attestor/commitment.ts",
  claim: "bench/relayer/claim.ts",
  idle: "bench/memory/idle.ts",
  indexer: "bench/indexer/main.ts",
  soak: "bench/soak.ts"
} as const

/** Run only when BENCH_ONLY names them: the soak takes five minutes more and needs PostgreSQL. */
const OPT_IN: ReadonlySet<string> = new Set(["soak"])

/**
 * With DATABASE_URL (and no BENCH_DATABASE_URL), the relayers of the HTTP and claim benches run on
 * PostgreSQL, as a deployment at these rates would; the idle bench keeps the embedded database.
 */
const benchDatabase =
  process.env.BENCH_DATABASE_URL === undefined && process.env.DATABASE_URL !== undefined
    ? { BENCH_DATABASE_URL: process.env.DATABASE_URL }
    : {}

// The bundled services every bench runs, built once here instead of checked again by each bench.
ensureBuild()

const only = process.env.BENCH_ONLY?.split(",").map((s) => s.trim())
const selected = Object.entries(BENCHES).filter(([name]) =>
  only === undefined ? !OPT_IN.has(name) : only.includes(name)
)
const failed: string[] = []
const started = performance.now()
for (const [name, script] of selected) {
  console.log(`\n=== ${name} (${script})`)
  const t = performance.now()
  const code = await new Promise<number | null>((resolve) =>
    spawn(process.execPath, ["--import", "tsx", join(ROOT, script)], {
      cwd: ROOT,
      stdio: "inherit",
      env: { ...process.env, ...benchDatabase, BENCH_BUILT: "1" }
    }).on("exit", resolve)
  )
  console.log(
    `=== ${name}: ${code === 0 ? "done" : `failed (${code})`} in ${((performance.now() - t) / 1000).toFixed(0)} s`
  )
  if (code !== 0) failed.push(name)
}
console.log(`\nbench/results.json after ${((performance.now() - started) / 60_000).toFixed(1)} min:`)
printTable()
if (failed.length > 0) {
  console.log(`failed: ${failed.join(", ")}`)
  process.exitCode = 1
}
