/**
 * A JSON-RPC proxy on 127.0.0.1 in front of a node, for tests of failure handling: it counts the
 * requests it receives by method, shows each to the rule with its params, and, per request,
 * forwards it or misbehaves (HTTP error, closed
 * socket, delay, a JSON-RPC error of our choosing, or no answer at all: a blackhole).
 */
import http from "node:http"
import type { AddressInfo } from "node:net"

export type ProxyBehaviour =
  | { readonly kind: "forward" }
  | { readonly kind: "status"; readonly status: number; readonly body?: string }
  | { readonly kind: "destroy" }
  | { readonly kind: "delay"; readonly ms: number }
  /** Reads the request and never answers, until the client gives up or the proxy closes. */
  | { readonly kind: "hang" }
  | {
      readonly kind: "rpcError"
      readonly code: number
      readonly message: string
      readonly httpStatus?: number
    }

export interface ProxiedRequest {
  readonly method: string
  /** 1 for the first request of this method since the last reset, and so on. */
  readonly nth: number
  /** The request's `params`, as sent. */
  readonly params: unknown
}

export type ProxyRule = (request: ProxiedRequest) => ProxyBehaviour

export interface RpcProxy {
  readonly url: string
  /** Requests received for `method` (all methods when omitted) since the last reset. */
  readonly count: (method?: string) => number
  /** Decides how later requests are treated; `reset` returns to forwarding everything. */
  readonly setRule: (rule: ProxyRule) => void
  readonly reset: () => void
  readonly close: () => Promise<void>
}

const forwardAll: ProxyRule = () => ({ kind: "forward" })

const readBody = (request: http.IncomingMessage): Promise<string> =>
  new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")))
    request.on("error", reject)
  })

const methodOf = (
  body: string
): { readonly method: string; readonly id: unknown; readonly params: unknown } => {
  try {
    const parsed: unknown = JSON.parse(body)
    if (
      typeof parsed === "object" &&
      parsed !== null &&
      "method" in parsed &&
      typeof parsed.method === "string"
    )
      return {
        method: parsed.method,
        id: "id" in parsed ? parsed.id : null,
        params: "params" in parsed ? parsed.params : undefined
      }
  } catch {
    // Not JSON: counted under an empty method name.
  }
  return { method: "", id: null, params: undefined }
}

export const startRpcProxy = async (targetUrl: string): Promise<RpcProxy> => {
  let rule = forwardAll
  let counts = new Map<string, number>()

  const forward = async (body: string, response: http.ServerResponse): Promise<void> => {
    const upstream = await fetch(targetUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body
    })
    const text = await upstream.text()
    // The client may have given up (timeout) while we were waiting.
    if (response.destroyed || response.writableEnded) return
    response.writeHead(upstream.status, { "content-type": "application/json" })
    response.end(text)
  }

  const server = http.createServer((request, response) => {
    void (async () => {
      const body = await readBody(request)
      const { method, id, params } = methodOf(body)
      const nth = (counts.get(method) ?? 0) + 1
      counts.set(method, nth)
      const behaviour = rule({ method, nth, params })
      switch (behaviour.kind) {
        case "forward":
          return forward(body, response)
        case "status":
          response.writeHead(behaviour.status, { "content-type": "text/plain" })
          response.end(behaviour.body ?? "upstream trouble")
          return
        case "destroy":
          request.socket.destroy()
          return
        case "hang":
          return
        case "delay":
          await new Promise((resolve) => setTimeout(resolve, behaviour.ms))
          return forward(body, response)
        case "rpcError":
          response.writeHead(behaviour.httpStatus ?? 200, { "content-type": "application/json" })
          response.end(
            JSON.stringify({
              jsonrpc: "2.0",
              id,
              error: { code: behaviour.code, message: behaviour.message }
            })
          )
          return
      }
    })().catch(() => {
      if (!response.headersSent && !response.destroyed) {
        response.writeHead(500)
        response.end()
      }
    })
  })

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => resolve())
  })
  const { port } = server.address() as AddressInfo

  return {
    url: `http://127.0.0.1:${port}`,
    count: (method) =>
      method === undefined ? [...counts.values()].reduce((a, b) => a + b, 0) : (counts.get(method) ?? 0),
    setRule: (next) => {
      rule = next
      counts = new Map()
    },
    reset: () => {
      rule = forwardAll
      counts = new Map()
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}

/** A loopback port with nothing listening on it. */
export const closedPort = async (): Promise<number> => {
  const server = http.createServer()
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  const { port } = server.address() as AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}
