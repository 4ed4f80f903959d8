/**
 * The chain client's JSON-RPC transport (src/chain/rpcTransport.ts) against a JSON-RPC server on
 * loopback that behaves as hosted RPCs do: keep-alive connections, compressed answers, credentials
 * in the URL, answers too large to keep, answers that never come, and every kind of refusal,
 * each read exactly as viem's own `http` transport reads it.
 */
import http from "node:http"
import type { AddressInfo, Socket } from "node:net"
import { brotliCompressSync, deflateSync, gzipSync } from "node:zlib"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { ResponseBodyTooLargeError, http as viemHttp } from "viem"
import {
  ChainClient,
  type ChainClientShape,
  ChainUnavailable,
  RpcRejected
} from "../../src/chain/ChainClient.js"
import { rpcTransport } from "../../src/chain/rpcTransport.js"
import { closedPort } from "./rpcProxy.js"

/** Refusals and oddities, each answered the way some node or gateway answers. */
const REFUSALS = {
  rpcError: [
    200,
    "application/json",
    '{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"nonce too low"}}'
  ],
  rpcErrorWithData: [
    200,
    "application/json",
    '{"jsonrpc":"2.0","id":1,"error":{"code":3,"message":"execution reverted","data":"0x08c379a0"}}'
  ],
  rpcErrorAs500: [
    500,
    "application/json",
    '{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"internal"}}'
  ],
  rateLimitedAs429: [429, "application/json", '{"error":"too many requests"}'],
  badGatewayText: [502, "text/plain", "Bad Gateway"],
  unavailableEmpty: [503, undefined, ""],
  forbiddenHtml: [403, "text/html", "<html>forbidden</html>"],
  okNotJson: [200, "text/plain", "not json"],
  okEmpty: [200, undefined, ""],
  okNull: [200, "application/json", "null"],
  badRequestNull: [400, "application/json", "null"],
  okWithByteOrderMark: [200, "application/json", '\ufeff{"jsonrpc":"2.0","id":1,"result":"0x2a"}'],
  okJsonAsText: [200, "text/plain", '{"jsonrpc":"2.0","id":1,"result":"0x2a"}'],
  okNoResult: [200, "application/json", '{"jsonrpc":"2.0","id":1}']
} as const satisfies Record<string, readonly [number, string | undefined, string]>

type Answer = "plain" | "gzip" | "deflate" | "br" | "huge" | "hugeChunked" | "never" | keyof typeof REFUSALS

let server: http.Server
let origin: string
let answer: Answer = "plain"
let connections = 0
const authorizations: Array<string | undefined> = []
const openSockets = new Set<Socket>()
/** The connections opened during the current test. */
const socketsOfTest: Array<Socket> = []

const resultOf = (method: string): unknown =>
  method === "eth_chainId" ? "0x7a69" : method === "eth_getLogs" ? [] : "0x10"

beforeAll(async () => {
  server = http.createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      authorizations.push(request.headers.authorization)
      const { id, method } = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
        id: number
        method: string
      }
      const body = JSON.stringify({ jsonrpc: "2.0", id, result: resultOf(method) })
      switch (answer) {
        case "plain":
          response.writeHead(200, { "content-type": "application/json" }).end(body)
          return
        case "gzip":
        case "deflate":
        case "br": {
          expect(request.headers["accept-encoding"]).toContain(answer)
          const compress = { gzip: gzipSync, deflate: deflateSync, br: brotliCompressSync }[answer]
          response
            .writeHead(200, { "content-type": "application/json", "content-encoding": answer })
            .end(compress(body))
          return
        }
        case "huge":
          response.writeHead(200, { "content-type": "application/json", "content-length": 11 * 1024 * 1024 })
          response.write(" ".repeat(1024))
          return
        case "hugeChunked": {
          response.writeHead(200, { "content-type": "application/json" })
          const block = " ".repeat(1024 * 1024)
          for (let i = 0; i < 11; i++) response.write(block)
          response.end(body)
          return
        }
        case "never":
          return
        default: {
          const [status, contentType, text] = REFUSALS[answer]
          response
            .writeHead(status, contentType === undefined ? {} : { "content-type": contentType })
            .end(text)
          return
        }
      }
    })
  })
  server.on("connection", (socket: Socket) => {
    connections++
    openSockets.add(socket)
    socketsOfTest.push(socket)
    socket.on("close", () => openSockets.delete(socket))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})

afterAll(async () => {
  for (const socket of openSockets) socket.destroy()
  await new Promise<void>((resolve) => server.close(() => resolve()))
})

beforeEach(() => {
  answer = "plain"
  connections = 0
  socketsOfTest.length = 0
  authorizations.length = 0
})

const withChain = <A, E>(
  rpcUrl: string,
  program: (chain: ChainClientShape) => Effect.Effect<A, E>,
  options: { readonly timeoutMs?: number; readonly retries?: number } = {}
): Effect.Effect<A, E> =>
  Effect.flatMap(ChainClient, program).pipe(
    Effect.provide(
      ChainClient.layer({ rpcUrl, timeoutMs: options.timeoutMs ?? 2_000, retries: options.retries ?? 0 })
    )
  )

describe("the chain client's RPC transport", () => {
  it.live("keeps one connection alive across sequential calls", () =>
    Effect.gen(function* () {
      const heads = yield* withChain(origin, (chain) =>
        Effect.forEach([1, 2, 3, 4, 5], () => chain.blockNumber)
      )
      expect(heads).toEqual([16n, 16n, 16n, 16n, 16n])
      expect(connections).toBe(1)
    })
  )

  it.live("reads a compressed answer: gzip, deflate or brotli", () =>
    Effect.gen(function* () {
      for (const encoding of ["gzip", "deflate", "br"] as const) {
        answer = encoding
        expect(yield* withChain(origin, (chain) => chain.chainId)).toBe(31337)
      }
    })
  )

  it.live("sends credentials given in the URL as basic authorization, not in the request line", () =>
    Effect.gen(function* () {
      const withCredentials = origin.replace("http://", "http://operator:s3cret@")
      expect(yield* withChain(withCredentials, (chain) => chain.chainId)).toBe(31337)
      expect(authorizations).toEqual([`Basic ${Buffer.from("operator:s3cret").toString("base64")}`])
    })
  )

  it.live("refuses an answer over the size limit as a range too large, declared or streamed", () =>
    Effect.gen(function* () {
      for (const oversized of ["huge", "hugeChunked"] as const) {
        answer = oversized
        const error = yield* Effect.flip(
          withChain(origin, (chain) => chain.getLogs({ fromBlock: 0n, toBlock: 1_000n }))
        )
        expect(error).toBeInstanceOf(RpcRejected)
        expect(error).toMatchObject({ operation: "eth_getLogs", kind: "range_too_large" })
      }
    })
  )

  it.live("stops reading at the limit and rejects with viem's error", () =>
    Effect.gen(function* () {
      answer = "hugeChunked"
      const { request } = rpcTransport(origin, { timeoutMs: 2_000, maxBodyBytes: 64 * 1024 })({})
      const error = yield* Effect.flip(
        Effect.tryPromise({ try: () => request({ method: "eth_chainId" }), catch: (cause) => cause })
      )
      expect(error).toBeInstanceOf(ResponseBodyTooLargeError)
      expect(error).toMatchObject({ maxSize: 64 * 1024 })
    })
  )

  it.live("ends a request whose answer never comes at the timeout, connection closed", () =>
    Effect.gen(function* () {
      answer = "never"
      const started = Date.now()
      const error = yield* Effect.flip(withChain(origin, (chain) => chain.chainId, { timeoutMs: 200 }))
      expect(error).toBeInstanceOf(ChainUnavailable)
      expect(error).toMatchObject({ reason: "request timed out" })
      expect(Date.now() - started).toBeLessThan(1_500)
      // The abandoned request's connection is not left open.
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 100)))
      expect(socketsOfTest.length).toBeGreaterThan(0)
      expect(socketsOfTest.every((socket) => socket.destroyed)).toBe(true)
    })
  )

  it.live("names a refused connection by its code, without the host or port", () =>
    Effect.gen(function* () {
      const port = yield* Effect.promise(closedPort)
      const error = yield* Effect.flip(withChain(`http://127.0.0.1:${port}`, (chain) => chain.chainId))
      expect(error).toBeInstanceOf(ChainUnavailable)
      expect(String((error as ChainUnavailable).reason)).toContain("ECONNREFUSED")
      expect(String((error as ChainUnavailable).reason)).not.toContain(String(port))
    })
  )

  it.live("reads every answer as viem's http transport does: the same result or the same error", () =>
    Effect.gen(function* () {
      const port = yield* Effect.promise(closedPort)
      // The error as viem's request layer and src/chain/errors.ts see it: its class, the fields
      // they read, and the classes of its causes.
      const described = (error: unknown) => {
        const causes: Array<string> = []
        for (let at = (error as Error).cause; at instanceof Error; at = at.cause)
          causes.push(at.constructor.name)
        const e = error as { status?: number; code?: number; details?: string; shortMessage?: string }
        return {
          class: (error as Error).constructor.name,
          status: e.status,
          code: e.code,
          details: e.details,
          shortMessage: e.shortMessage,
          causes
        }
      }
      const outcome = (request: (args: { method: string; params?: unknown }) => Promise<unknown>) =>
        Effect.promise(() =>
          request({ method: "eth_blockNumber", params: [] }).then(
            (result) => ({ result }),
            (error: unknown) => ({ error: described(error) })
          )
        )
      const cases: Array<readonly [Answer, string]> = [
        ["plain", origin],
        ...(Object.keys(REFUSALS) as Array<keyof typeof REFUSALS>).map(
          (refusal) => [refusal, origin] as const
        ),
        ["never", origin]
      ]
      for (const [kind, url] of cases) {
        answer = kind
        // A short deadline only where the answer never comes: a busy machine must not turn an
        // answer into a timeout on one side and not the other.
        const timeoutMs = kind === "never" ? 300 : 10_000
        const ours = yield* outcome(rpcTransport(url, { timeoutMs })({}).request)
        const viems = yield* outcome(viemHttp(url, { timeout: timeoutMs, retryCount: 0 })({}).request)
        expect({ kind, ...ours }).toEqual({ kind, ...viems })
      }
      // No connection: the same error, whose text names the failure by its code alone (see above)
      // where Node's fetch says "fetch failed".
      const refused = `http://127.0.0.1:${port}`
      const ours = yield* outcome(rpcTransport(refused, { timeoutMs: 10_000 })({}).request)
      const viems = yield* outcome(viemHttp(refused, { timeout: 10_000, retryCount: 0 })({}).request)
      const withoutText = (o: typeof ours) =>
        "error" in o ? { ...o.error, details: undefined, causes: o.error.causes.slice(-1) } : o
      expect(withoutText(ours)).toEqual(withoutText(viems))
      expect(ours).toMatchObject({ error: { class: "HttpRequestError", status: undefined } })
    })
  )
})
