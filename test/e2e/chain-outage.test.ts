/**
 * Both services as operators run them (`npm run relayer`, `npm run attestor`), with the chain
 * going away under them:
 *
 * - stale data: behind an RPC proxy that stops answering, the relayer's `/v1/accounts` turns 503
 *   `unavailable` once its indexer's step failed and is 200 again when the RPC answers; the
 *   attestor's health says the chain is unreachable and gives no lag (never `lag: 0`);
 * - secrets in logs: with an RPC URL holding a key in its path, on a dead host and on a live RPC
 *   that dies, no line of either service's output names the key, and the failures are reported;
 *   on the dead host, each service says once that the chain does not answer at RPC_URL.
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { zeroAddress } from "viem"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { attestorEnv, relayerEnv, writeDevnetFile } from "../../layers/devnet.js"
import { closedPort, type RpcProxy, startRpcProxy } from "../chain/rpcProxy.js"
import { type ServiceProcess, startService } from "../support/process.js"
import { VaultDevnet } from "./support/relayerDevnet.js"

// Node processes with embedded databases: slow on a busy machine.
const TIMEOUT = 240_000
const SECRET = "SECRETKEY123abc"
const SECRET_PATH = `/v3/${SECRET}`

const dir = mkdtempSync(join(tmpdir(), "chain-outage-"))
const running: Array<ServiceProcess> = []
let net: VaultDevnet
let proxy: RpcProxy

beforeAll(async () => {
  net = await VaultDevnet.start("chain-outage")
  // The deployment file the services read (their own URLs in it are not used here).
  await Effect.runPromise(
    writeDevnetFile(net.chain, { relayerUrl: "http://127.0.0.1:1", attestorUrl: "http://127.0.0.1:1" })
  )
  proxy = await startRpcProxy(net.rpcUrl)
}, TIMEOUT)
afterAll(async () => {
  await Promise.all(running.map((p) => p.stop()))
  await proxy?.close()
  await net?.dispose()
})

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Polls `check` every 100 ms until it holds; false when `ms` pass first. */
const eventually = async (check: () => Promise<boolean>, ms: number): Promise<boolean> => {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return true
    await sleep(100)
  }
  return false
}

const get = async (url: string): Promise<{ status: number; body: Record<string, unknown> }> => {
  const res = await fetch(url)
  const text = await res.text()
  return { status: res.status, body: text === "" ? {} : (JSON.parse(text) as Record<string, unknown>) }
}

/** Both services' settings for `rpcUrl`; debug logs, so that everything that can be said is. */
const common = (rpcUrl: string): Record<string, string> => ({
  RPC_URL: rpcUrl,
  RPC_TIMEOUT_MS: "500",
  INDEXER_POLL_INTERVAL_MS: "200",
  GAS_PRICE_REFRESH_MS: "200",
  LOG_LEVEL: "debug",
  PORT: "0"
})

const start = (entry: "relayer" | "attestor", env: Record<string, string>): ServiceProcess => {
  const service = startService(entry, env)
  running.push(service)
  return service
}

const output = (service: ServiceProcess) => `${service.stdout()}\n${service.stderr()}`

const expectNoSecret = (service: ServiceProcess) => {
  const text = output(service)
  expect(text).not.toContain(SECRET)
  expect(text).not.toContain(SECRET_PATH)
}

/** Quote, health and accounts, as a client would ask them during an outage. */
const exercise = async (relayer: string, attestor: string) => {
  const quote = `${relayer}/v1/quote?asset=${net.settlementAsset}&adapter=${zeroAddress}`
  for (let i = 0; i < 3; i++) {
    for (const url of [quote, `${relayer}/v1/health`, `${relayer}/v1/accounts`, `${attestor}/v1/health`])
      await fetch(url).then((res) => res.arrayBuffer())
    await fetch(`${attestor}/v1/escrows`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ session: "unknown-session-token-0000" })
    }).then((res) => res.arrayBuffer())
    await sleep(300)
  }
}

describe("a live RPC behind a proxy on a secret path", () => {
  let relayer: ServiceProcess
  let attestor: ServiceProcess
  let relayerUrl = ""
  let attestorUrl = ""

  beforeAll(async () => {
    const rpcUrl = `${proxy.url}${SECRET_PATH}`
    relayer = start("relayer", {
      ...relayerEnv(net.chain, 0),
      ...common(rpcUrl),
      DATA_DIR: join(dir, "relayer")
    })
    attestor = start("attestor", {
      ...attestorEnv(net.chain, 0),
      ...common(rpcUrl),
      DATA_DIR: join(dir, "attestor")
    })
    relayerUrl = await relayer.url()
    attestorUrl = await attestor.url()
    const ready = await eventually(
      async () =>
        (await get(`${relayerUrl}/v1/accounts`)).status === 200 &&
        ((await get(`${attestorUrl}/v1/health`)).body.indexer as { state?: string } | undefined)?.state ===
          "following",
      120_000
    )
    expect(ready).toBe(true)
  }, TIMEOUT)

  it("serves /v1/accounts and a reachable chain while the RPC answers", { timeout: TIMEOUT }, async () => {
    expect((await get(`${relayerUrl}/v1/accounts`)).status).toBe(200)
    const health = await get(`${attestorUrl}/v1/health`)
    expect(health.body).toMatchObject({ ok: true, chain: "reachable", indexer: { state: "following" } })
  })

  it("is 503 unavailable with the RPC down, and 200 again once it answers", {
    timeout: TIMEOUT
  }, async () => {
    proxy.setRule(() => ({ kind: "destroy" }))
    // The indexer's next step fails within a poll or two; from then on the index is stale.
    const refused = await eventually(
      async () => (await get(`${relayerUrl}/v1/accounts`)).status === 503,
      30_000
    )
    expect(refused).toBe(true)
    const accounts = await get(`${relayerUrl}/v1/accounts`)
    expect(accounts).toMatchObject({ status: 503, body: { code: "unavailable" } })

    // The relayer's health needs the chain's head (spec body): 503 unavailable, saying why.
    const relayerHealth = await get(`${relayerUrl}/v1/health`)
    expect(relayerHealth.status).toBe(503)
    expect(relayerHealth.body).toMatchObject({ code: "unavailable" })
    expect(String(relayerHealth.body.error)).toMatch(/chain/)

    // The attestor still serves (commitments and logins need no chain) and says what is wrong.
    const unreachable = await eventually(
      async () => (await get(`${attestorUrl}/v1/health`)).body.chain === "unreachable",
      30_000
    )
    expect(unreachable).toBe(true)
    const attestorHealth = (await get(`${attestorUrl}/v1/health`)).body
    expect(attestorHealth).toMatchObject({ ok: true, chain: "unreachable", indexer: { state: "retrying" } })
    expect(attestorHealth.indexer).not.toHaveProperty("lag")

    proxy.reset()
    const back = await eventually(async () => (await get(`${relayerUrl}/v1/accounts`)).status === 200, 30_000)
    expect(back).toBe(true)
    const recovered = await eventually(
      async () => (await get(`${attestorUrl}/v1/health`)).body.chain === "reachable",
      30_000
    )
    expect(recovered).toBe(true)
  })

  it("never logs the RPC URL's key when the RPC dies", { timeout: TIMEOUT }, async () => {
    await proxy.close()
    const failed = await eventually(
      async () =>
        output(relayer).includes("gas price refresh failed") &&
        output(relayer).includes("indexer failed; restarting") &&
        output(attestor).includes("indexer failed; restarting"),
      60_000
    )
    await exercise(relayerUrl, attestorUrl)
    expect(failed).toBe(true)
    expectNoSecret(relayer)
    expectNoSecret(attestor)
  })
})

describe("an RPC URL with a key in its path on a dead host", () => {
  it("reports the failures and never logs the key", { timeout: TIMEOUT }, async () => {
    const rpcUrl = `http://127.0.0.1:${await closedPort()}${SECRET_PATH}`
    const relayer = start("relayer", {
      ...relayerEnv(net.chain, 0),
      ...common(rpcUrl),
      DATA_DIR: join(dir, "dead-relayer")
    })
    const attestor = start("attestor", {
      ...attestorEnv(net.chain, 0),
      ...common(rpcUrl),
      DATA_DIR: join(dir, "dead-attestor")
    })
    const [relayerUrl, attestorUrl] = await Promise.all([relayer.url(), attestor.url()])
    await exercise(relayerUrl, attestorUrl)
    const reported = await eventually(
      async () =>
        output(relayer).includes("gas price refresh failed") &&
        output(relayer).includes("indexer failed; restarting") &&
        output(attestor).includes("indexer failed; restarting") &&
        output(relayer).includes("the chain does not answer at RPC_URL") &&
        output(attestor).includes("the chain does not answer at RPC_URL"),
      60_000
    )
    expect(reported).toBe(true)
    // What was reported names the failure's class, not the node's or the library's text: no
    // answer, or, once the client's circuit is open (the indexer's failures may open it first),
    // the circuit.
    expect(output(relayer)).toMatch(/failure="?ChainUnavailable: eth_gasPrice: (no answer|circuit open)/)
    expectNoSecret(relayer)
    expectNoSecret(attestor)
  })
})
