/**
 * Cached answers (src/http/cachedAnswers.ts) through a real server: an answer its handler marked
 * is served again from its bytes for the same `GET` target, with the full path's rate limit,
 * metrics, outcome count and access log; everything else takes the full path.
 */
import type { IncomingMessage } from "node:http"
import http from "node:http"
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { describe, expect, it } from "@effect/vitest"
import { Effect, HashMap, Layer, Logger, ManagedRuntime, Metric, Schema } from "effect"
import { afterAll, beforeAll, beforeEach } from "vitest"
import { cacheAnswer, makeCachedAnswers } from "../../src/http/cachedAnswers.js"
import { counter, httpRequests } from "../../src/http/metrics.js"
import { rateLimitedTotal } from "../../src/http/rateLimit.js"
import { serveApi, serverUrl } from "../../src/http/server.js"
import { relayerRequestCost } from "../../src/relayer/IdRateLimit.js"

const Answer = Schema.Struct({ q: Schema.String, computed: Schema.Number })

const CachedApi = HttpApi.make("cached").add(
  HttpApiGroup.make("things")
    .add(
      HttpApiEndpoint.get("quote", "/v1/quote")
        .setUrlParams(Schema.Struct({ q: Schema.String }))
        .addSuccess(Answer)
    )
    .add(
      HttpApiEndpoint.post("claim", "/v1/claim")
        .setPayload(Schema.Struct({ q: Schema.String }))
        .addSuccess(Answer)
    )
)

/** What the handlers did, and what the test lets them say about their answers. */
const world = {
  computed: 0,
  replays: 0,
  ttlMs: 60_000,
  current: true,
  /** Answered by a response that sets a cookie (not kept: the bytes would not be the whole answer). */
  cookie: false
}

const answerOf = (q: string) =>
  Effect.gen(function* () {
    world.computed += 1
    yield* cacheAnswer({
      untilMs: Date.now() + world.ttlMs,
      current: () => world.current,
      onReplay: () => {
        world.replays += 1
      }
    })
    const value = { q, computed: world.computed }
    return world.cookie
      ? HttpServerResponse.unsafeSetCookie(HttpServerResponse.unsafeJson(value), "seen", "1")
      : value
  })

const CachedLive = HttpApiBuilder.group(CachedApi, "things", (handlers) =>
  handlers
    .handle("quote", ({ urlParams }) => answerOf(urlParams.q))
    .handle("claim", ({ payload }) => answerOf(payload.q))
)

const quoteOutcomes = counter("test_cached_outcomes_total", "outcomes of the cached route")
const outcomeCount = () => Effect.runSync(Metric.value(Metric.tagged(quoteOutcomes, "outcome", "ok"))).count

const logLines: Array<string> = []
const capturingLogger = Logger.make(({ fiberId, message, annotations }) => {
  const fields = HashMap.toEntries(annotations)
    .map(([k, v]) => `${k}=${String(v)}`)
    .join(" ")
  logLines.push(`fiber=${JSON.stringify(fiberId)} ${String(message)} ${fields}`)
})

const server = (burst: number) =>
  ManagedRuntime.make(
    serveApi(CachedApi, CachedLive, {
      host: "127.0.0.1",
      port: 0,
      maxBodyBytes: 1024,
      // A quote costs 0.2; a slow refill, so that no token comes back during a test.
      rateLimit: { bucket: { burst, perMinute: 0.3 }, trustProxyHops: 0, cost: relayerRequestCost },
      outcomes: { "/v1/quote": (outcome) => Metric.tagged(quoteOutcomes, "outcome", outcome) }
    }).pipe(Layer.provide(Logger.replace(Logger.defaultLogger, capturingLogger)))
  )

const roomy = server(1_000)
const tight = server(1)
let roomyUrl = ""
let tightUrl = ""

beforeAll(async () => {
  roomyUrl = await roomy.runPromise(serverUrl)
  tightUrl = await tight.runPromise(serverUrl)
})
afterAll(async () => {
  await roomy.dispose()
  await tight.dispose()
})
beforeEach(() => {
  Object.assign(world, { ttlMs: 60_000, current: true, cookie: false })
})

interface Answered {
  readonly status: number
  readonly headers: ReadonlyArray<readonly [string, string]>
  readonly text: string
}

/** A raw request, so that a GET may carry a body and every header is seen as sent. */
const send = (base: string, method: string, target: string, body?: string) =>
  new Promise<Answered>((resolve, reject) => {
    const url = new URL(base)
    const request = http.request(
      {
        host: url.hostname,
        port: url.port,
        method,
        path: target,
        headers:
          body === undefined ? {} : { "content-type": "application/json", "content-length": body.length }
      },
      (response: IncomingMessage) => {
        const chunks: Array<Buffer> = []
        response.on("data", (chunk: Buffer) => chunks.push(chunk))
        response.on("end", () =>
          resolve({
            status: response.statusCode ?? 0,
            headers: Object.entries(response.headers)
              .filter(([name]) => name !== "date")
              .map(([name, value]) => [name, String(value)] as const)
              .sort(),
            text: Buffer.concat(chunks).toString("utf8")
          })
        )
      }
    )
    request.on("error", reject)
    request.end(body)
  })

const requestsCounted = (status: number) =>
  Effect.runSync(
    Metric.value(
      httpRequests.pipe(
        Metric.tagged("route", "/v1/quote"),
        Metric.tagged("method", "GET"),
        Metric.tagged("status", String(status))
      )
    )
  ).count

describe("cached answers", () => {
  it("serves a marked answer again, byte for byte, with the full path's metrics, outcome and log line", async () => {
    const [computed, replays, counted, outcomes] = [
      world.computed,
      world.replays,
      requestsCounted(200),
      outcomeCount()
    ]
    logLines.length = 0
    const first = await send(roomyUrl, "GET", "/v1/quote?q=same")
    const again = await send(roomyUrl, "GET", "/v1/quote?q=same")
    const third = await send(roomyUrl, "GET", "/v1/quote?q=same")
    expect(first.status).toBe(200)
    expect(JSON.parse(first.text)).toEqual({ q: "same", computed: computed + 1 })
    // The handler ran once; its answer, headers and all, was served twice more.
    expect(again).toEqual(first)
    expect(third).toEqual(first)
    expect(world.computed).toBe(computed + 1)
    expect(world.replays).toBe(replays + 2)
    expect(requestsCounted(200)).toBe(counted + 3)
    expect(outcomeCount()).toBe(outcomes + 3)
    // One access log line per request, by template, each under a fiber id of its own.
    const lines = logLines.filter((line) => line.includes(" request "))
    expect(lines).toHaveLength(3)
    for (const line of lines) {
      for (const field of ["method=GET", "route=/v1/quote", "status=200", "duration_ms="])
        expect(line).toContain(field)
      expect(line).not.toContain("same")
    }
    expect(new Set(lines.map((line) => line.split(" ", 1)[0])).size).toBe(3)
  })

  it("answers only the exact target: another spelling, HEAD, a body or a POST take the full path", async () => {
    const kept = await send(roomyUrl, "GET", "/v1/quote?q=exact")
    const computed = world.computed
    // The same question spelled differently is the handler's to answer.
    const spelled = await send(roomyUrl, "GET", "/v1/quote?q=%65xact")
    expect(JSON.parse(spelled.text)).toEqual({ q: "exact", computed: computed + 1 })
    expect((await send(roomyUrl, "HEAD", "/v1/quote?q=exact")).status).toBe(200)
    expect(world.computed).toBe(computed + 2)
    // A GET with a body is the body guard's to judge.
    const withBody = await send(roomyUrl, "GET", "/v1/quote?q=exact", '{"q":"exact"}')
    expect(withBody.text).not.toBe(kept.text)
    expect(world.computed).toBe(computed + 3)
    const posted = await send(roomyUrl, "POST", "/v1/quote?q=exact", '{"q":"exact"}')
    expect(posted.status).toBe(405)
    // A POST's answer is never kept, marked or not.
    await send(roomyUrl, "POST", "/v1/claim", '{"q":"posted"}')
    const before = world.computed
    await send(roomyUrl, "POST", "/v1/claim", '{"q":"posted"}')
    expect(world.computed).toBe(before + 1)
    // The target's answer (the last the full path gave for it) is still served from its bytes.
    const computedAfter = world.computed
    expect(await send(roomyUrl, "GET", "/v1/quote?q=exact")).toEqual(withBody)
    expect(world.computed).toBe(computedAfter)
  })

  it("computes again once the answer has expired or is no longer current", async () => {
    world.ttlMs = 150
    const first = await send(roomyUrl, "GET", "/v1/quote?q=short")
    expect(await send(roomyUrl, "GET", "/v1/quote?q=short")).toEqual(first)
    await new Promise((resolve) => setTimeout(resolve, 200))
    world.ttlMs = 60_000
    const afterExpiry = await send(roomyUrl, "GET", "/v1/quote?q=short")
    expect(afterExpiry.text).not.toBe(first.text)
    expect(await send(roomyUrl, "GET", "/v1/quote?q=short")).toEqual(afterExpiry)
    world.current = false
    const replaced = await send(roomyUrl, "GET", "/v1/quote?q=short")
    expect(replaced.text).not.toBe(afterExpiry.text)
  })

  it("keeps no answer that sets a cookie", async () => {
    world.cookie = true
    const first = await send(roomyUrl, "GET", "/v1/quote?q=cookie")
    expect(first.headers.some(([name]) => name === "set-cookie")).toBe(true)
    const again = await send(roomyUrl, "GET", "/v1/quote?q=cookie")
    expect(again.text).not.toBe(first.text)
  })

  it("charges a replayed answer to the client's bucket and refuses it as the full path does, once", async () => {
    const refusedBefore = Effect.runSync(Metric.value(Metric.tagged(rateLimitedTotal, "scope", "ip"))).count
    const limited = requestsCounted(429)
    // One token: five quotes at 0.2, the first computed, four replayed.
    const answers = []
    for (let i = 0; i < 5; i++) answers.push(await send(tightUrl, "GET", "/v1/quote?q=limited"))
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200, 200, 200])
    expect(new Set(answers.map((answer) => answer.text)).size).toBe(1)
    const refused = await send(tightUrl, "GET", "/v1/quote?q=limited")
    expect(refused.status).toBe(429)
    expect(JSON.parse(refused.text)).toEqual({
      error: "too many requests, retry later",
      code: "rate_limited"
    })
    // 0.2 of a token at 0.3 a minute is back in 40 s, as the full path says.
    expect(Object.fromEntries(refused.headers)["retry-after"]).toBe("40")
    const fullPath = await send(tightUrl, "GET", "/v1/quote?q=other")
    expect(fullPath.status).toBe(429)
    expect(fullPath.headers).toEqual(refused.headers)
    expect(fullPath.text).toBe(refused.text)
    // Each refusal counted once.
    expect(Effect.runSync(Metric.value(Metric.tagged(rateLimitedTotal, "scope", "ip"))).count).toBe(
      refusedBefore + 2
    )
    expect(requestsCounted(429)).toBe(limited + 2)
  })
})

describe("the answer store", () => {
  const marked = { untilMs: Number.MAX_SAFE_INTEGER, current: () => true, onReplay: () => {} }
  const answeredBy = { route: "/v1/quote", outcome: "ok", fiber: undefined as never }
  const get = (url: string) => ({ method: "GET", url, headers: {} }) as IncomingMessage

  it("holds at most its capacity, dropping the oldest target first", () => {
    const answers = makeCachedAnswers(2)
    for (const url of ["/a", "/b", "/c"])
      answers.keep({ method: "GET", url }, HttpServerResponse.unsafeJson({ url }), marked, answeredBy)
    expect(answers.find(get("/a"))).toBeUndefined()
    expect(answers.find(get("/b"))?.response.status).toBe(200)
    expect(answers.find(get("/c"))?.response.status).toBe(200)
  })

  it("keeps only a 200 to a GET, not yet expired, with its body in memory", () => {
    const answers = makeCachedAnswers()
    const json = HttpServerResponse.unsafeJson({})
    const keep = (method: string, url: string, response = json, until = marked.untilMs) =>
      answers.keep({ method, url }, response, { ...marked, untilMs: until }, answeredBy)
    keep("GET", "/late", json, Date.now() - 1)
    keep("GET", "/empty", HttpServerResponse.empty())
    keep("POST", "/posted")
    keep("GET", "/created", HttpServerResponse.unsafeJson({}, { status: 201 }))
    keep("GET", "/kept")
    for (const url of ["/late", "/empty", "/posted", "/created"])
      expect(answers.find(get(url))).toBeUndefined()
    expect(answers.find(get("/kept"))?.response).toBe(json)
    // A GET that comes with a body is the full path's; an empty one is no body.
    const withLength = (length: string) =>
      ({ ...get("/kept"), headers: { "content-length": length } }) as IncomingMessage
    expect(answers.find(withLength("2"))).toBeUndefined()
    expect(answers.find(withLength("0"))?.response).toBe(json)
  })
})
