/**
 * The chain client's JSON-RPC transport: a viem `custom` transport whose requests are POSTs over
 * `node:http(s)` with keep-alive connections, answered with the errors viem's `http` transport
 * throws for the same answers (`RpcRequestError`, `HttpRequestError`, `TimeoutError`,
 * `ResponseBodyTooLargeError`, with the same fields), so viem's request layer and
 * src/chain/errors.ts read them alike (test/chain/rpcTransport.test.ts compares both transports
 * answer by answer). viem's `http` transport builds around each call a timeout promise, abort
 * signals, a `Headers` per header source and a `fetch`-shaped response, and Node's `fetch` web
 * streams and a `Request` on top: together the largest single cost of a relayed claim after its
 * cryptography (bench/PROFILE.md).
 *
 * What viem relies on holds: a call ends at `timeoutMs` (reading the answer included) with
 * `TimeoutError`; an abort of the caller's signal ends it with the signal's reason; an answer over
 * `maxBodyBytes` (after decompression) is `ResponseBodyTooLargeError` before its bytes are kept,
 * which the indexer reads as a range too large. Compressed answers (gzip, deflate, br) are
 * accepted and decoded, as hosted RPCs compress large logs. Credentials in the URL go as basic
 * authorization, never in the request line. Redirects are not followed: a JSON-RPC endpoint
 * answers where it is configured.
 */
import http from "node:http"
import https from "node:https"
import type { Readable } from "node:stream"
import { createBrotliDecompress, createGunzip, createInflate } from "node:zlib"
import {
  type CustomTransport,
  custom,
  HttpRequestError,
  ResponseBodyTooLargeError,
  RpcRequestError,
  stringify,
  TimeoutError
} from "viem"

/** viem's own default cap on an RPC answer. */
const DEFAULT_MAX_RPC_BODY_BYTES = 10 * 1024 * 1024

export interface RpcTransportOptions {
  /** Per call, reading the answer included. */
  readonly timeoutMs: number
  readonly maxBodyBytes?: number | undefined
}

/** An answer as it came: status, headers and the whole body, decoded. */
interface Answer {
  readonly status: number
  readonly statusText: string
  readonly rawHeaders: ReadonlyArray<string>
  readonly contentType: string | undefined
  readonly text: string
}

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

const headersOf = (answer: Answer): Headers => {
  const headers = new Headers()
  const raw = answer.rawHeaders
  for (let i = 0; i + 1 < raw.length; i += 2) headers.append(raw[i] as string, raw[i + 1] as string)
  return headers
}

/** A JSON-RPC error object, as viem's `http` transport recognises one. */
const isRpcError = (data: unknown): data is { readonly error: { code: number; message: string } } => {
  const error = (data as { error?: { code?: unknown; message?: unknown } } | null | undefined)?.error
  return typeof error?.code === "number" && typeof error?.message === "string"
}

/** Rejection of a call that ran out of time, replaced by viem's `TimeoutError`. */
const timedOut = new Error("timed out")

export const rpcTransport = (url: string, options: RpcTransportOptions): CustomTransport => {
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_RPC_BODY_BYTES
  const target = new URL(url)
  const secure = target.protocol === "https:"
  if (!secure && target.protocol !== "http:")
    throw new TypeError(`unsupported RPC URL scheme ${target.protocol}`)
  const authorization =
    target.username === ""
      ? undefined
      : `Basic ${Buffer.from(`${decodeURIComponent(target.username)}:${decodeURIComponent(target.password)}`).toString("base64")}`
  target.username = ""
  target.password = ""
  // The URL errors name, without credentials (as viem's `http` transport names it).
  const shownUrl = target.toString()
  // An idle connection is closed after 4 s, as fetch's pool closes it; the most recently used
  // first, so an idle pool shrinks to what the load needs.
  const agent = new (secure ? https : http).Agent({ keepAlive: true, scheduling: "lifo", timeout: 4_000 })
  const requestOptions = {
    protocol: target.protocol,
    // An IPv6 literal without its brackets.
    hostname: target.hostname.startsWith("[") ? target.hostname.slice(1, -1) : target.hostname,
    port: target.port,
    path: `${target.pathname}${target.search}`,
    method: "POST",
    agent
  }

  const post = (body: string, signal: AbortSignal | undefined): Promise<Answer> =>
    new Promise<Answer>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason)
        return
      }
      let settled = false
      let timer: ReturnType<typeof setTimeout> | undefined
      const settle = (outcome: () => void) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        signal?.removeEventListener("abort", onAbort)
        outcome()
      }
      const fail = (error: unknown) => settle(() => reject(error))
      const headers: http.OutgoingHttpHeaders = {
        "content-type": "application/json",
        "accept-encoding": "gzip, deflate, br",
        "content-length": Buffer.byteLength(body)
      }
      if (authorization !== undefined) headers.authorization = authorization
      const request = (secure ? https : http).request({ ...requestOptions, headers })
      timer = setTimeout(() => {
        fail(timedOut)
        request.destroy()
      }, options.timeoutMs)
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
          const bytes = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks)
          // A leading byte order mark is dropped, as fetch's text() drops it.
          const bom = bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0
          const text = bytes.toString("utf8", bom)
          settle(() =>
            resolve({
              status: response.statusCode ?? 0,
              statusText: response.statusMessage ?? "",
              rawHeaders: response.rawHeaders,
              contentType: response.headers["content-type"],
              text
            })
          )
        })
      })
      request.end(body)
    })

  let ids = 0
  // What viem's `http` transport does with an answer (viem/utils/rpc/http.ts and
  // viem/clients/transports/http.ts), one call at a time.
  const request = async (
    { method, params }: { readonly method: string; readonly params?: unknown },
    callOptions?: { readonly signal?: AbortSignal | undefined }
  ): Promise<unknown> => {
    const signal = callOptions?.signal
    const body = { jsonrpc: "2.0", id: ++ids, method, params }
    let data: unknown
    try {
      const answer = await post(stringify(body), signal)
      const ok = answer.status >= 200 && answer.status < 300
      if (answer.contentType?.startsWith("application/json")) data = JSON.parse(answer.text)
      else {
        try {
          data = JSON.parse(answer.text || "{}")
        } catch (error) {
          if (ok) throw error
          data = { error: answer.text }
        }
      }
      if (!ok) {
        const headers = headersOf(answer)
        // A valid JSON-RPC error keeps its class, with the status and headers.
        if (isRpcError(data))
          throw new RpcRequestError({
            body,
            error: data.error,
            headers,
            status: answer.status,
            url: shownUrl
          })
        throw new HttpRequestError({
          body,
          // An answer of `null` throws here, as in viem: the error then has no status.
          details: stringify((data as { error?: unknown }).error) || answer.statusText,
          headers,
          status: answer.status,
          url: shownUrl
        })
      }
    } catch (error) {
      if (signal?.aborted) throw signal.reason
      if (error === timedOut) throw new TimeoutError({ body, url: shownUrl })
      if (
        error instanceof HttpRequestError ||
        error instanceof ResponseBodyTooLargeError ||
        error instanceof RpcRequestError ||
        error instanceof TimeoutError
      )
        throw error
      throw new HttpRequestError({ body, cause: error as Error, url: shownUrl })
    }
    // An answer that is no object (`null`) fails here, outside the transport's errors, as in viem.
    const answered = data as { readonly error?: { code: number; message: string }; readonly result?: unknown }
    if (answered.error) throw new RpcRequestError({ body, error: answered.error, url: shownUrl })
    return answered.result
  }

  // Retries are the chain client's own, so viem must not add its own on top.
  return custom({ request }, { key: "rpc", name: "JSON-RPC over HTTP", retryCount: 0 })
}
