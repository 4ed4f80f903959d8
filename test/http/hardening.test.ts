/**
 * The HTTP shell against what an outside probe tried: other spellings of a route's path, methods
 * a route does not answer, deeply nested and echo-bait bodies, and clients that stall. Exercised
 * through a real Node server with raw sockets where the bytes on the wire matter.
 */
import { connect } from "node:net"
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Effect, Layer, Logger, ManagedRuntime, Option, Redacted, Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Wire } from "../../schema/errors.js"
import { requestBody, Uint256 } from "../../schema/primitives.js"
import { jsonNestsDeeperThan, MAX_JSON_DEPTH } from "../../src/http/body.js"
import { handleMetrics } from "../../src/http/MetricsEndpoint.js"
import { serviceDocument } from "../../src/http/openapi.js"
import { metricsEndpoint } from "../../src/http/operatorApi.js"
import type { IpRateLimitOptions } from "../../src/http/rateLimit.js"
import { serveApi, serverUrl } from "../../src/http/server.js"

const METRICS_TOKEN = "operator-token-for-tests"

const EchoRequest = Schema.Struct({
  value: Uint256,
  note: Schema.optional(Schema.String),
  nested: Schema.optional(Schema.Unknown)
}).annotations({ identifier: "EchoRequest", ...requestBody })

class ProbeGroup extends HttpApiGroup.make("probe")
  .add(
    HttpApiEndpoint.post("echo", "/v1/echo")
      .setPayload(EchoRequest)
      .addSuccess(Schema.Struct({ value: Uint256 }))
  )
  .add(HttpApiEndpoint.get("quote", "/v1/quote").addSuccess(Schema.Struct({ ok: Schema.Boolean })))
  .add(metricsEndpoint) {}

class ProbeApi extends HttpApi.make("probe")
  .add(ProbeGroup)
  .addError(Wire.BadRequest)
  .addError(Wire.PayloadTooLarge)
  .addError(Wire.RateLimited)
  .annotateContext(serviceDocument({ title: "probe", description: "test" })) {}

const ProbeLive = HttpApiBuilder.group(ProbeApi, "probe", (handlers) =>
  handlers
    .handle("echo", ({ payload }) => Effect.succeed({ value: payload.value }))
    .handle("quote", () => Effect.succeed({ ok: true }))
    .handle("metrics", handleMetrics(Option.some(Redacted.make(METRICS_TOKEN))))
)

/** POSTs cost a token, reads are free, like both services; the burst is small so a bypass shows. */
const rateLimit: IpRateLimitOptions = {
  bucket: { burst: 5, perMinute: 5 },
  trustProxyHops: 0,
  cost: (method, route) => (method === "POST" || route === "unmatched" ? 1 : 0)
}

const MAX_BODY_BYTES = 16 * 1024
const TIMEOUTS = { headersMs: 400, requestMs: 800, keepAliveMs: 5_000 }

const serve = (withLimit: boolean) =>
  ManagedRuntime.make(
    serveApi(ProbeApi, ProbeLive, {
      host: "127.0.0.1",
      port: 0,
      maxBodyBytes: MAX_BODY_BYTES,
      timeouts: TIMEOUTS,
      rateLimit: withLimit ? rateLimit : undefined
    }).pipe(Layer.provide(Logger.remove(Logger.defaultLogger)))
  )

const open = serve(false)
const limited = serve(true)
let base = ""
let limitedBase = ""

beforeAll(async () => {
  base = await open.runPromise(serverUrl)
  limitedBase = await limited.runPromise(serverUrl)
})
afterAll(async () => {
  await open.dispose()
  await limited.dispose()
})

interface RawAnswer {
  readonly status: number
  readonly headers: Record<string, string>
  readonly body: string
  /** Whether the server closed the connection. */
  readonly closed: boolean
  readonly elapsedMs: number
}

/**
 * Writes `parts` to a fresh connection as given (a part may be a delay in ms) and reads until
 * the server closes it or `waitMs` passes.
 */
const raw = (url: string, parts: ReadonlyArray<string | number>, waitMs = 3_000) =>
  new Promise<RawAnswer>((resolve, reject) => {
    const { hostname, port } = new URL(url)
    const started = Date.now()
    const socket = connect(Number(port), hostname)
    let received = ""
    let done = false
    const finish = (closed: boolean) => {
      if (done) return
      done = true
      clearTimeout(timer)
      socket.destroy()
      const [head = "", ...rest] = received.split("\r\n\r\n")
      const [statusLine = "", ...headerLines] = head.split("\r\n")
      const headers: Record<string, string> = {}
      for (const line of headerLines) {
        const colon = line.indexOf(":")
        if (colon > 0) headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim()
      }
      resolve({
        status: Number(statusLine.split(" ")[1] ?? 0),
        headers,
        body: rest.join("\r\n\r\n"),
        closed,
        elapsedMs: Date.now() - started
      })
    }
    const timer = setTimeout(() => finish(false), waitMs)
    socket.setEncoding("utf8")
    socket.on("data", (chunk: string) => {
      received += chunk
    })
    socket.on("close", () => finish(true))
    socket.on("error", (error) => (received.length > 0 ? finish(true) : reject(error)))
    socket.on("connect", async () => {
      for (const part of parts) {
        if (done) return
        if (typeof part === "number") await new Promise((r) => setTimeout(r, part))
        else socket.write(part)
      }
    })
  })

const request = (method: string, target: string, body?: string, extra = "") =>
  `${method} ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n${
    body === undefined
      ? ""
      : `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n`
  }${extra}\r\n${body ?? ""}`

const metricsText = async () =>
  (await fetch(`${base}/v1/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text()

describe("one decision about the route", () => {
  const spellings = ["/v1/echo/", "//v1/echo", "/V1/ECHO", "/v1/ech%6f", "/v1/echo//", "/v1/./echo"]

  it.each(spellings)("%s is no route: 404 not_found, and bad JSON there is no 500", async (path) => {
    const answer = await raw(base, [request("POST", path, "{not json")])
    expect(answer.status).toBe(404)
    expect(JSON.parse(answer.body)).toEqual({ error: expect.any(String), code: "not_found" })
  })

  it("an absolute-form target is no route either", async () => {
    const answer = await raw(base, [request("POST", `${base}/v1/echo`, "{not json")])
    expect(answer.status).toBe(404)
    expect(JSON.parse(answer.body)).toMatchObject({ code: "not_found" })
  })

  it("the body limit applies whatever the path: a declared 40 MB body is 413 before a byte is read", async () => {
    for (const path of ["/v1/echo", "/V1/ECHO", "/nowhere", "/v1/quote"]) {
      const head = `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${40 * 1024 * 1024}\r\n\r\n`
      const answer = await raw(base, [head, "{"])
      expect(answer.status, path).toBe(413)
      expect(answer.closed, path).toBe(true)
    }
  })

  it("a chunked body sent to no route is read only up to the limit: 413 and the connection closes", async () => {
    const head =
      "POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    const chunk = `4000\r\n${"x".repeat(0x4000)}\r\n`
    const answer = await raw(base, [head, chunk, 50, chunk, 50, chunk])
    expect(answer.status).toBe(413)
    expect(answer.closed).toBe(true)
  })

  it("a chunked body sent with a read is drained only up to the limit: 413", async () => {
    const head = "GET /v1/quote HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    const chunk = `4000\r\n${"x".repeat(0x4000)}\r\n`
    const answer = await raw(base, [head, chunk, 50, chunk, 50, chunk])
    expect(answer.status).toBe(413)
    expect(answer.closed).toBe(true)
  })

  it("a small body sent to no route is 404 and the connection stays open", async () => {
    const body = '{"value":"1"}'
    const answer = await raw(
      base,
      [
        `POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`
      ],
      500
    )
    expect(answer.status).toBe(404)
    expect(answer.closed).toBe(false)
  })

  it("every spelling of a POST costs a token: the sixth request is 429, not free", async () => {
    const statuses: Array<number> = []
    for (const path of ["/v1/echo", "/V1/ECHO", "/v1/echo/", "//v1/echo", "/v1/ech%6f", "/v1/echo"]) {
      statuses.push((await raw(limitedBase, [request("POST", path, '{"value":"1"}')])).status)
    }
    expect(statuses).toEqual([200, 404, 404, 404, 404, 429])
  })

  it("metrics label other spellings as unmatched, never by their path", async () => {
    await raw(base, [request("GET", "/V1/QUOTE")])
    const text = await metricsText()
    expect(text).not.toContain("/V1/QUOTE")
    expect(text).toMatch(/http_requests_total\{[^}]*route="unmatched"[^}]*status="404"/)
  })
})

describe("methods", () => {
  it("a known path asked with another method is 405 method_not_allowed with Allow", async () => {
    const get = await fetch(`${base}/v1/echo`)
    expect(get.status).toBe(405)
    expect(get.headers.get("allow")).toBe("POST")
    expect(await get.json()).toEqual({ error: expect.any(String), code: "method_not_allowed" })
    for (const method of ["POST", "PUT", "DELETE", "PATCH"]) {
      const res = await fetch(`${base}/v1/quote`, {
        method,
        headers: { "content-type": "application/json" },
        body: "{}"
      })
      expect(res.status, method).toBe(405)
      expect(res.headers.get("allow"), method).toBe("GET, HEAD")
      expect(await res.json(), method).toMatchObject({ code: "method_not_allowed" })
    }
  })

  it("HEAD is answered wherever GET is", async () => {
    const res = await fetch(`${base}/v1/quote`, { method: "HEAD" })
    expect(res.status).toBe(200)
  })

  it("an unknown path is 404 whatever the method", async () => {
    const res = await fetch(`${base}/v1/nothing-here`, { method: "DELETE" })
    expect(res.status).toBe(404)
    expect(await res.json()).toMatchObject({ code: "not_found" })
  })
})

describe("bodies", () => {
  const nested = (depth: number) => `{"value":"1","nested":${"[".repeat(depth)}${"]".repeat(depth)}}`

  it.each([33, 1_000, 2_000, 3_000, 8_000])(
    "a body nested %i deep is 400 bad_request with a short message",
    async (depth) => {
      const res = await fetch(`${base}/v1/echo`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: nested(depth)
      })
      expect(res.status).toBe(400)
      const body = (await res.json()) as { error: string; code: string }
      expect(body.code).toBe("bad_request")
      expect(body.error.length).toBeLessThan(120)
    }
  )

  it("a body nested up to the limit is accepted", async () => {
    // The object itself is one level.
    const res = await fetch(`${base}/v1/echo`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: nested(MAX_JSON_DEPTH - 1)
    })
    expect(res.status).toBe(200)
  })

  it("brackets inside strings do not count as nesting", () => {
    expect(jsonNestsDeeperThan(JSON.stringify({ s: "[[[[[[[[[[" }), 2)).toBe(false)
    expect(jsonNestsDeeperThan(JSON.stringify({ s: '\\"[[[[' }), 2)).toBe(false)
    expect(jsonNestsDeeperThan("[[[", 2)).toBe(true)
  })

  it("an error message quotes at most a few dozen characters of what was sent", async () => {
    const bait = "A".repeat(5_000)
    for (const body of [
      { value: bait },
      { value: "1", [bait]: 1 },
      { value: "1", note: 5, [`${bait}x`]: [bait] }
    ]) {
      const res = await fetch(`${base}/v1/echo`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body)
      })
      expect(res.status).toBe(400)
      const { error, code } = (await res.json()) as { error: string; code: string }
      expect(code).toBe("bad_request")
      expect(error).not.toContain("A".repeat(41))
      expect(error.length).toBeLessThan(300)
    }
  })

  it("a field the body does not declare is 400 bad_request naming it", async () => {
    const res = await fetch(`${base}/v1/echo`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ value: "1", contests: true })
    })
    expect(res.status).toBe(400)
    const { error, code } = (await res.json()) as { error: string; code: string }
    expect(code).toBe("bad_request")
    expect(error).toContain("contests")
  })
})

describe("slow clients", () => {
  it("headers that never finish are answered 408 and the connection closed", async () => {
    const answer = await raw(base, ["POST /v1/echo HTTP/1.1\r\nHost: x\r\n"], 5_000)
    expect(answer.closed).toBe(true)
    expect(answer.status).toBe(408)
    expect(JSON.parse(answer.body)).toMatchObject({ code: "bad_request" })
    expect(answer.elapsedMs).toBeLessThan(4_000)
  })

  it("a body that stops mid-way is answered 408 and the connection closed", async () => {
    const head =
      "POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    const answer = await raw(base, [head, '{"value":'], 5_000)
    expect(answer.closed).toBe(true)
    expect(answer.elapsedMs).toBeLessThan(4_000)
  })

  it("counts them by reason, and malformed requests too", async () => {
    const malformed = await raw(base, ["NOT HTTP AT ALL\r\n\r\n"])
    expect(malformed.status).toBe(400)
    expect(JSON.parse(malformed.body)).toMatchObject({ code: "bad_request" })
    const text = await metricsText()
    expect(text).toMatch(/http_client_errors_total\{reason="timeout"\} [1-9]/)
    expect(text).toMatch(/http_client_errors_total\{reason="malformed"\} [1-9]/)
  })

  it("a client that keeps sending in time is served", async () => {
    const body = '{"value":"7"}'
    const head = `POST /v1/echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`
    const answer = await raw(base, [head, 100, body.slice(0, 5), 100, body.slice(5)])
    expect(answer.status).toBe(200)
    expect(JSON.parse(answer.body)).toEqual({ value: "7" })
  })
})

describe("HTTP details", () => {
  const expectJsonRefusal = (answer: RawAnswer, status: number) => {
    expect({ status: answer.status, type: answer.headers["content-type"] }).toEqual({
      status,
      type: "application/json"
    })
    expect(JSON.parse(answer.body)).toEqual({ error: expect.any(String), code: "bad_request" })
  }
  const echo = '{"value":"1"}'
  const post = (headers: string, body: string) =>
    `POST /v1/echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n${headers}\r\n${body}`

  it("a body sent with Content-Encoding is 415, not read as if it were plain", async () => {
    for (const coding of ["gzip", "deflate", "br", "GZIP"]) {
      const answer = await raw(base, [
        post(`Content-Encoding: ${coding}\r\nContent-Length: ${echo.length}\r\n`, echo)
      ])
      expectJsonRefusal(answer, 415)
    }
    // `identity` is no coding at all.
    const plain = await raw(base, [
      post(`Content-Encoding: identity\r\nContent-Length: ${echo.length}\r\n`, echo)
    ])
    expect(plain.status).toBe(200)
  })

  it("a body with a transfer coding other than chunked is 415; plain chunked is read", async () => {
    const chunked = `${echo.length.toString(16)}\r\n${echo}\r\n0\r\n\r\n`
    expectJsonRefusal(await raw(base, [post("Transfer-Encoding: gzip, chunked\r\n", chunked)]), 415)
    expectJsonRefusal(await raw(base, [post("Transfer-Encoding: deflate,chunked\r\n", chunked)]), 415)
    const plain = await raw(base, [post("Transfer-Encoding: chunked\r\n", chunked)])
    expect(plain.status).toBe(200)
    expect(JSON.parse(plain.body)).toEqual({ value: "1" })
  })

  it("an Expect other than 100-continue is 417 with the JSON error body", async () => {
    const answer = await raw(base, [post(`Expect: 200-ok\r\nContent-Length: ${echo.length}\r\n`, echo)])
    expectJsonRefusal(answer, 417)
    expect(answer.closed).toBe(true)
    const continued = await raw(base, [
      post(`Expect: 100-continue\r\nContent-Length: ${echo.length}\r\n`, ""),
      100,
      echo
    ])
    expect(continued.body).toContain('{"value":"1"}')
  })

  it("a request line without a version is 400, not answered as HTTP/0.9", async () => {
    for (const line of ["GET /v1/quote\r\n\r\n", "GET /v1/quote\r\nHost: x\r\n\r\n"]) {
      const answer = await raw(base, [line])
      expectJsonRefusal(answer, 400)
      expect(answer.closed).toBe(true)
    }
  })

  it("a version other than HTTP/1.0 and HTTP/1.1 is 400", async () => {
    expectJsonRefusal(await raw(base, ["GET /v1/quote HTTP/2.0\r\nHost: x\r\n\r\n"]), 400)
    expect((await raw(base, ["GET /v1/quote HTTP/1.0\r\n\r\n"])).status).toBe(200)
  })

  it("an HTTP/1.1 request without Host is 400 with the JSON error body", async () => {
    expectJsonRefusal(await raw(base, ["GET /v1/quote HTTP/1.1\r\nConnection: close\r\n\r\n"]), 400)
  })

  it("counts what the server answered itself by reason", async () => {
    await raw(base, [post(`Expect: 200-ok\r\nContent-Length: ${echo.length}\r\n`, echo)])
    expect(await metricsText()).toMatch(/http_client_errors_total\{reason="expectation"\} [1-9]/)
  })

  it("an integer beyond 2^53 anywhere in a body is 400 quoting its digits as sent", async () => {
    for (const [literal, path] of [
      ["9007199254740993", "nested"],
      ["-90071992547409934444", "nested"],
      ["123456789012345678901234567890", "nested.deep.1"],
      ["1e300", "nested"],
      ["1E400", "nested"]
    ] as const) {
      const nested = path === "nested" ? literal : `{"deep":[1,${literal}]}`
      const res = await fetch(`${base}/v1/echo`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: `{"value":"1","note":"12345678901234567890","nested":${nested}}`
      })
      expect(res.status, literal).toBe(400)
      const { error, code } = (await res.json()) as { error: string; code: string }
      expect(code).toBe("bad_request")
      expect(error, literal).toContain(`${path}: ${literal} `)
    }
  })

  it("safe integers, fractions and long digit strings are taken", async () => {
    for (const nested of [
      "9007199254740991",
      "-9007199254740991",
      "0.5",
      '"90071992547409934444"',
      "1.5e3"
    ]) {
      const res = await fetch(`${base}/v1/echo`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: `{"value":"1","nested":${nested}}`
      })
      expect(res.status, nested).toBe(200)
    }
  })
})
