/**
 * The project compiled to plain JavaScript (bench/.build), to tell the services' own memory from
 * what the tsx loader adds when they run from source (`npm run relayer` does).
 */
import { execFileSync } from "node:child_process"
import { join } from "node:path"
import { ROOT } from "./processes.js"

export const BUILD_DIR = join(ROOT, "bench", ".build")

let built = false

/** Compiles everything tsconfig.json includes into bench/.build (incremental, so a rebuild is quick). */
export const ensureBuild = () => {
  // `npm run bench` builds once and says so to each bench it starts (bench/run.ts).
  if (built || process.env.BENCH_BUILT === "1") return BUILD_DIR
  execFileSync(
    process.execPath,
    [
      join(ROOT, "node_modules", "typescript", "bin", "tsc"),
      "-p",
      join(ROOT, "tsconfig.json"),
      "--noEmit",
      "false",
      "--outDir",
      BUILD_DIR,
      "--incremental",
      "--tsBuildInfoFile",
      join(BUILD_DIR, ".tsbuildinfo"),
      "--sourceMap",
      "false"
    ],
    { cwd: ROOT, stdio: "inherit" }
  )
  built = true
  return BUILD_DIR
}

/** The compiled counterpart of a source script (`src/bin/relayer.ts` → `bench/.build/src/bin/relayer.js`). */
export const compiled = (script: string) => join("bench", ".build", script.replace(/\.ts$/, ".js"))
