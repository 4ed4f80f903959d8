/**
 * Every example in `examples/` runs green against the devnet as a newcomer runs it: `npm run
 * devnet`'s entry point as a process on free ports, then each example as its own Node process
 * pointed at that devnet's deployment.json by `DEVNET_FILE`, one after the other: in the order of
 * docs/getting-started.md, then again in reverse order on the same devnet. Each example uses
 * mnemonic accounts of its own; recipient-login moves the chain's clock an hour ahead (the bind
 * delay), and everything after it still runs: the devnet's attestor follows the chain's clock.
 */
import { spawn } from "node:child_process"
import { rm } from "node:fs/promises"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { repoRoot, type ServiceProcess, startService } from "../support/process.js"

// The order of docs/getting-started.md §3-§6.
const examples = ["relayed-claim", "creator-launch", "recipient-login", "paid-lookup"] as const

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

const dir = join(tmpdir(), `examples-devnet-${process.pid}`)
let devnet: ServiceProcess | undefined

beforeAll(async () => {
  devnet = startService("devnet", {
    DEVNET_DIR: dir,
    DEVNET_RPC_PORT: String(await freePort()),
    DEVNET_RELAYER_PORT: String(await freePort()),
    DEVNET_ATTESTOR_PORT: String(await freePort()),
    DEVNET_DOUBLES_PORT: String(await freePort()),
    DEVNET_FACILITATOR_PORT: String(await freePort()),
    DEVNET_WALLET_PORT: String(await freePort())
  })
  const deadline = Date.now() + 150_000
  while (!devnet.stdout().includes("devnet is up")) {
    if (devnet.child.exitCode !== null) throw new Error(`the devnet exited: ${devnet.stderr()}`)
    if (Date.now() > deadline) throw new Error(`the devnet did not come up: ${devnet.stdout()}`)
    await new Promise((r) => setTimeout(r, 200))
  }
}, 160_000)

afterAll(async () => {
  await devnet?.stop()
  await rm(dir, { recursive: true, force: true })
})

/** Runs `examples/<name>.ts` as a user does; its exit code and output. */
const runExample = (name: string) =>
  new Promise<{ readonly code: number | null; readonly output: string }>((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", `examples/${name}.ts`], {
      cwd: repoRoot,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, DEVNET_FILE: join(dir, "deployment.json") },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.setEncoding("utf8").on("data", (c: string) => {
      output += c
    })
    child.stderr.setEncoding("utf8").on("data", (c: string) => {
      output += c
    })
    child.once("exit", (code) => resolve({ code, output }))
  })

describe("examples/ against the devnet", () => {
  for (const [round, order] of [
    ["in the guide's order", examples],
    ["again, in reverse order", [...examples].reverse()]
  ] as const) {
    for (const name of order) {
      it(`${name} exits 0 (${round})`, { timeout: 90_000 }, async () => {
        const { code, output } = await runExample(name)
        expect(code, output).toBe(0)
        expect(output).toContain(`✔ ${name}: done`)
      })
    }
  }

  it("a missing deployment file is one clear line and exit 1", { timeout: 30_000 }, async () => {
    const child = spawn(process.execPath, ["--import", "tsx", "examples/relayed-claim.ts"], {
      cwd: repoRoot,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, DEVNET_FILE: join(dir, "missing.json") },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stderr = ""
    child.stderr.setEncoding("utf8").on("data", (c: string) => {
      stderr += c
    })
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve))
    expect(code).toBe(1)
    expect(stderr).toContain("start the devnet with `npm run devnet` first, or set DEVNET_FILE")
  })
})
