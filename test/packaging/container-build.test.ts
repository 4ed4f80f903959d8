/**
 * No container runtime runs here, so the Dockerfile's steps are carried out by
 * scripts/check-container-build.sh: the build stage's npm ci, build and prune, the runtime stage's
 * copies, and the compiled relayer and attestor started as the image starts them until the image's
 * HEALTHCHECK passes, then stopped.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { repoRoot } from "../support/process.js"

// npm ci and tsc in a fresh directory, then two services starting: minutes on a busy machine.
const SCRIPT_TIMEOUT = 420_000

let script: ChildProcess | undefined

afterAll(() => {
  // A test that timed out leaves the script running: end its whole process group (npm, tsc,
  // anvil, the services); its own exit trap then removes its directory.
  if (script?.pid !== undefined && script.exitCode === null && script.signalCode === null) {
    try {
      process.kill(-script.pid, "SIGTERM")
    } catch {
      // Gone already.
    }
  }
})

const runScript = (): Promise<{ code: number | null; output: string }> =>
  new Promise((resolve, reject) => {
    const child = spawn("bash", [join(repoRoot, "scripts/check-container-build.sh")], {
      cwd: repoRoot,
      // Nothing of the test runner's settings (database, chain, npm's own variables).
      env: { PATH: process.env.PATH, HOME: process.env.HOME, TMPDIR: process.env.TMPDIR ?? "/tmp" },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true
    })
    script = child
    let output = ""
    const collect = (chunk: string) => {
      output += chunk
    }
    child.stdout.setEncoding("utf8").on("data", collect)
    child.stderr.setEncoding("utf8").on("data", collect)
    child.once("error", reject)
    child.once("close", (code) => resolve({ code, output }))
  })

describe("container image steps", () => {
  it("build the services, keep production dependencies only and serve /v1/health from dist/", {
    timeout: SCRIPT_TIMEOUT
  }, async () => {
    const { code, output } = await runScript()
    expect(code, output).toBe(0)
    for (const service of ["relayer", "attestor"]) {
      expect(output).toContain(`${service}: HEALTHCHECK passed (/v1/health 200)`)
      expect(output).toContain(`${service}: stopped cleanly on SIGTERM`)
    }
  })
})
