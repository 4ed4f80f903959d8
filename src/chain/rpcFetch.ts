/**
 * The `fetchFn` of the chain client's viem transports: one JSON-RPC POST over `node:http(s)` with
 * keep-alive connections, its answer read whole, then handed to viem as a `Response` it reads
 * with `text()`. Node's `fetch` builds web streams, a `Request` and abort signals around every call,
 * the largest single cost of a relayed claim after its cryptography (bench/PROFILE.md).
 *
 * What viem relies on holds: the answer's status, headers and text; an abort of `signal` (viem's
 * per-request timeout) ends the request and rejects with its reason; an answer over
 * `maxBodyBytes` (after decompression) rejects with viem's `ResponseBodyTooLargeError`, before its
 * bytes are kept, which the indexer reads as a range too large (src/chain/errors.ts). Compressed
 * answers (gzip, deflate, br) are accepted and decoded, as hosted RPCs compress large logs.
 * Redirects are not followed: a JSON-RPC endpoint answers where it is configured.
 */
import http from "node:http"
import https from "node:https"
import type { Readable } from "node:stream"
import { createBrotliDecompress, createGunzip, createInflate } from "node:zlib"
import { ResponseBodyTooLargeError } from "viem"

/** viem's own default cap on an RPC answer. */
export const DEFAULT_MAX_RPC_BODY_BYTES = 10 * 1024 * 1024

export type RpcFetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>

const decoded = (response: http.IncomingMessage): Readable => {
  switch (response.headers["content-encoding"]?.trim().toLowerCase()) {
    case "gzip":
    case "x-gzip":
      return response.pipe(createGunzip())
    case "deflate":
      return response.pipe(createInflate())
    case "br":
      return response.pipe(createBrotliDecompress())
    default:
      return response
  }
}

const headersOf = (response: http.IncomingMessage): Headers => {
  const headers = new Headers()
  const raw = response.rawHeaders
  for (let i = 0; i + 1 < raw.length; i += 2) headers.append(raw[i] as string, raw[i + 1] as string)
  return headers
}

/** What viem reads of an answer (`ok`, `status`, `statusText`, `headers`, `text()`). */
const answerOf = (response: http.IncomingMessage, text: string): Response =>
  ({
    ok: response.statusCode !== undefined && response.statusCode >= 200 && response.statusCode < 300,
    status: response.statusCode ?? 0,
    statusText: response.statusMessage ?? "",
    headers: headersOf(response),
    text: () => Promise.resolve(text)
  }) as unknown as Response

const requestHeaders = (init: RequestInit | undefined, body: string): http.OutgoingHttpHeaders => {
  const headers: http.OutgoingHttpHeaders = { "accept-encoding": "gzip, deflate, br" }
  const given = init?.headers
  // viem passes a plain object; anything else through `Headers`.
  if (given === undefined || given instanceof Headers || Array.isArray(given))
    new Headers(given).forEach((value, key) => {
      headers[key] = value
    })
  else for (const key in given) headers[key.toLowerCase()] = String((given as Record<string, string>)[key])
  headers["content-length"] = Buffer.byteLength(body)
  return headers
}

/**
 * A `fetchFn` with its own keep-alive agents (most recently used connection first, so an idle
 * pool shrinks to what the load needs). `input` is parsed again only when it changes.
 */
export const makeRpcFetch = (options: { readonly maxBodyBytes?: number } = {}): RpcFetch => {
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_RPC_BODY_BYTES
  // An idle connection is closed after 4 s, as fetch's pool closes it.
  const pool = { keepAlive: true, scheduling: "lifo", timeout: 4_000 } as const
  const agents = { http: new http.Agent(pool), https: new https.Agent(pool) }
  let lastInput: string | undefined
  let lastUrl: URL | undefined
  const urlOf = (input: string | URL | Request): URL => {
    if (input instanceof URL) return input
    const text = typeof input === "string" ? input : input.url
    if (text !== lastInput || lastUrl === undefined) {
      lastUrl = new URL(text)
      lastInput = text
    }
    return lastUrl
  }

  return (input, init) =>
    new Promise<Response>((resolve, reject) => {
      const signal = init?.signal ?? undefined
      if (signal?.aborted) {
        reject(signal.reason)
        return
      }
      const url = urlOf(input)
      const body = typeof init?.body === "string" ? init.body : ""
      const secure = url.protocol === "https:"
      if (!secure && url.protocol !== "http:") {
        reject(new TypeError(`unsupported RPC URL scheme ${url.protocol}`))
        return
      }
      let settled = false
      const settle = (outcome: () => void) => {
        if (settled) return
        settled = true
        signal?.removeEventListener("abort", onAbort)
        outcome()
      }
      const fail = (error: unknown) => settle(() => reject(error))
      const request = (secure ? https : http).request({
        protocol: url.protocol,
        // An IPv6 literal without its brackets.
        hostname: url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname,
        port: url.port,
        path: `${url.pathname}${url.search}`,
        method: init?.method ?? "POST",
        headers: requestHeaders(init, body),
        agent: secure ? agents.https : agents.http
      })
      function onAbort() {
        fail(signal?.reason)
        request.destroy()
      }
      signal?.addEventListener("abort", onAbort, { once: true })
      // Node's message names the host and port; a failure is logged by its code alone.
      request.on("error", (error: NodeJS.ErrnoException) =>
        fail(new Error(`no answer from the RPC (${error.code ?? error.name})`))
      )
      request.on("response", (response) => {
        const tooLarge = (size: number) => {
          fail(new ResponseBodyTooLargeError({ maxSize: maxBodyBytes, size }))
          response.destroy()
        }
        const declared = Number(response.headers["content-length"])
        if (response.headers["content-encoding"] === undefined && declared > maxBodyBytes) {
          tooLarge(declared)
          return
        }
        const chunks: Array<Buffer> = []
        let size = 0
        const stream = decoded(response)
        stream.on("data", (chunk: Buffer) => {
          size += chunk.length
          if (size > maxBodyBytes) {
            tooLarge(size)
            if (stream !== response) stream.destroy()
            return
          }
          chunks.push(chunk)
        })
        stream.on("error", fail)
        if (stream !== response) response.on("error", fail)
        response.on("close", () => {
          if (!response.complete) fail(new Error("the connection closed before the RPC answer was complete"))
        })
        stream.on("end", () => {
          const text =
            chunks.length === 1
              ? (chunks[0] as Buffer).toString("utf8")
              : Buffer.concat(chunks).toString("utf8")
          settle(() => resolve(answerOf(response, text)))
        })
      })
      request.end(body)
    })
}
