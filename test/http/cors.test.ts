/**
 * Cross-origin calls from browser pages (src/http/cors.ts, `CORS_ALLOWED_ORIGINS`): off by default,
 * so a page of any origin gets no allow header and its preflight is refused as any OPTIONS; a listed
 * origin's preflight is answered 204 and each of its answers, refusals included, names it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { serverUrl } from "../../src/http/server.js"
import { embeddedAttestor, offlineAttestorEnv } from "../support/embeddedAttestor.js"

const env = {
  ...offlineAttestorEnv,
  HOST: "127.0.0.1",
  PORT: "0"
}
const PAGE = "http://localhost:5173"

const lines: Array<string> = []
const closed = embeddedAttestor(env, lines)
const open = embeddedAttestor({ ...env, CORS_ALLOWED_ORIGINS: `${PAGE}, https://wallet.example` }, lines)
let closedUrl = ""
let openUrl = ""
beforeAll(async () => {
  closedUrl = await closed.runPromise(serverUrl)
  openUrl = await open.runPromise(serverUrl)
})
afterAll(async () => {
  await Promise.all([closed.dispose(), open.dispose()])
})

const preflight = (url: string, origin: string) =>
  fetch(`${url}/v1/escrows`, {
    method: "OPTIONS",
    headers: {
      origin,
      "access-control-request-method": "POST",
      "access-control-request-headers": "content-type"
    }
  })

const escrows = (url: string, origin: string) =>
  fetch(`${url}/v1/escrows`, {
    method: "POST",
    headers: { origin, "content-type": "application/json" },
    body: JSON.stringify({ session: "x" })
  })

describe("CORS", () => {
  it("off by default: no allow header, the preflight refused 405", async () => {
    const pre = await preflight(closedUrl, PAGE)
    expect(pre.status).toBe(405)
    expect(pre.headers.get("access-control-allow-origin")).toBeNull()
    const res = await escrows(closedUrl, PAGE)
    expect(res.status).toBe(400)
    expect(res.headers.get("access-control-allow-origin")).toBeNull()
  })

  it("a listed origin: its preflight answered 204, its refusals readable by the page", async () => {
    const pre = await preflight(openUrl, PAGE)
    expect(pre.status).toBe(204)
    expect(pre.headers.get("access-control-allow-origin")).toBe(PAGE)
    expect(pre.headers.get("access-control-allow-methods")).toContain("POST")
    expect(pre.headers.get("access-control-allow-headers")).toContain("content-type")
    expect(pre.headers.get("access-control-allow-credentials")).toBeNull()
    const res = await escrows(openUrl, PAGE)
    expect(res.status).toBe(400)
    expect(res.headers.get("access-control-allow-origin")).toBe(PAGE)
    expect(await res.json()).toMatchObject({ code: "bad_request" })
    const info = await fetch(`${openUrl}/v1/info`, { headers: { origin: "https://wallet.example" } })
    expect(info.headers.get("access-control-allow-origin")).toBe("https://wallet.example")
  })

  it("a preflight that comes with a body is refused 400 and its connection closed, not drained", async () => {
    const { request } = await import("node:http")
    const answer = await new Promise<{ status: number; connection: string | undefined; body: string }>(
      (resolve, reject) => {
        const req = request(`${openUrl}/v1/escrows`, {
          method: "OPTIONS",
          headers: { origin: PAGE, "access-control-request-method": "POST", "transfer-encoding": "chunked" }
        })
        req.on("error", reject)
        req.on("response", (res) => {
          let body = ""
          res.on("data", (chunk) => {
            body += chunk
          })
          res.on("end", () =>
            resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, body })
          )
        })
        // A body that would go on for as long as the server reads it.
        req.write("x".repeat(64 * 1024))
      }
    )
    expect(answer.status).toBe(400)
    expect(answer.connection).toBe("close")
    expect(JSON.parse(answer.body)).toMatchObject({ code: "bad_request" })
  })

  it("adds Origin to the Vary a route sends itself, which would otherwise replace it", async () => {
    const { createServer } = await import("node:http")
    const { corsStep } = await import("../../src/http/cors.js")
    const step = corsStep([PAGE], () => {})
    // A route answering as /v1/accounts does: its own Vary for a gzip-able body.
    const server = createServer((request, response) => {
      if (step(request, response)) return
      response.writeHead(200, { vary: "Accept-Encoding", "content-type": "text/plain" })
      response.end("body")
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
    try {
      const { port } = server.address() as { port: number }
      const answer = await fetch(`http://127.0.0.1:${port}/`, { headers: { origin: PAGE } })
      expect(answer.headers.get("vary")).toBe("Accept-Encoding, Origin")
      expect(answer.headers.get("access-control-allow-origin")).toBe(PAGE)
      // Without an Origin the answer varies by it all the same: a cache keeps the two apart.
      expect((await fetch(`http://127.0.0.1:${port}/`)).headers.get("vary")).toBe("Accept-Encoding, Origin")
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  })

  it("an origin not listed gets nothing", async () => {
    const pre = await preflight(openUrl, "http://localhost:5174")
    expect(pre.status).toBe(405)
    expect(pre.headers.get("access-control-allow-origin")).toBeNull()
    const res = await escrows(openUrl, "https://evil.example")
    expect(res.headers.get("access-control-allow-origin")).toBeNull()
  })

  it("an entry that is not an origin stops start-up, named", async () => {
    const bad = embeddedAttestor({ ...env, CORS_ALLOWED_ORIGINS: "https://wallet.example/app" }, lines)
    await expect(bad.runPromise(serverUrl)).rejects.toThrow(/CORS_ALLOWED_ORIGINS/)
    await bad.dispose()
  })
})
