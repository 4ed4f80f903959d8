/**
 * A counting JSON-RPC proxy in front of anvil: forwards every body unchanged and records each call
 * (one per batch element) with its arrival time on the system's monotonic clock, so calls can be
 * attributed to the client request whose window they fall in.
 */
import http from "node:http"
import type { AddressInfo } from "node:net"
import { monotonicMicros } from "./cpuprofile.js"

export interface RpcCall {
  /** Arrival, µs on the monotonic clock (the load generator's `timings` clock). */
  readonly at: number
  readonly method: string
  /** The call alone, as JSON, for a replay. */
  readonly body: string
}

export interface RpcProxy {
  readonly url: string
  /** Every call since the last `clear`, while `recording`. */
  readonly calls: RpcCall[]
  recording: boolean
  readonly close: () => Promise<void>
}

export const startProxy = async (target: string): Promise<RpcProxy> => {
  const upstream = new URL(target)
  const agent = new http.Agent({ keepAlive: true })
  const calls: RpcCall[] = []
  const state = { recording: false }
  const server = http.createServer((req, res) => {
    const at = monotonicMicros()
    const chunks: Buffer[] = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      const body = Buffer.concat(chunks)
      if (state.recording) {
        try {
          const parsed = JSON.parse(body.toString("utf8")) as unknown
          for (const call of Array.isArray(parsed) ? parsed : [parsed])
            calls.push({
              at,
              method: String((call as { method?: unknown }).method),
              body: JSON.stringify(call)
            })
        } catch {
          calls.push({ at, method: "(unparsable)", body: "" })
        }
      }
      const forward = http.request(
        {
          host: upstream.hostname,
          port: upstream.port,
          path: upstream.pathname,
          method: "POST",
          agent,
          headers: { "content-type": "application/json", "content-length": body.length }
        },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers)
          answer.pipe(res)
        }
      )
      forward.on("error", () => {
        res.writeHead(502)
        res.end()
      })
      forward.end(body)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const proxy = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls,
    get recording() {
      return state.recording
    },
    set recording(on: boolean) {
      state.recording = on
    },
    close: async () => {
      agent.destroy()
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
  }
  return proxy
}

/** One JSON-RPC call straight to `url`; the result, or the node's error as a value. */
export const rpc = async (url: string, body: string): Promise<{ result?: unknown; error?: unknown }> => {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body })
  return (await res.json()) as { result?: unknown; error?: unknown }
}

export const call = async (url: string, method: string, params: unknown[]): Promise<unknown> => {
  const answer = await rpc(url, JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }))
  if (answer.error !== undefined) throw new Error(`${method}: ${JSON.stringify(answer.error)}`)
  return answer.result
}
