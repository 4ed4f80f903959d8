/**
 * A JSON-RPC proxy on 127.0.0.1 that misbehaves like a poor provider: it fails a share of calls
 * (HTTP 503, a dropped connection, an internal error), delays others (a few past the client's
 * timeout), and answers `eth_getLogs` over more than `maxLogRange` blocks with a "too many
 * results" error. Seeded, so a run is reproducible.
 */
import http from "node:http"
import type { AddressInfo } from "node:net"

export interface FaultPlan {
  /** Share of calls that fail. */
  readonly failShare: number
  /** Share of calls delayed by up to `maxDelayMs`. */
  readonly delayShare: number
  readonly maxDelayMs: number
  /** Share of calls held for `stallMs` (longer than the client waits). */
  readonly stallShare: number
  readonly stallMs: number
  /** Widest `eth_getLogs` range answered. */
  readonly maxLogRange: number
  readonly seed: number
}

export interface FaultStats {
  forwarded: number
  failed: number
  delayed: number
  stalled: number
  tooLarge: number
}

export interface FaultyRpc {
  readonly url: string
  readonly stats: FaultStats
  /** Stops misbehaving (everything is forwarded) or starts again. */
  setActive(active: boolean): void
  close(): Promise<void>
}

/** mulberry32: small, fast, good enough to pick faults. */
const prng = (seed: number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

interface RpcCall {
  readonly id?: unknown
  readonly method?: string
  readonly params?: ReadonlyArray<unknown>
}

const blockOf = (tag: unknown): number | undefined =>
  typeof tag === "string" && tag.startsWith("0x") ? Number.parseInt(tag, 16) : undefined

const logRange = (call: RpcCall): number | undefined => {
  if (call.method !== "eth_getLogs") return undefined
  const filter = call.params?.[0] as { fromBlock?: unknown; toBlock?: unknown } | undefined
  const from = blockOf(filter?.fromBlock)
  const to = blockOf(filter?.toBlock)
  return from === undefined || to === undefined ? undefined : to - from + 1
}

export async function startFaultyRpc(target: string, plan: FaultPlan): Promise<FaultyRpc> {
  const random = prng(plan.seed)
  const stats: FaultStats = { forwarded: 0, failed: 0, delayed: 0, stalled: 0, tooLarge: 0 }
  let active = true
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", async () => {
      const body = Buffer.concat(chunks).toString("utf8")
      let call: RpcCall = {}
      try {
        call = JSON.parse(body) as RpcCall
      } catch {
        // Forwarded as is; the node answers the malformed request itself.
      }
      if (active) {
        const range = logRange(call)
        if (range !== undefined && range > plan.maxLogRange) {
          stats.tooLarge++
          res.writeHead(200, { "content-type": "application/json" })
          res.end(
            JSON.stringify({
              jsonrpc: "2.0",
              id: call.id ?? null,
              error: { code: -32005, message: "query returned more than 10000 results" }
            })
          )
          return
        }
        const roll = random()
        if (roll < plan.failShare) {
          stats.failed++
          const how = random()
          if (how < 0.4) {
            res.writeHead(503).end("service unavailable")
          } else if (how < 0.7) {
            req.socket.destroy()
          } else {
            res.writeHead(200, { "content-type": "application/json" })
            res.end(
              JSON.stringify({
                jsonrpc: "2.0",
                id: call.id ?? null,
                error: { code: -32603, message: "internal error" }
              })
            )
          }
          return
        }
        if (roll < plan.failShare + plan.stallShare) {
          stats.stalled++
          await sleep(plan.stallMs)
        } else if (roll < plan.failShare + plan.stallShare + plan.delayShare) {
          stats.delayed++
          await sleep(random() * plan.maxDelayMs)
        }
      }
      try {
        const answer = await fetch(target, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body
        })
        const text = await answer.text()
        stats.forwarded++
        if (!res.writableEnded) {
          res.writeHead(answer.status, { "content-type": "application/json" })
          res.end(text)
        }
      } catch {
        if (!res.writableEnded) res.writeHead(502).end()
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    stats,
    setActive: (on) => {
      active = on
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}
