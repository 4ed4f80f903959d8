/**
 * `npm run attestor` as an operator runs it: a handle-lookup mode it cannot serve (paid without a
 * facilitator, free on chain id 56) stops start-up with one line naming the setting, and so does a
 * facilitator whose `/supported` does not list `HANDLE_LOOKUP_TRANSFER_METHOD`; with the default it
 * serves /v1/info, a commitment and an OpenAPI document listing every endpoint it has.
 */
import { mkdtempSync, writeFileSync } from "node:fs"
import { createServer as createHttpServer, type Server } from "node:http"
import { type AddressInfo, createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { type ServiceProcess, startService } from "../support/process.js"

// Each test starts a Node process with an embedded database: slow on a busy machine.
const PROCESS_TIMEOUT = 180_000

const VAULT = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
const dir = mkdtempSync(join(tmpdir(), "attestor-process-"))
const deploymentFile = join(dir, "deployment.json")
writeFileSync(
  deploymentFile,
  JSON.stringify({
    chainId: 31337,
    vault: VAULT,
    settlementAsset: "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512",
    shieldAdapter: "0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0",
    swapRouter: "0xCf7Ed3AccA5a467e9e704C703E8D87F634fB0Fc9",
    startBlock: 0,
    quotedFullBalance: true,
    assets: {}
  })
)

/** Anvil's mnemonic account #2, the devnet's attestor. */
const ATTESTOR_KEY = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a"
const ATTESTOR_ADDRESS = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"

const settings = (data: string): Record<string, string> => ({
  // Nothing here needs the chain: the chain id comes from the deployment file.
  RPC_URL: "http://127.0.0.1:1",
  DEPLOYMENT_FILE: deploymentFile,
  ATTESTOR_PRIVATE_KEY: ATTESTOR_KEY,
  HINT_PRIVATE_KEY: `0x${"22".repeat(32)}`,
  PEPPER: `0x${"33".repeat(32)}`,
  DATA_DIR: join(dir, data),
  PORT: "0"
})

const running: Array<ServiceProcess> = []
const servers: Array<Server> = []
afterAll(async () => {
  await Promise.all(running.map((p) => p.stop()))
  for (const server of servers) server.close()
})

/** A facilitator on a loopback port whose `GET /supported` lists `kinds`; anything else is 404. */
const facilitatorListing = async (kinds: ReadonlyArray<Record<string, unknown>>): Promise<string> => {
  const server = createHttpServer((req, res) => {
    req.resume()
    const body = req.url === "/supported" ? JSON.stringify({ kinds, extensions: [], signers: {} }) : "{}"
    res.writeHead(req.url === "/supported" ? 200 : 404, { "content-type": "application/json" })
    res.end(body)
  })
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

const permit2ExactKind = {
  x402Version: 2,
  scheme: "exact",
  network: "eip155:31337",
  extra: {
    assetTransferMethod: "permit2-exact",
    signerAddress: ATTESTOR_ADDRESS,
    spenderAddress: "0x402085c248EeA27D92E8b30b2C58ed07f9E20001"
  }
}
/** As `@x402/evm`'s facilitator lists its exact scheme: no extra. */
const libraryKind = { x402Version: 2, scheme: "exact", network: "eip155:31337" }

/** Paid lookups at `facilitatorUrl`; the asset's decimals and symbol set (the deployment lists none). */
const paid = (facilitatorUrl: string): Record<string, string> => ({
  HANDLE_LOOKUP_MODE: "paid",
  FACILITATOR_URL: facilitatorUrl,
  HANDLE_LOOKUP_PRICE: "10000",
  HANDLE_LOOKUP_PAY_TO: ATTESTOR_ADDRESS,
  HANDLE_LOOKUP_ASSET_DECIMALS: "6",
  HANDLE_LOOKUP_ASSET_SYMBOL: "USDT"
})

describe("attestor process", () => {
  it.each([
    ["paid", {}, /^attestor: invalid settings: FACILITATOR_URL: /],
    [
      "free",
      { CHAIN_ID: "56" },
      /^attestor: invalid settings: HANDLE_LOOKUP_MODE: free handle lookups .* refused on chain id 56/
    ]
  ] as const)(
    "stops with one line naming what HANDLE_LOOKUP_MODE=%s is missing or why it cannot be served",
    { timeout: PROCESS_TIMEOUT },
    async (mode, extra, line) => {
      const service = startService("attestor", {
        ...settings(`refused-${mode}`),
        ...extra,
        HANDLE_LOOKUP_MODE: mode
      })
      running.push(service)
      expect(await service.exited).toBe(1)
      const lines = service.stderr().trim().split("\n")
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatch(line)
    }
  )

  const PEPPER_OK = `0x${"33".repeat(32)}`
  it.each([
    ["PEPPER missing", { PEPPER: undefined }, /^attestor: invalid settings: PEPPER: required, not set$/],
    [
      "PEPPER too short",
      { PEPPER: "0x1234" },
      /^attestor: invalid settings: PEPPER: must be at least 16 bytes of hex$/
    ],
    [
      "an unknown LOG_LEVEL",
      { LOG_LEVEL: "verbose" },
      /^attestor: invalid settings: LOG_LEVEL: expected one of all, trace, debug, info, warn, error, fatal, off \(got "verbose"\)$/
    ],
    [
      "an unknown HANDLE_LOOKUP_MODE",
      { HANDLE_LOOKUP_MODE: "sometimes" },
      /^attestor: invalid settings: HANDLE_LOOKUP_MODE: expected one of off, free, paid \(got "sometimes"\)$/
    ]
  ] as const)(
    "stops with one line naming the setting and the reason: %s",
    { timeout: PROCESS_TIMEOUT },
    async (label, extra, line) => {
      const env: Record<string, string> = {
        ...settings(`refused-${label.replace(/\W+/g, "-")}`),
        PEPPER: PEPPER_OK
      }
      for (const [name, value] of Object.entries(extra)) {
        if (value === undefined) delete env[name]
        else env[name] = value
      }
      const service = startService("attestor", env)
      running.push(service)
      expect(await service.exited).toBe(1)
      const lines = service.stderr().trim().split("\n")
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatch(line)
    }
  )

  it.each([
    [
      "permit2, the facilitator listing only permit2-exact",
      "permit2",
      [permit2ExactKind, { ...libraryKind, network: "eip155:56" }],
      "attestor: invalid settings: HANDLE_LOOKUP_TRANSFER_METHOD: the facilitator (FACILITATOR_URL) does not list x402 v2 exact permit2 payments on eip155:31337; it lists v2 exact eip155:31337 permit2-exact, v2 exact eip155:56"
    ],
    [
      "permit2-exact (the default), the facilitator listing only @x402/evm's kind",
      undefined,
      [libraryKind],
      "attestor: invalid settings: HANDLE_LOOKUP_TRANSFER_METHOD: the facilitator (FACILITATOR_URL) does not list x402 v2 exact permit2-exact payments on eip155:31337; it lists v2 exact eip155:31337"
    ],
    [
      "an unknown method",
      "eip3009",
      [libraryKind],
      'attestor: invalid settings: HANDLE_LOOKUP_TRANSFER_METHOD: expected one of permit2-exact, permit2 (got "eip3009")'
    ]
  ] as const)(
    "HANDLE_LOOKUP_TRANSFER_METHOD=%s: stops start-up with one line naming what the facilitator lists",
    { timeout: PROCESS_TIMEOUT },
    async (label, method, kinds, line) => {
      const service = startService("attestor", {
        ...settings(`method-${label.replace(/\W+/g, "-")}`),
        ...paid(await facilitatorListing(kinds)),
        ...(method === undefined ? {} : { HANDLE_LOOKUP_TRANSFER_METHOD: method })
      })
      running.push(service)
      expect(await service.exited).toBe(1)
      expect(service.stderr().trim().split("\n")).toEqual([line])
    }
  )

  it("HANDLE_LOOKUP_TRANSFER_METHOD=permit2 starts with a facilitator listing @x402/evm's kind", {
    timeout: PROCESS_TIMEOUT
  }, async () => {
    const service = startService("attestor", {
      ...settings("method-listed"),
      ...paid(await facilitatorListing([permit2ExactKind, libraryKind])),
      HANDLE_LOOKUP_TRANSFER_METHOD: "permit2"
    })
    running.push(service)
    const info = await fetch(`${await service.url()}/v1/info`)
    expect(await info.json()).toMatchObject({
      handleLookup: { mode: "paid", price: { amount: "10000", assetTransferMethod: "permit2" } }
    })
    expect(await service.stop()).toBe(0)
  })

  it("names a busy port and stops with one line", { timeout: PROCESS_TIMEOUT }, async () => {
    const blocker = createServer()
    const port = await new Promise<number>((resolve) =>
      blocker.listen(0, "127.0.0.1", () => resolve((blocker.address() as AddressInfo).port))
    )
    try {
      const service = startService("attestor", {
        ...settings("busy-port"),
        HOST: "127.0.0.1",
        PORT: String(port)
      })
      running.push(service)
      expect(await service.exited).toBe(1)
      const lines = service.stderr().trim().split("\n")
      expect(lines).toEqual([
        `attestor: failed to start: port 127.0.0.1:${port} is already in use (PORT, HOST): stop whatever listens there or choose another port`
      ])
    } finally {
      blocker.close()
    }
  })

  it("serves /v1/info, a commitment and its OpenAPI document", { timeout: PROCESS_TIMEOUT }, async () => {
    const service = startService("attestor", settings("served"))
    running.push(service)
    const base = await service.url()
    const info = await fetch(`${base}/v1/info`)
    expect(info.status).toBe(200)
    expect(await info.json()).toMatchObject({
      chainId: 31337,
      vault: VAULT,
      attestor: ATTESTOR_ADDRESS,
      platforms: [],
      handleLookup: { mode: "off", platforms: [], price: null }
    })
    const commitment = await fetch(`${base}/v1/commitment`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ platform: "fedsocial", userId: "3" })
    })
    expect(commitment.status).toBe(200)
    expect(await commitment.json()).toMatchObject({
      platformId: 4,
      userId: "3",
      kind: 2,
      attestor: ATTESTOR_ADDRESS
    })
    const openapi = await fetch(`${base}/v1/openapi.json`)
    expect(openapi.status).toBe(200)
    const spec = (await openapi.json()) as { paths: Record<string, unknown> }
    expect(Object.keys(spec.paths).sort()).toEqual(
      [
        "/v1/health",
        "/v1/metrics",
        "/v1/info",
        "/v1/commitment",
        "/v1/public-handle",
        "/v1/oauth/messenger/verify",
        "/v1/oauth/fedsocial/verify",
        "/v1/oauth/{platform}/start",
        "/v1/oauth/{platform}/callback",
        "/v1/escrows",
        "/v1/bind"
      ].sort()
    )
    // No request value in the process's log lines.
    expect(service.stdout()).not.toMatch(/fedsocial|"3"|userId/)
    expect(await service.stop()).toBe(0)
  })
})
