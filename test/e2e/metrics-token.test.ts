/**
 * `GET /v1/metrics` on both services as their whole layers serve it against anvil (docs/relayer.md
 * §4 and §7, docs/attestor.md §4 and §7, docs/protocol.md §7): without `METRICS_TOKEN` the route is
 * hidden, 404 with an empty body whatever the request carries; with it, 401 with an empty body
 * without the bearer token or with a wrong one, and the Prometheus text with the right one.
 */
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { ManagedRuntime } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Attestor } from "../../layers/attestor.js"
import { withSettings } from "../../layers/devnet.js"
import { Relayer } from "../../layers/relayer.js"
import { type AnvilInstance, spawnAnvil } from "../../src/chain/anvil.js"
import { serverUrl } from "../../src/http/server.js"
import { testKey } from "../relayer/txsender-support.js"

const METRICS_TOKEN = "metrics-token-for-tests"

const dir = mkdtempSync(join(tmpdir(), "metrics-token-"))
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

let anvil: AnvilInstance

const common = (): Record<string, string> => ({
  RPC_URL: anvil.rpcUrl,
  DEPLOYMENT_FILE: deploymentFile,
  DATA_DIR: "memory://",
  HOST: "127.0.0.1",
  PORT: "0"
})

/** Each service's whole layer with its own settings and `extra` on top. */
const services = {
  relayer: (extra: Record<string, string>) =>
    withSettings(Relayer.layer, {
      ...common(),
      RELAYER_PRIVATE_KEY: testKey(1).privateKey,
      INDEXER_ENABLED: "false",
      ...extra
    }),
  attestor: (extra: Record<string, string>) =>
    withSettings(Attestor.layer, {
      ...common(),
      ATTESTOR_PRIVATE_KEY: testKey(2).privateKey,
      HINT_PRIVATE_KEY: `0x${"22".repeat(32)}`,
      PEPPER: `0x${"33".repeat(32)}`,
      ...extra
    })
}

type Service = keyof typeof services
const running: Array<{ readonly dispose: () => Promise<void> }> = []

/** Serves `service` with `extra` settings; its URL. */
const serve = async (service: Service, extra: Record<string, string>) => {
  const runtime = ManagedRuntime.make(services[service](extra))
  running.push(runtime)
  return runtime.runPromise(serverUrl)
}

const urls: Record<Service, { unset: string; set: string }> = {
  relayer: { unset: "", set: "" },
  attestor: { unset: "", set: "" }
}

beforeAll(async () => {
  anvil = await spawnAnvil()
  for (const service of ["relayer", "attestor"] as const)
    urls[service] = {
      unset: await serve(service, {}),
      set: await serve(service, { METRICS_TOKEN })
    }
}, 180_000)
afterAll(async () => {
  await Promise.all(running.map((runtime) => runtime.dispose()))
  await anvil?.stop()
})

const metrics = (base: string, authorization?: string) =>
  fetch(`${base}/v1/metrics`, { headers: authorization === undefined ? {} : { authorization } })

/** The status and the whole body of an answer. */
const answer = async (res: Response) => ({ status: res.status, body: await res.text() })

describe.each(["relayer", "attestor"] as const)("GET /v1/metrics on the %s", (service) => {
  it("without METRICS_TOKEN: 404 with an empty body, with or without a bearer token", async () => {
    const base = urls[service].unset
    expect(await answer(await metrics(base))).toEqual({ status: 404, body: "" })
    expect(await answer(await metrics(base, `Bearer ${METRICS_TOKEN}`))).toEqual({ status: 404, body: "" })
    expect(await answer(await metrics(base, "Bearer "))).toEqual({ status: 404, body: "" })
  })

  it("with METRICS_TOKEN: 401 with an empty body without the token or with a wrong one, the text with it", async () => {
    const base = urls[service].set
    expect(await answer(await metrics(base))).toEqual({ status: 401, body: "" })
    expect(await answer(await metrics(base, "Bearer wrong-token"))).toEqual({ status: 401, body: "" })
    expect(await answer(await metrics(base, METRICS_TOKEN))).toEqual({ status: 401, body: "" })
    const served = await metrics(base, `Bearer ${METRICS_TOKEN}`)
    expect(served.status).toBe(200)
    expect(served.headers.get("content-type")).toContain("text/plain")
    expect(await served.text()).toContain("# TYPE http_requests_total counter")
  })
})
