/**
 * Every example in `examples/` runs green against the devnet as a newcomer runs it: `npm run
 * devnet`'s entry point as a process on free ports, then each example as its own Node process
 * pointed at that devnet's deployment.json by `DEVNET_FILE`, one after the other: in the order of
 * docs/getting-started.md, then again in reverse order on the same devnet. Each example uses
 * mnemonic accounts of its own; recipient-login moves the chain's clock an hour ahead (the bind
 * delay), and everything after it still runs: the devnet's attestor follows the chain's clock.
 *
 * Then a committee devnet in-process (docs/protocol.md §9 "A committee devnet"; `Devnet.layer`,
 * 3 members at threshold 2): creator-launch seals to every member and recipient-login binds with
 * the members' signatures, then again with member 3 stopped, named as down, members 1 and 2
 * signing. The two devnets do not run at once.
 */
import { spawn } from "node:child_process"
import { rm } from "node:fs/promises"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { ManagedRuntime } from "effect"
import { createPublicClient, type Hex, http } from "viem"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { feeVaultAbi } from "../../contracts/abi.js"
import { Devnet, type RunningDevnet } from "../../layers/devnet.js"
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

/** Runs `examples/<name>.ts` as a user does, against the deployment file `file`; its exit code and output. */
const runExample = (name: string, file = join(dir, "deployment.json")) =>
  new Promise<{ readonly code: number | null; readonly output: string }>((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", `examples/${name}.ts`], {
      cwd: repoRoot,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, DEVNET_FILE: file },
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

/** The escrows recipient-login finalized, as it printed them: each id and the owner it expects. */
const finalizedBinds = (output: string): ReadonlyArray<{ readonly id: Hex; readonly owner: Hex }> => {
  const ids = [...output.matchAll(/POST \/v1\/finalize-bind for (0x[0-9a-f]{64})/g)].map((m) => m[1] as Hex)
  const owners = [...output.matchAll(/owner in \/v1\/accounts: (0x[0-9a-fA-F]{40})/g)].map((m) => m[1] as Hex)
  expect(owners).toHaveLength(ids.length)
  return ids.map((id, i) => ({ id, owner: owners[i] as Hex }))
}

describe("examples/ against a committee devnet (3 members, threshold 2)", () => {
  const committeeDir = join(tmpdir(), `examples-committee-${process.pid}`)
  const runtime = ManagedRuntime.make(Devnet.layer({ dir: committeeDir, attestors: 3, threshold: 2 }))
  const file = join(committeeDir, "deployment.json")
  let committee: RunningDevnet

  beforeAll(async () => {
    committee = await runtime.runPromise(Devnet)
  }, 300_000)

  afterAll(async () => {
    await runtime.dispose()
    await rm(committeeDir, { recursive: true, force: true })
  })

  /** recipient-login against the committee: exit 0, and both escrows owned on chain by their keys. */
  const recipientBinds = async () => {
    const { code, output } = await runExample("recipient-login", file)
    expect(code, output).toBe(0)
    const binds = finalizedBinds(output)
    expect(binds).toHaveLength(2)
    // The vault itself, not the example's word: each escrow's owner is the stealth key it bound.
    const chain = createPublicClient({ transport: http(committee.anvil.rpcUrl) })
    for (const { id, owner } of binds) {
      const [, onChain, , , , pendingOwner] = await chain.readContract({
        address: committee.deployment.vault,
        abi: feeVaultAbi,
        functionName: "accountOf",
        args: [id]
      })
      expect(onChain.toLowerCase()).toBe(owner.toLowerCase())
      expect(pendingOwner).toBe("0x0000000000000000000000000000000000000000")
    }
    return output
  }

  it("creator-launch seals its hint to every member", { timeout: 90_000 }, async () => {
    const { code, output } = await runExample("creator-launch", file)
    expect(code, output).toBe(0)
    expect(output).toContain("GET /v1/info of each attestor (3, threshold 2)")
    expect(output).toContain("sealed to members: 3")
  })

  it("recipient-login binds with the signatures of all three members", { timeout: 150_000 }, async () => {
    const output = await recipientBinds()
    const members = committee.running ?? []
    expect(members).toHaveLength(3)
    for (const [i, member] of members.entries())
      expect(output).toContain(`attestor ${i + 1}: ${member.url} signed`)
    expect(output).toContain("POST /v1/propose-bind on the relayer: 3 signatures")
  })

  it("recipient-login binds with members 1 and 2 while member 3 is down, and names it", {
    timeout: 150_000
  }, async () => {
    const [first, second, third] = committee.running ?? []
    if (first === undefined || second === undefined || third === undefined) throw new Error("not 3 members")
    await runtime.runPromise(third.stop)
    const output = await recipientBinds()
    // Named at GET /v1/info, at the microblog login's start, and in the bind's outcomes.
    expect(output).toContain(`attestor 3: ${third.url} down (no answer)`)
    expect(output).toContain(`attestor 3: ${third.url} not asked (no session there)`)
    expect(output).toContain(`attestor 1: ${first.url} signed`)
    expect(output).toContain(`attestor 2: ${second.url} signed`)
    expect(output).toContain("POST /v1/propose-bind on the relayer: 2 signatures")
  })
})
