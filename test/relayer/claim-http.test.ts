/**
 * POST /v1/claim through a real server: the route's own body decoding, the wire form of refusals,
 * the outcome metric, and both rate limits answering 429 with Retry-After. The pipeline runs over
 * the stub layers of claimSupport.ts.
 */
import { Effect, Layer, Logger, LogLevel, ManagedRuntime, Metric } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { serveApi, serverUrl } from "../../src/http/server.js"
import { RelayerApi } from "../../src/relayer/api/index.js"
import { RelayerClaimsHandlers } from "../../src/relayer/handlers/claims.js"
import { relayerRequestCost } from "../../src/relayer/IdRateLimit.js"
import { claimOutcomes, relayerOutcomes } from "../../src/relayer/metrics.js"
import { withUnstubbedGroups } from "../support/apiStubs.js"
import {
  claimRequest,
  claimsLayer,
  ID,
  makeWorld,
  QUOTED_FEE,
  registerIn,
  TX_HASH,
  USDT
} from "./claimSupport.js"

const world = makeWorld()
registerIn(world, ID, { balances: { [USDT]: 10_000n * 10n ** 18n } })

const runtime = ManagedRuntime.make(
  serveApi(
    RelayerApi,
    withUnstubbedGroups(RelayerApi, {
      groups: ["claims"],
      layer: RelayerClaimsHandlers.pipe(Layer.provide(claimsLayer(world, { RATE_LIMIT_ID_PER_MINUTE: "1" })))
    }),
    {
      host: "127.0.0.1",
      port: 0,
      maxBodyBytes: 64 * 1024,
      // Slow refills, so a loaded machine cannot refill a token in the middle of a test.
      rateLimit: { bucket: { burst: 12, perMinute: 1 }, trustProxyHops: 1, cost: relayerRequestCost },
      outcomes: relayerOutcomes
    }
  ).pipe(Layer.provide(Logger.minimumLogLevel(LogLevel.Warning)))
)
let base = ""
beforeAll(async () => {
  base = await runtime.runPromise(serverUrl)
})
afterAll(() => runtime.dispose())

const deadline = () => BigInt(Math.floor(Date.now() / 1000) + 3600)
const json = (value: unknown) => JSON.stringify(value, (_, v) => (typeof v === "bigint" ? v.toString() : v))

const post = (body: string, client = "198.51.100.1") =>
  fetch(`${base}/v1/claim`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-forwarded-for": client },
    body
  })

const outcomes = (code: string) =>
  runtime.runPromise(Effect.map(Metric.value(Metric.tagged(claimOutcomes, "code", code)), (s) => s.count))

describe("POST /v1/claim over HTTP", () => {
  it("answers { txHash } for a valid claim and counts it as ok", async () => {
    const before = await outcomes("ok")
    const res = await post(json(await claimRequest({ deadline: deadline() })), "198.51.100.10")
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual({ txHash: TX_HASH })
    expect(await outcomes("ok")).toBe(before + 1)
  })

  it("refuses a body that does not match the schema with 400 bad_request naming the field, counted", async () => {
    const before = await outcomes("bad_request")
    const valid = JSON.parse(json(await claimRequest({ deadline: deadline() })))
    const res = await post(json({ ...valid, claim: { ...valid.claim, amount: "-1" } }), "198.51.100.11")
    expect(res.status).toBe(400)
    const body = (await res.json()) as { code: string; error: string }
    expect(body.code).toBe("bad_request")
    expect(body.error).toContain("claim.amount")
    expect(await outcomes("bad_request")).toBe(before + 1)
    const submitted = world.submitted.length
    expect((await post(json({ claim: valid.claim }), "198.51.100.11")).status).toBe(400)
    expect(world.submitted).toHaveLength(submitted)
  })

  it("renders a refusal as { error, code } with its status, counted by code", async () => {
    const before = await outcomes("fee_too_low")
    const res = await post(
      json(await claimRequest({ deadline: deadline(), relayerFee: QUOTED_FEE - 1n })),
      "198.51.100.12"
    )
    expect(res.status).toBe(402)
    expect(await res.json()).toMatchObject({ code: "fee_too_low" })
    expect(await outcomes("fee_too_low")).toBe(before + 1)
  })

  it("per id: the seventh accepted claim for one account within the window is 429 with Retry-After", async () => {
    // Spread over clients so the per-IP bucket is not what stops it; the account has one
    // success above, so five more fit in its burst of six.
    for (let i = 0; i < 5; i++) {
      const res = await post(json(await claimRequest({ deadline: deadline() })), `198.51.100.${20 + i}`)
      expect(res.status).toBe(200)
    }
    const submitted = world.submitted.length
    const res = await post(json(await claimRequest({ deadline: deadline() })), "198.51.100.30")
    expect(res.status).toBe(429)
    // One token a minute (RATE_LIMIT_ID_PER_MINUTE=1 here), less what has refilled since the first claim.
    const retryAfter = Number(res.headers.get("retry-after"))
    expect(retryAfter).toBeGreaterThan(30)
    expect(retryAfter).toBeLessThanOrEqual(60)
    expect(await res.json()).toMatchObject({ code: "rate_limited" })
    expect(world.submitted).toHaveLength(submitted)
    expect(await outcomes("rate_limited")).toBeGreaterThanOrEqual(1)
  })

  it("per IP: past the burst every POST is 429 with Retry-After, whatever its body", async () => {
    const client = "198.51.100.40"
    const started = Date.now()
    for (let i = 0; i < 12; i++) expect((await post("{}", client)).status).toBe(400)
    const res = await post(json(await claimRequest({ deadline: deadline() })), client)
    expect(res.status).toBe(429)
    // One token a minute: the next one is a minute after the first request, less what has passed
    // since (whole seconds, rounded up; on a busy machine the twelve requests take a while).
    const elapsedSeconds = (Date.now() - started) / 1000
    const retryAfter = Number(res.headers.get("retry-after"))
    expect(retryAfter).toBeLessThanOrEqual(60)
    expect(retryAfter).toBeGreaterThanOrEqual(Math.floor(60 - elapsedSeconds))
  })
})
