/**
 * `npm run relayer` as an operator runs it: a deployment file and an RPC URL are enough to serve
 * health (with the hot key's state) and the OpenAPI document; a missing RPC URL stops start-up with one line naming it.
 */
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

// Each test starts a Node process with an embedded database: slow on a busy machine.
const PROCESS_TIMEOUT = 180_000

import { type AnvilInstance, spawnAnvil } from "../../src/chain/anvil.js"
import { type ServiceProcess, startService } from "../support/process.js"

const dir = mkdtempSync(join(tmpdir(), "relayer-process-"))
const deploymentFile = join(dir, "deployment.json")
writeFileSync(
  deploymentFile,
  JSON.stringify({
    chainId: 31337,
    vault: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
    settlementAsset: "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512",
    shieldAdapter: "0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0",
    swapRouter: "0xCf7Ed3AccA5a467e9e704C703E8D87F634fB0Fc9",
    startBlock: 0,
    quotedFullBalance: true,
    assets: {}
  })
)

/** Anvil's mnemonic account #1, the devnet's relayer hot key. */
const HOT_KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"
const HOT_KEY_ADDRESS = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"

let anvil: AnvilInstance
const running: Array<ServiceProcess> = []

beforeAll(async () => {
  anvil = await spawnAnvil()
})
afterAll(async () => {
  await Promise.all(running.map((p) => p.stop()))
  await anvil?.stop()
})

describe("relayer process", () => {
  it("stops with one line naming RPC_URL when it is missing", { timeout: PROCESS_TIMEOUT }, async () => {
    const service = startService("relayer", {
      DEPLOYMENT_FILE: deploymentFile,
      RELAYER_PRIVATE_KEY: HOT_KEY,
      DATA_DIR: join(dir, "a")
    })
    running.push(service)
    expect(await service.exited).toBe(1)
    const lines = service.stderr().trim().split("\n")
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/^relayer: invalid settings: RPC_URL: /)
  })

  it("serves health from the RPC and its OpenAPI document", { timeout: PROCESS_TIMEOUT }, async () => {
    const service = startService("relayer", {
      RPC_URL: anvil.rpcUrl,
      RELAYER_PRIVATE_KEY: HOT_KEY,
      DEPLOYMENT_FILE: deploymentFile,
      DATA_DIR: join(dir, "b"),
      PORT: "0"
    })
    running.push(service)
    const base = await service.url()
    await fetch(anvil.rpcUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "anvil_mine", params: ["0x3"] })
    })
    const health = await fetch(`${base}/v1/health`)
    expect(health.status).toBe(200)
    const body = (await health.json()) as { sender?: Record<string, unknown> }
    expect(body).toMatchObject({ ok: true, chainId: 31337, block: 3 })
    // The hot key's own state and nothing else: anvil's account #1 with its 10000 ETH, unused.
    expect(body.sender).toEqual({
      address: HOT_KEY_ADDRESS,
      pending: 0,
      nextNonce: "0",
      balance: (10_000n * 10n ** 18n).toString()
    })
    const openapi = await fetch(`${base}/v1/openapi.json`)
    expect(openapi.status).toBe(200)
    const spec = (await openapi.json()) as { paths: Record<string, unknown> }
    // Every endpoint of docs/relayer.md §4 is served and documented.
    expect(Object.keys(spec.paths).sort()).toEqual(
      [
        "/v1/health",
        "/v1/metrics",
        "/v1/config",
        "/v1/quote",
        "/v1/claim",
        "/v1/consolidate",
        "/v1/shield-templates",
        "/v1/rotate-owner",
        "/v1/ping",
        "/v1/cancel-bind",
        "/v1/propose-bind",
        "/v1/finalize-bind",
        "/v1/tx-status",
        "/v1/accounts"
      ].sort()
    )
    // The defaults leave a gas cap above the fee margin and open claims on the public mempool: said once at start-up.
    const warnings = service
      .stdout()
      .split("\n")
      .filter((line) => line.includes("level=WARN"))
    expect(
      warnings.filter((line) => line.includes("GAS_CAP_BPS (20000) is above FEE_MARGIN_BPS (13000)"))
    ).toHaveLength(1)
    expect(
      warnings.filter((line) => line.includes("open claims (claim.relayer = 0x0) go out through RPC_URL"))
    ).toHaveLength(1)
    expect(await service.stop()).toBe(0)
  })

  it("stops with one line when OPEN_CLAIMS=private-only has no SEND_RPC_URL", {
    timeout: PROCESS_TIMEOUT
  }, async () => {
    const service = startService("relayer", {
      RPC_URL: anvil.rpcUrl,
      RELAYER_PRIVATE_KEY: HOT_KEY,
      DEPLOYMENT_FILE: deploymentFile,
      DATA_DIR: join(dir, "private-only"),
      OPEN_CLAIMS: "private-only"
    })
    running.push(service)
    expect(await service.exited).toBe(1)
    const lines = service.stderr().trim().split("\n")
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/^relayer: invalid settings: OPEN_CLAIMS: private-only needs SEND_RPC_URL/)
  })

  it("answers 503 unavailable while the RPC is down", { timeout: PROCESS_TIMEOUT }, async () => {
    const service = startService("relayer", {
      RPC_URL: "http://127.0.0.1:1",
      RELAYER_PRIVATE_KEY: HOT_KEY,
      RPC_TIMEOUT_MS: "500",
      DEPLOYMENT_FILE: deploymentFile,
      DATA_DIR: join(dir, "c"),
      PORT: "0"
    })
    running.push(service)
    const base = await service.url()
    const health = await fetch(`${base}/v1/health`)
    expect(health.status).toBe(503)
    expect(await health.json()).toMatchObject({ code: "unavailable" })
  })
})
