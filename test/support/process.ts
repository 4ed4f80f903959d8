/**
 * Runs a service entry point as its own Node process, the way an operator does, and waits for
 * the address it logs.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { SERVICE_ALLOCATOR_ENV, SERVICE_NODE_FLAGS } from "../../src/bin/processTuning.js"

export const repoRoot = fileURLToPath(new URL("../../", import.meta.url))

export interface ServiceProcess {
  readonly child: ChildProcess
  readonly stdout: () => string
  readonly stderr: () => string
  readonly exited: Promise<number | null>
  /** The URL from the "Listening on" log line. */
  readonly url: () => Promise<string>
  readonly stop: () => Promise<number | null>
}

/**
 * The environment a service sees: nothing of the test runner's database or chain settings, and no
 * settings file (a checkout's `.env` is the developer's).
 */
const baseEnv = (): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    LOG_LEVEL: process.env.TEST_LOG ?? "info",
    ENV_FILE: "none"
  }
  return env
}

/**
 * `entry` from its TypeScript source under tsx, as `npm run relayer` runs it; or, with `bundle`, the
 * JavaScript bundle at that path under plain node, as the image runs `dist/services/<entry>.js`.
 */
export const startService = (
  entry: "relayer" | "attestor" | "devnet",
  env: Record<string, string>,
  options: { readonly bundle?: string } = {}
): ServiceProcess => {
  // A service runs tuned as the devnet and the image run it; the devnet tunes its own services.
  const service = entry !== "devnet"
  const flags = service ? SERVICE_NODE_FLAGS : []
  const tuning = service ? SERVICE_ALLOCATOR_ENV : {}
  const script = options.bundle === undefined ? ["--import", "tsx", `src/bin/${entry}.ts`] : [options.bundle]
  const child = spawn(process.execPath, [...flags, ...script], {
    cwd: repoRoot,
    env: { ...baseEnv(), ...tuning, ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let out = ""
  let err = ""
  child.stdout?.setEncoding("utf8").on("data", (c: string) => {
    out += c
  })
  child.stderr?.setEncoding("utf8").on("data", (c: string) => {
    err += c
  })
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  const url = async () => {
    const deadline = Date.now() + 170_000
    while (Date.now() < deadline) {
      const match = out.match(/Listening on (http:\/\/[0-9.:]+)/)
      if (match?.[1]) return match[1]
      if (child.exitCode !== null) throw new Error(`${entry} exited with ${child.exitCode}: ${err}`)
      await new Promise((r) => setTimeout(r, 100))
    }
    throw new Error(`${entry} did not start: ${out} ${err}`)
  }
  const stop = async () => {
    if (child.exitCode === null) child.kill("SIGTERM")
    return exited
  }
  return { child, stdout: () => out, stderr: () => err, exited, url, stop }
}
