/**
 * The servers the benches run as operators run the services: bundled by scripts/bundle.ts, as
 * `npm run build` bundles them into dist/services, here into bench/.build with the baseline
 * servers bundled the same way. Under tsx on the source instead (`npm run relayer`, the devnet),
 * the loader's own memory and CPU are added.
 */
import { execFileSync } from "node:child_process"
import { join } from "node:path"
import { ROOT } from "./processes.js"

export const BUILD_DIR = join(ROOT, "bench", ".build")

/** Each bundled server by the source it is built from. */
const BUNDLED: Readonly<Record<string, string>> = {
  "src/bin/relayer.ts": "relayer",
  "src/bin/attestor.ts": "attestor",
  "bench/baselines/bare.ts": "bare",
  "bench/baselines/raw.ts": "raw"
}

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
      ...Object.entries(BUNDLED)
        .filter(([source]) => source.startsWith("bench/"))
        .map(([source, name]) => `${name}=${source}`)
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
