/**
 * The HTTP shell both services share, exercised through a real Node server: body limit, JSON
 * checks, the error renderer, metrics and the redacted access log.
 */
import { request as httpRequest } from "node:http"
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Effect, HashMap, Layer, Logger, ManagedRuntime, Option, Redacted, Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { FeeTooLow, RateLimited, Wire } from "../../schema/errors.js"
import { Uint256 } from "../../schema/primitives.js"
import { handleMetrics } from "../../src/http/MetricsEndpoint.js"
import { serviceDocument } from "../../src/http/openapi.js"
import { metricsEndpoint } from "../../src/http/operatorApi.js"
import { serveApi, serverUrl } from "../../src/http/server.js"

const MAX_BODY_BYTES = 64 * 1024
const METRICS_TOKEN = "operator-token-for-tests"
const SECRET_IN_DEFECT = "0xdeadbeefcafe-secret-value"

class ShellGroup extends HttpApiGroup.make("shell")
  .add(
    HttpApiEndpoint.post("echo", "/v1/echo")
      .setPayload(Schema.Struct({ value: Uint256, pad: Schema.optional(Schema.String) }))
      .addSuccess(Schema.Struct({ value: Uint256 }))
  )
  .add(HttpApiEndpoint.get("boom", "/v1/boom").addSuccess(Schema.Struct({})))
  .add(HttpApiEndpoint.get("refuse", "/v1/refuse").addSuccess(Schema.Struct({})).addError(Wire.FeeTooLow))
  .add(HttpApiEndpoint.get("limited", "/v1/limited").addSuccess(Schema.Struct({})).addError(Wire.RateLimited))
  .add(
    HttpApiEndpoint.get("item", "/v1/items/:id")
      .setPath(Schema.Struct({ id: Schema.String }))
      .addSuccess(Schema.Struct({}))
  )
  .add(metricsEndpoint) {}

class ShellApi extends HttpApi.make("shell")
  .add(ShellGroup)
  .addError(Wire.BadRequest)
  .addError(Wire.PayloadTooLarge)
  .annotateContext(serviceDocument({ title: "shell", description: "test" })) {}

const ShellLive = HttpApiBuilder.group(ShellApi, "shell", (handlers) =>
  handlers
    .handle("echo", ({ payload }) => Effect.succeed({ value: payload.value }))
    .handle("boom", () => Effect.die(new Error(`exploded while handling ${SECRET_IN_DEFECT}`)))
    .handle("refuse", () => Effect.fail(new FeeTooLow({ message: "fee below the current quote" })))
    .handle("limited", () => Effect.fail(new RateLimited({ message: "slow down", retryAfterSeconds: 6.2 })))
    .handle("item", () => Effect.succeed({}))
    .handle("metrics", handleMetrics(Option.some(Redacted.make(METRICS_TOKEN))))
)

const logLines: Array<string> = []
const capturingLogger = Logger.make(({ message, annotations }) => {
  const fields = HashMap.toEntries(annotations)
    .map(([k, v]) => `${k}=${String(v)}`)
    .join(" ")
  logLines.push(`${String(message)} ${fields}`)
})

const runtime = ManagedRuntime.make(
  serveApi(ShellApi, ShellLive, { host: "127.0.0.1", port: 0, maxBodyBytes: MAX_BODY_BYTES }).pipe(
    Layer.provide(Logger.replace(Logger.defaultLogger, capturingLogger))
  )
)
let base = ""

beforeAll(async () => {
  base = await runtime.runPromise(serverUrl)
})
afterAll(() => runtime.dispose())

const postJson = (path: string, body: string, headers: Record<string, string> = {}) =>
  fetch(`${base}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body
  })

/** A chunked upload: no Content-Length, so the limit must be enforced while streaming. */
const postChunked = (path: string, chunks: ReadonlyArray<string>) =>
  new Promise<{ status: number; body: string }>((resolve, reject) => {
    const url = new URL(`${base}${path}`)
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: "POST",
        headers: { "content-type": "application/json" }
      },
      (res) => {
        let body = ""
        res.setEncoding("utf8")
        res.on("data", (c: string) => {
          body += c
        })
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }))
      }
    )
    req.on("error", reject)
    const write = (i: number) => {
      if (i === chunks.length) return req.end()
      if (!req.write(chunks[i])) req.once("drain", () => write(i + 1))
      else setImmediate(() => write(i + 1))
    }
    write(0)
  })

const bodyOfSize = (bytes: number) => {
  const skeleton = JSON.stringify({ value: "1", pad: "" })
  return JSON.stringify({ value: "1", pad: "x".repeat(bytes - skeleton.length) })
}

describe("request bodies", () => {
  it("accepts a JSON body of exactly the limit", async () => {
    const body = bodyOfSize(MAX_BODY_BYTES)
    expect(Buffer.byteLength(body)).toBe(MAX_BODY_BYTES)
    const res = await postJson("/v1/echo", body)
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual({ value: "1" })
  })

  it("refuses a 65 KiB body with 413 bad_request", async () => {
    const res = await postJson("/v1/echo", bodyOfSize(65 * 1024))
    expect(res.status).toBe(413)
    const body = await res.json()
    expect(body).toEqual({ error: expect.any(String), code: "bad_request" })
  })

  it("refuses an oversized chunked body while it streams", async () => {
    const chunk = "x".repeat(16 * 1024)
    const res = await postChunked("/v1/echo", ['{"value":"1","pad":"', ...Array(8).fill(chunk), '"}'])
    expect(res.status).toBe(413)
    expect(JSON.parse(res.body)).toMatchObject({ code: "bad_request" })
  })

  it("accepts a small chunked body", async () => {
    const res = await postChunked("/v1/echo", ['{"value":', '"42"}'])
    expect(res.status).toBe(200)
    expect(JSON.parse(res.body)).toEqual({ value: "42" })
  })

  it("refuses malformed JSON with 400 bad_request", async () => {
    const res = await postJson("/v1/echo", '{"value": "1"')
    expect(res.status).toBe(400)
    expect(await res.json()).toEqual({ error: "request body is not valid JSON", code: "bad_request" })
  })

  it("refuses a body that is not a JSON object", async () => {
    const res = await postJson("/v1/echo", '"1"')
    expect(res.status).toBe(400)
    expect(await res.json()).toMatchObject({ code: "bad_request" })
  })

  it("refuses a non-JSON content type", async () => {
    const res = await postJson("/v1/echo", '{"value":"1"}', { "content-type": "text/plain" })
    expect(res.status).toBe(400)
    expect(await res.json()).toEqual({ error: "Content-Type must be application/json", code: "bad_request" })
  })

  it("accepts a JSON content type with parameters", async () => {
    const res = await postJson("/v1/echo", '{"value":"7"}', {
      "content-type": "application/json; charset=utf-8"
    })
    expect(res.status).toBe(200)
  })

  it("answers a schema violation with 400 bad_request naming the field", async () => {
    const res = await postJson("/v1/echo", JSON.stringify({ value: (2n ** 256n).toString() }))
    expect(res.status).toBe(400)
    const body = (await res.json()) as { error: string; code: string }
    expect(Object.keys(body).sort()).toEqual(["code", "error"])
    expect(body.code).toBe("bad_request")
    expect(body.error).toContain("value")
  })
})

describe("errors", () => {
  it("renders a typed error with its status and code", async () => {
    const res = await fetch(`${base}/v1/refuse`)
    expect(res.status).toBe(402)
    expect(await res.json()).toEqual({ error: "fee below the current quote", code: "fee_too_low" })
  })

  it("sends Retry-After with rate_limited", async () => {
    const res = await fetch(`${base}/v1/limited`)
    expect(res.status).toBe(429)
    expect(res.headers.get("retry-after")).toBe("7")
    expect(await res.json()).toEqual({ error: "slow down", code: "rate_limited" })
  })

  it("turns a defect into 500 internal with nothing from inside", async () => {
    const res = await fetch(`${base}/v1/boom`)
    expect(res.status).toBe(500)
    const text = await res.text()
    expect(JSON.parse(text)).toEqual({ error: "internal error", code: "internal" })
    expect(text).not.toContain("secret")
    expect(text).not.toContain("at ")
  })

  it("answers an unknown route with 404 not_found, whatever its body", async () => {
    const res = await postJson("/v1/nowhere", "{not json")
    expect(res.status).toBe(404)
    expect(await res.json()).toMatchObject({ code: "not_found" })
  })
})

describe("metrics", () => {
  it("needs the bearer token", async () => {
    expect((await fetch(`${base}/v1/metrics`)).status).toBe(401)
    const wrong = await fetch(`${base}/v1/metrics`, { headers: { authorization: "Bearer nope" } })
    expect(wrong.status).toBe(401)
    const prefix = await fetch(`${base}/v1/metrics`, {
      headers: { authorization: `Bearer ${METRICS_TOKEN.slice(0, -1)}` }
    })
    expect(prefix.status).toBe(401)
  })

  it("serves Prometheus text labelled by route template", async () => {
    await fetch(`${base}/v1/items/0x1111111111111111111111111111111111111111?who=0x2222`)
    const res = await fetch(`${base}/v1/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toContain("text/plain")
    const text = await res.text()
    expect(text).toContain("# TYPE http_requests_total counter")
    expect(text).toMatch(/http_requests_total\{[^}]*route="\/v1\/items\/:id"[^}]*status="200"[^}]*\} \d+/)
    expect(text).toContain("http_request_duration_seconds_bucket")
    expect(text).not.toContain("0x1111")
    expect(text).not.toContain("0x2222")
  })
})

describe("access log", () => {
  it("records method, route template, status and duration only", async () => {
    logLines.length = 0
    await fetch(`${base}/v1/items/0x3333333333333333333333333333333333333333?token=abc123`, {
      headers: { "x-forwarded-for": "203.0.113.9" }
    })
    await postJson("/v1/echo", JSON.stringify({ value: "987654321", pad: "0x4444" }))
    await new Promise((r) => setTimeout(r, 50))
    const requests = logLines.filter((l) => l.startsWith("request "))
    expect(requests.length).toBeGreaterThanOrEqual(2)
    for (const line of logLines) {
      for (const leaked of ["0x3333", "abc123", "203.0.113.9", "127.0.0.1", "0x4444", "987654321"]) {
        expect(line).not.toContain(leaked)
      }
    }
    expect(requests.some((l) => l.includes("route=/v1/items/:id") && l.includes("status=200"))).toBe(true)
    for (const line of requests) {
      const keys = line
        .split(" ")
        .slice(1)
        .map((kv) => kv.split("=")[0])
        .sort()
      expect(keys).toEqual(["duration_ms", "method", "route", "status"])
    }
  })
})

describe("OpenAPI document", () => {
  it("is served and shows the service's own error bodies", async () => {
    const res = await fetch(`${base}/v1/openapi.json`)
    expect(res.status).toBe(200)
    const spec = (await res.json()) as {
      info: { title: string }
      components: { schemas: Record<string, unknown> }
    }
    expect(spec.info.title).toBe("shell")
    expect(Object.keys(spec.components.schemas)).not.toContain("HttpApiDecodeError")
    expect(spec.components.schemas.BadRequest).toMatchObject({
      properties: { code: { enum: ["bad_request"] } }
    })
    expect(JSON.stringify(spec)).not.toContain("HttpApiDecodeError")
  })
})
