/**
 * Token-bucket rate limits: the client key (socket, trusted proxies, IPv6 blocks), the buckets
 * (fractional costs, refill, Retry-After, bounded memory) on the TestClock, and the per-IP
 * middleware of the shared HTTP shell through a real server.
 */

import { RateLimiter } from "@effect/experimental"
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup, HttpServerResponse } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, HashMap, Layer, Logger, ManagedRuntime, Metric, Schema, TestClock } from "effect"
import { afterAll, beforeAll } from "vitest"
import { Wire } from "../../schema/errors.js"
import { serviceDocument } from "../../src/http/openapi.js"
import {
  answerTokens,
  boundedMemoryStore,
  clientKey,
  makeLimit,
  memoryRateLimiter,
  rateLimitedTotal
} from "../../src/http/rateLimit.js"
import { serveApi, serverUrl } from "../../src/http/server.js"
import { relayerBytesPerToken, relayerRequestCost } from "../../src/relayer/IdRateLimit.js"

describe("client key", () => {
  it("is the socket's peer when no proxy is trusted, whatever X-Forwarded-For says", () => {
    expect(clientKey("203.0.113.7", "198.51.100.1", 0)).toBe("203.0.113.7")
    expect(clientKey("203.0.113.7", undefined, 0)).toBe("203.0.113.7")
  })

  it("with n trusted hops is the n-th X-Forwarded-For entry from the right", () => {
    // Entries left of the trusted proxies' own are the client's to write.
    expect(clientKey("10.0.0.1", "1.1.1.1, 198.51.100.9", 1)).toBe("198.51.100.9")
    expect(clientKey("10.0.0.1", "1.1.1.1, 198.51.100.9, 10.0.0.2", 2)).toBe("198.51.100.9")
    // Fewer entries than hops: the furthest one there is.
    expect(clientKey("10.0.0.1", "198.51.100.9", 3)).toBe("198.51.100.9")
    expect(clientKey("10.0.0.1", undefined, 1)).toBe("10.0.0.1")
    // Ports some proxies add, and garbage (falls back to the socket).
    expect(clientKey("10.0.0.1", "198.51.100.9:4711", 1)).toBe("198.51.100.9")
    expect(clientKey("10.0.0.1", "[2001:db8::1]:443", 1)).toBe("2001:db8:0:0::/64")
    expect(clientKey("10.0.0.1", "not-an-address", 1)).toBe("10.0.0.1")
  })

  it("counts IPv6 by /64 and IPv4-mapped addresses as IPv4", () => {
    expect(clientKey("2001:db8:1:2:aaaa::1", undefined, 0)).toBe("2001:db8:1:2::/64")
    expect(clientKey("2001:0db8:0001:0002:ffff:1:2:3", undefined, 0)).toBe("2001:db8:1:2::/64")
    expect(clientKey("::1", undefined, 0)).toBe("0:0:0:0::/64")
    expect(clientKey("::ffff:192.0.2.5", undefined, 0)).toBe("192.0.2.5")
  })
})

describe("buckets", () => {
  const limited = <A, E>(effect: Effect.Effect<A, E, RateLimiter.RateLimiter>) =>
    Effect.provide(effect, memoryRateLimiter())

  it.effect("fractional costs add up exactly: 150 polls of 0.2 empty a 30-token bucket", () =>
    limited(
      Effect.gen(function* () {
        const limit = yield* makeLimit({ burst: 30, perMinute: 30 }, "test")
        for (let i = 0; i < 150; i++) yield* limit("k", 0.2)
        const error = yield* Effect.flip(limit("k", 0.2))
        // One 0.2 token comes back every 0.4 s at 30 a minute.
        expect(error.retryAfterSeconds).toBeCloseTo(0.4, 3)
        yield* TestClock.adjust(Duration.millis(400))
        yield* limit("k", 0.2)
      })
    )
  )

  it.effect("refills at perMinute up to burst, and says how long until the cost is back", () =>
    limited(
      Effect.gen(function* () {
        const limit = yield* makeLimit({ burst: 6, perMinute: 3 }, "test")
        for (let i = 0; i < 6; i++) yield* limit("k", 1)
        expect((yield* Effect.flip(limit("k", 1))).retryAfterSeconds).toBeCloseTo(20, 3)
        yield* TestClock.adjust(Duration.seconds(20))
        yield* limit("k", 1)
        yield* Effect.flip(limit("k", 1))
        // A long pause refills no more than the burst.
        yield* TestClock.adjust(Duration.hours(1))
        for (let i = 0; i < 6; i++) yield* limit("k", 1)
        yield* Effect.flip(limit("k", 1))
        // Keys are independent; a free request costs nothing.
        yield* limit("other", 1)
        for (let i = 0; i < 100; i++) yield* limit("k", 0)
      })
    )
  )

  it.effect("refusals are counted by scope", () =>
    limited(
      Effect.gen(function* () {
        const counter = Metric.tagged(rateLimitedTotal, "scope", "counted")
        const before = (yield* Metric.value(counter)).count
        const limit = yield* makeLimit({ burst: 1, perMinute: 1 }, "counted")
        yield* limit("k", 1)
        yield* Effect.flip(limit("k", 1))
        expect((yield* Metric.value(counter)).count).toBe(before + 1)
      })
    )
  )

  it.effect("memory stays bounded: past maxKeys, full buckets and then the oldest are forgotten", () =>
    Effect.gen(function* () {
      const limit = yield* makeLimit({ burst: 2, perMinute: 1 }, "test")
      yield* limit("a", 2)
      yield* Effect.flip(limit("a", 1))
      for (const key of ["b", "c", "d", "e"]) yield* limit(key, 1)
      // "a" was the oldest bucket and has been dropped, so it starts full again.
      yield* limit("a", 2)
    }).pipe(Effect.provide(RateLimiter.layer.pipe(Layer.provide(boundedMemoryStore(2)))))
  )
})

describe("relayer costs", () => {
  it("POST 1, quote, tx-status and accounts 0.2 on arrival, other reads free; HEAD as GET", () => {
    expect(relayerRequestCost("POST", "/v1/claim")).toBe(1)
    expect(relayerRequestCost("POST", "/v1/ping")).toBe(1)
    expect(relayerRequestCost("POST", "unmatched")).toBe(1)
    expect(relayerRequestCost("POST", "/v1/tx-status")).toBe(0.2)
    expect(relayerRequestCost("GET", "/v1/quote")).toBe(0.2)
    expect(relayerRequestCost("HEAD", "/v1/quote")).toBe(0.2)
    expect(relayerRequestCost("GET", "/v1/config")).toBe(0)
    expect(relayerRequestCost("GET", "/v1/accounts")).toBe(0.2)
    expect(relayerRequestCost("HEAD", "/v1/accounts")).toBe(0.2)
    expect(relayerRequestCost("GET", "/v1/health")).toBe(0)
  })

  it("only GET /v1/accounts is weighed: a token per bytesPerToken bytes, at least its arrival cost", () => {
    const weighed = relayerBytesPerToken(512 * 1024)
    expect(weighed("GET", "/v1/accounts")).toBe(512 * 1024)
    // A HEAD sends no body.
    expect(weighed("HEAD", "/v1/accounts")).toBeUndefined()
    expect(weighed("GET", "/v1/quote")).toBeUndefined()
    expect(weighed("POST", "/v1/claim")).toBeUndefined()
    const KiB = 1024
    // Beyond the 0.2 taken on arrival: a 304, a small list, 150 KiB of gzip, 1 MB of identity, 33.5 MB.
    expect(answerTokens(0, 512 * KiB, 0.2)).toBe(0)
    expect(answerTokens(100 * KiB, 512 * KiB, 0.2)).toBe(0)
    expect(answerTokens(150 * KiB, 512 * KiB, 0.2)).toBeCloseTo(0.093, 3)
    expect(answerTokens(1_000_000, 512 * KiB, 0.2)).toBeCloseTo(1.707, 3)
    expect(answerTokens(33_500_000, 512 * KiB, 0.2)).toBeCloseTo(63.696, 3)
  })
})

// ---------------------------------------------------------------------------------------------
// Through the shell

class LimitedGroup extends HttpApiGroup.make("limited")
  .add(
    HttpApiEndpoint.post("write", "/v1/claim")
      .setPayload(Schema.Struct({ value: Schema.String }))
      .addSuccess(Schema.Struct({ ok: Schema.Boolean }))
  )
  .add(HttpApiEndpoint.get("quote", "/v1/quote").addSuccess(Schema.Struct({ ok: Schema.Boolean })))
  .add(HttpApiEndpoint.get("health", "/v1/health").addSuccess(Schema.Struct({ ok: Schema.Boolean })))
  .add(
    HttpApiEndpoint.get("accounts", "/v1/accounts")
      .setUrlParams(Schema.Struct({ bytes: Schema.NumberFromString }))
      .addSuccess(Schema.Unknown)
  ) {}

class LimitedApi extends HttpApi.make("limited")
  .add(LimitedGroup)
  .addError(Wire.BadRequest)
  .addError(Wire.PayloadTooLarge)
  .addError(Wire.RateLimited)
  .annotateContext(serviceDocument({ title: "limited", description: "test" })) {}

const LimitedLive = HttpApiBuilder.group(LimitedApi, "limited", (handlers) =>
  handlers
    .handle("write", () => Effect.succeed({ ok: true }))
    .handle("quote", () => Effect.succeed({ ok: true }))
    .handle("health", () => Effect.succeed({ ok: true }))
    // A body of the size asked for, as the accounts feed sends its identity or gzip body.
    .handle("accounts", ({ urlParams }) =>
      Effect.succeed(HttpServerResponse.uint8Array(new Uint8Array(urlParams.bytes)))
    )
)

const logLines: Array<string> = []
const capturingLogger = Logger.make(({ message, annotations }) => {
  const fields = HashMap.toEntries(annotations)
    .map(([k, v]) => `${k}=${String(v)}`)
    .join(" ")
  logLines.push(`${String(message)} ${fields}`)
})

const server = (trustProxyHops: number) =>
  ManagedRuntime.make(
    serveApi(LimitedApi, LimitedLive, {
      host: "127.0.0.1",
      port: 0,
      maxBodyBytes: 1024,
      // A slow refill, so a loaded machine cannot refill a token in the middle of a test.
      rateLimit: {
        bucket: { burst: 3, perMinute: 0.3 },
        trustProxyHops,
        cost: relayerRequestCost,
        bytesPerToken: relayerBytesPerToken(1000)
      }
    }).pipe(Layer.provide(Logger.replace(Logger.defaultLogger, capturingLogger)))
  )

const direct = server(0)
const proxied = server(1)
let directUrl = ""
let proxiedUrl = ""

beforeAll(async () => {
  directUrl = await direct.runPromise(serverUrl)
  proxiedUrl = await proxied.runPromise(serverUrl)
})
afterAll(async () => {
  await direct.dispose()
  await proxied.dispose()
})

const post = (base: string, headers: Record<string, string> = {}, body = '{"value":"x"}') =>
  fetch(`${base}/v1/claim`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body
  })

describe("per-IP middleware", () => {
  it("refuses the request after the burst with 429 rate_limited and Retry-After, before reading the body", async () => {
    // A spoofed X-Forwarded-For does not buy a new bucket when no proxy is trusted.
    for (let i = 0; i < 3; i++)
      expect((await post(directUrl, { "x-forwarded-for": `192.0.2.${i}` })).status).toBe(200)
    const refused = await post(directUrl, { "x-forwarded-for": "192.0.2.99" })
    expect(refused.status).toBe(429)
    expect(refused.headers.get("retry-after")).toBe("200")
    expect(await refused.json()).toEqual({ error: "too many requests, retry later", code: "rate_limited" })
    // A body the guard would refuse with 400 is not looked at.
    expect((await post(directUrl, {}, "not json")).status).toBe(429)
    // Free routes stay open; charged reads are refused too.
    expect((await fetch(`${directUrl}/v1/health`)).status).toBe(200)
    expect((await fetch(`${directUrl}/v1/quote`)).status).toBe(429)
    // No log line names the client (the server's own listening address aside).
    const requestLines = logLines.filter((line) => !line.startsWith("Listening"))
    expect(requestLines.some((line) => line.includes("127.0.0.1") || line.includes("192.0.2"))).toBe(false)
    expect(logLines.some((line) => line.includes("status=429"))).toBe(true)
  })

  it("behind a trusted proxy counts the address the proxy saw, whatever the client prepended", async () => {
    const as = (client: string, spoofed = "203.0.113.1") => ({ "x-forwarded-for": `${spoofed}, ${client}` })
    for (let i = 0; i < 3; i++)
      expect((await post(proxiedUrl, as("198.51.100.1", `203.0.113.${i}`))).status).toBe(200)
    expect((await post(proxiedUrl, as("198.51.100.1", "203.0.113.50"))).status).toBe(429)
    // Another client behind the same proxy has its own bucket.
    expect((await post(proxiedUrl, as("198.51.100.2"))).status).toBe(200)
  })

  it("a quote costs 0.2: fifteen fit in three tokens", async () => {
    const client = { "x-forwarded-for": "198.51.100.3" }
    for (let i = 0; i < 15; i++)
      expect((await fetch(`${proxiedUrl}/v1/quote`, { headers: client })).status).toBe(200)
    const refused = await fetch(`${proxiedUrl}/v1/quote`, { headers: client })
    expect(refused.status).toBe(429)
    // 0.2 of a token at 0.3 a minute is back in 40 s.
    expect(refused.headers.get("retry-after")).toBe("40")
  })
})

describe("answers that cost what they weigh", () => {
  const accounts = (client: string, bytes: number) =>
    fetch(`${proxiedUrl}/v1/accounts?bytes=${bytes}`, { headers: { "x-forwarded-for": client } })

  it("a body of 2.9 KB at 1000 bytes a token takes 2.9 tokens: the next request is refused", async () => {
    const heavy = await accounts("198.51.100.20", 2_900)
    expect(heavy.status).toBe(200)
    expect((await heavy.arrayBuffer()).byteLength).toBe(2_900)
    const refused = await accounts("198.51.100.20", 0)
    expect(refused.status).toBe(429)
    // 0.1 left; 0.1 more at 0.3 a minute is back in 20 s.
    expect(refused.headers.get("retry-after")).toBe("20")
    expect(await refused.json()).toEqual({ error: "too many requests, retry later", code: "rate_limited" })
  })

  it("an empty answer (a 304) or a light one costs a poll's 0.2: fifteen fit in three tokens", async () => {
    const statuses: Array<number> = []
    for (let i = 0; i < 16; i++)
      statuses.push((await accounts("198.51.100.21", i % 2 === 0 ? 0 : 150)).status)
    expect(statuses).toEqual([...Array.from({ length: 15 }, () => 200), 429])
  })

  it("a body heavier than the bucket is sent once, then the client waits until the debt is repaid", async () => {
    const heavy = await accounts("198.51.100.22", 10_000)
    expect(heavy.status).toBe(200)
    await heavy.arrayBuffer()
    const refused = await accounts("198.51.100.22", 0)
    expect(refused.status).toBe(429)
    // 3 − 10 = −7 tokens, and 0.2 more to come in: 7.2 tokens at 0.3 a minute.
    expect(refused.headers.get("retry-after")).toBe("1440")
    // Another address is not affected.
    expect((await accounts("198.51.100.23", 0)).status).toBe(200)
  })
})
