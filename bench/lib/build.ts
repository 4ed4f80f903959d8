/**
 * The servers the benches run as operators run the services: bundled by scripts/bundle.ts, as
 * `npm run build` bundles them into dist/services, here into bench/.build with the baseline
 * servers bundled the same way. Under tsx on the source instead (`npm run relayer`, the devnet),
 * the loader's own memory and CPU are added.
 */
import { execFileSync } from "node:child_process"
import { join } from "node:path"
import { SERVICE_ENTRY_POINTS } from "../../scripts/bundle.js"
import { ROOT } from "./processes.js"

export const BUILD_DIR = join(ROOT, "bench", ".build")

/** The baseline servers, bundled beside the services' entry points. */
const BASELINES: Readonly<Record<string, string>> = {
  bare: "bench/baselines/bare.ts",
  raw: "bench/baselines/raw.ts"
}

/** Each bundle's name by the source it is built from. */
const BUNDLED: Readonly<Record<string, string>> = Object.fromEntries(
  Object.entries({ ...SERVICE_ENTRY_POINTS, ...BASELINES }).map(([name, source]) => [source, name])
)

let built = false

/** Bundles the services (and the cluster creator they spawn) and the baselines into bench/.build. */
export const ensureBuild = () => {
  // `npm run bench` builds once and says so to each bench it starts (bench/run.ts).
  if (built || process.env.BENCH_BUILT === "1") return BUILD_DIR
  execFileSync(
    process.execPath,
    [
      "--import",
      "tsx",
      join(ROOT, "scripts", "bundle.ts"),
      BUILD_DIR,
      ...Object.entries(BASELINES).map(([name, source]) => `${name}=${source}`)
    ],
    { cwd: ROOT, stdio: "inherit" }
  )
  built = true
  return BUILD_DIR
}

/** The bundle built from a source script (`src/bin/relayer.ts` → `bench/.build/relayer.js`). */
export const bundled = (script: string) => {
  const name = BUNDLED[script]
  if (name === undefined) throw new Error(`${script} is not bundled for the benches (bench/lib/build.ts)`)
  return join("bench", ".build", `${name}.js`)
}
