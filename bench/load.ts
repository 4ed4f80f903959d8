/**
 * HTTP load generator, run in its own process so that the server under test never shares its
 * event loop (or its CPU accounting) with the client.
 *
 *   node --import tsx bench/load.ts <plan.json>
 *
 * The plan (JSON, `LoadPlan` below) names the origin, the requests to cycle through, the number of
 * keep-alive connections and either a duration or a request count, after an untimed warm-up. The
 * result (`LoadResult`) is one JSON line on stdout. With `once`, every request of the plan is sent
 * exactly once (claims: each body is a distinct account) and `bodies` holds the answers in order.
 */
import { readFileSync } from "node:fs"
import http from "node:http"
import { processCpuMs } from "./lib/processes.js"

export interface LoadRequest {
  readonly method?: string
  readonly path: string
  readonly headers?: Record<string, string>
  readonly body?: string
}

export interface LoadPlan {
  /** `http://host:port`. */
  readonly origin: string
  readonly requests: ReadonlyArray<LoadRequest>
  /** Keep-alive connections, each with one request in flight. */
  readonly concurrency: number
  /** Timed window; ignored when `count` or `once` is given. */
  readonly durationMs?: number
  /** Timed requests. */
  readonly count?: number
  /** Untimed requests first, to warm the JIT and the server's caches. */
  readonly warmupMs?: number
  /** Every request exactly once, answers kept. */
  readonly once?: boolean
  /**
   * The server's process: its CPU time over the timed window is reported per request, a figure
   * other load on a shared machine barely moves (unlike requests per second).
   */
  readonly serverPid?: number
}

export interface LoadResult {
  readonly requests: number
  readonly ms: number
  readonly perSecond: number
  readonly p50: number
  readonly p90: number
  readonly p99: number
  readonly max: number
  /** Response body bytes, summed. */
  readonly bytes: number
  readonly statuses: Record<string, number>
  readonly errors: number
  readonly bodies?: ReadonlyArray<string>
  /** With `once`: each request's start and end, µs on the system's monotonic clock. */
  readonly timings?: ReadonlyArray<readonly [number, number]>
  /** With `serverPid`: the server's CPU time (user + system) per timed request, µs. */
  readonly serverCpuUsPerRequest?: number
}

const monotonicMicros = () => Number(process.hrtime.bigint() / 1000n)

interface Prepared {
  readonly method: string
  readonly path: string
  readonly headers: Record<string, string | number>
  readonly body: Buffer | undefined
}

const prepare = (r: LoadRequest): Prepared => {
  const body = r.body === undefined ? undefined : Buffer.from(r.body)
  return {
    method: r.method ?? (body === undefined ? "GET" : "POST"),
    path: r.path,
    headers: {
      ...(body === undefined ? {} : { "content-type": "application/json", "content-length": body.length }),
      ...r.headers
    },
    body
  }
}

async function run(plan: LoadPlan): Promise<LoadResult> {
  const url = new URL(plan.origin)
  const agent = new http.Agent({
    keepAlive: true,
    maxSockets: plan.concurrency,
    maxFreeSockets: plan.concurrency
  })
  const prepared = plan.requests.map(prepare)
  const keep = plan.once === true

  const one = (r: Prepared) =>
    new Promise<{ status: number; bytes: number; text: string | undefined }>((resolve, reject) => {
      const request = http.request(
        { host: url.hostname, port: url.port, method: r.method, path: r.path, headers: r.headers, agent },
        (response) => {
          let bytes = 0
          const chunks: Buffer[] = []
          response.on("data", (chunk: Buffer) => {
            bytes += chunk.length
            if (keep) chunks.push(chunk)
          })
          response.on("end", () =>
            resolve({
              status: response.statusCode ?? 0,
              bytes,
              text: keep ? Buffer.concat(chunks).toString("utf8") : undefined
            })
          )
          response.on("error", reject)
        }
      )
      request.on("error", reject)
      request.end(r.body)
    })

  // Each connection loops on its own; `next` hands out request indexes.
  const series = async (stopAt: (issued: number, now: number) => boolean, timed: boolean) => {
    let next = 0
    const latencies: number[] = []
    const statuses: Record<string, number> = {}
    const bodies: string[] = keep ? new Array<string>(prepared.length) : []
    const timings: Array<readonly [number, number]> = keep ? new Array(prepared.length) : []
    let bytes = 0
    let errors = 0
    const worker = async () => {
      for (;;) {
        const i = next
        if (stopAt(i, performance.now())) return
        next++
        const started = performance.now()
        const startedAt = keep ? monotonicMicros() : 0
        try {
          const answer = await one(prepared[i % prepared.length]!)
          if (timed) {
            latencies.push(performance.now() - started)
            statuses[answer.status] = (statuses[answer.status] ?? 0) + 1
            bytes += answer.bytes
            if (keep) {
              bodies[i] = answer.text ?? ""
              timings[i] = [startedAt, monotonicMicros()]
            }
          }
        } catch {
          errors++
        }
      }
    }
    const started = performance.now()
    await Promise.all(Array.from({ length: plan.concurrency }, worker))
    return { ms: performance.now() - started, latencies, statuses, bytes, errors, bodies, timings }
  }

  if (!keep && (plan.warmupMs ?? 0) > 0) {
    const until = performance.now() + plan.warmupMs!
    await series((_, now) => now >= until, false)
  }
  const serverCpuBefore = plan.serverPid === undefined ? 0 : processCpuMs(plan.serverPid)
  const measured = keep
    ? await series((i) => i >= prepared.length, true)
    : plan.count !== undefined
      ? await series((i) => i >= plan.count!, true)
      : await (() => {
          const until = performance.now() + (plan.durationMs ?? 5_000)
          return series((_, now) => now >= until, true)
        })()
  const serverCpuMs = plan.serverPid === undefined ? 0 : processCpuMs(plan.serverPid) - serverCpuBefore
  agent.destroy()

  const sorted = measured.latencies.sort((a, b) => a - b)
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0
  const requests = sorted.length
  return {
    requests,
    ms: measured.ms,
    perSecond: (requests / measured.ms) * 1000,
    p50: at(0.5),
    p90: at(0.9),
    p99: at(0.99),
    max: sorted[sorted.length - 1] ?? 0,
    bytes: measured.bytes,
    statuses: measured.statuses,
    errors: measured.errors,
    ...(keep ? { bodies: measured.bodies, timings: measured.timings } : {}),
    ...(plan.serverPid === undefined || requests === 0
      ? {}
      : { serverCpuUsPerRequest: (serverCpuMs * 1000) / requests })
  }
}

const planFile = process.argv[2]
if (planFile === undefined) {
  process.stderr.write("usage: node --import tsx bench/load.ts <plan.json>\n")
  process.exit(2)
}
const result = await run(JSON.parse(readFileSync(planFile, "utf8")) as LoadPlan)
process.stdout.write(`${JSON.stringify(result)}\n`)
