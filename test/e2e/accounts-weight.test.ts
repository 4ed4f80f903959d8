/**
 * `GET /v1/accounts` costs what its answer weighs (docs/relayer.md §8), on the relayer as it runs
 * on the devnet: a client pulling the identity body over and over is refused 429 once its bucket
 * has paid for a few bodies, while other clients' quotes are answered, and a 304 costs what a
 * quote does.
 * The relayer trusts one proxy hop, so `X-Forwarded-For` stands for the client's address.
 */
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Layer, Logger, ManagedRuntime, Scope } from "effect"
import { zeroAddress } from "viem"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  type DevnetChain,
  devnetChain,
  relayerEnv,
  withSettings,
  writeDevnetFile
} from "../../layers/devnet.js"
import { Relayer } from "../../layers/relayer.js"
import { serverUrl } from "../../src/http/server.js"

const BURST = 30
/** Small, so the devnet's short body (no account registered) weighs several tokens. */
const BYTES_PER_TOKEN = 16

const scope = Effect.runSync(Scope.make())
let chain: DevnetChain
let relayer: ManagedRuntime.ManagedRuntime<unknown, unknown> | undefined
let base = ""

beforeAll(async () => {
  chain = await Effect.runPromise(
    Scope.extend(devnetChain({ dir: join(tmpdir(), `accounts-weight-${process.pid}`) }), scope)
  )
  await Effect.runPromise(
    writeDevnetFile(chain, { relayerUrl: "http://127.0.0.1:1", attestorUrl: "http://127.0.0.1:1" })
  )
  const runtime = ManagedRuntime.make(
    withSettings(Relayer.layer, {
      ...relayerEnv(chain, 0),
      TRUST_PROXY: "1",
      RATE_LIMIT_IP_BURST: String(BURST),
      // Slow: nothing worth a token comes back while the test runs.
      RATE_LIMIT_IP_PER_MINUTE: "1",
      RATE_LIMIT_IP_BYTES_PER_TOKEN: String(BYTES_PER_TOKEN),
      INDEXER_POLL_INTERVAL_MS: "200"
    }).pipe(Layer.provide(Logger.remove(Logger.defaultLogger)))
  )
  relayer = runtime as ManagedRuntime.ManagedRuntime<unknown, unknown>
  base = await runtime.runPromise(serverUrl)
  // Until the index covers its first range; each look from an address of its own.
  for (let i = 0; ; i++) {
    const res = await fetch(`${base}/v1/accounts`, {
      headers: { "x-forwarded-for": `198.51.100.${i % 250}`, "if-none-match": "*" }
    })
    if (res.status === 304) break
    if (i > 300) throw new Error(`the account index never became ready (${res.status})`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}, 300_000)

afterAll(async () => {
  await relayer?.dispose()
  await Effect.runPromise(Scope.close(scope, { _tag: "Success", value: undefined } as never))
})

const accounts = (client: string, headers: Record<string, string> = {}) =>
  fetch(`${base}/v1/accounts`, {
    headers: { "x-forwarded-for": client, "accept-encoding": "identity", ...headers }
  })

const quote = (client: string) =>
  fetch(
    `${base}/v1/quote?${new URLSearchParams({ asset: chain.deployment.settlementAsset, adapter: zeroAddress, action: "ping" })}`,
    { headers: { "x-forwarded-for": client } }
  )

describe("GET /v1/accounts under the per-IP limit", () => {
  it("a flood of identity bodies from one address is refused 429 while other addresses' quotes are answered", async () => {
    const flooder = "203.0.113.10"
    const first = await accounts(flooder)
    expect(first.status).toBe(200)
    expect(first.headers.get("content-encoding")).toBeNull()
    const length = Number(first.headers.get("content-length"))
    await first.arrayBuffer()
    const weight = length / BYTES_PER_TOKEN
    expect(weight).toBeGreaterThan(2)

    // Each body is asked for alongside another address's quote.
    const flooded: Array<{ status: number; retryAfter: string | null; body: string }> = []
    const quoted: Array<number> = []
    for (let i = 0; i < 40; i++) {
      const [res, answer] = await Promise.all([accounts(flooder), quote(`198.18.0.${i}`)])
      flooded.push({ status: res.status, retryAfter: res.headers.get("retry-after"), body: await res.text() })
      quoted.push(answer.status)
      await answer.arrayBuffer()
    }
    const served = flooded.filter((answer) => answer.status === 200).length
    const refused = flooded.filter((answer) => answer.status === 429)
    // Every body took its weight from the one bucket: far fewer than one per token fit in it.
    expect(served + 1).toBeLessThanOrEqual(Math.ceil(BURST / weight))
    expect(refused.length).toBe(40 - served)
    for (const answer of refused) {
      expect(Number(answer.retryAfter)).toBeGreaterThanOrEqual(1)
      expect(JSON.parse(answer.body)).toEqual({ error: expect.any(String), code: "rate_limited" })
    }
    expect(quoted).toEqual(Array.from({ length: 40 }, () => 200))
    // Still refused: the flood did not pay its way out.
    expect((await accounts(flooder)).status).toBe(429)
  })

  it("a 304 costs what a quote does: 0.2, five to a token", async () => {
    // `*` matches whatever the current tag is, even if a block lands meanwhile.
    const fit = BURST * 5
    const statuses: Array<number> = []
    for (let i = 0; i < fit + 1; i++)
      statuses.push((await accounts("203.0.113.20", { "if-none-match": "*" })).status)
    expect(statuses.slice(0, fit)).toEqual(Array.from({ length: fit }, () => 304))
    expect(statuses[fit]).toBe(429)
  })
})
