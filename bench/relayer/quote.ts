/**
 * Quote benchmark: `GET /v1/quote` requests/s on the relayer, beside a raw `node:http` server
 * answering a constant JSON body (the same bytes as a real quote) in the same run.
 *
 *   npx tsx bench/relayer/quote.ts
 *
 * Settings (environment): BENCH_REQUESTS (default 5000 per series), BENCH_CONCURRENCY (default 16
 * keep-alive connections). Everything listens on 127.0.0.1: anvil with the devnet contracts, the
 * relayer (indexer off, embedded in-memory database, rate limits lifted), the baseline server and
 * the load generator, all but anvil in this one process, so client and servers share the CPU alike
 * in every series.
 *
 * Series: the baseline; `GET /v1/config` (the same HTTP stack without pricing, to tell the stack's
 * cost from the quote's); one quote question asked over and over (a cached quote, the common
 * case); eight different questions in turn (still cached after their first answer).
 */
import http from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Layer, Logger, LogLevel, ManagedRuntime, Schema } from "effect"
import { zeroAddress } from "viem"
import {
  Devnet,
  devnetChain,
  freeLoopbackPort,
  relayerEnv,
  withSettings,
  writeDevnetFile
} from "../../layers/devnet.js"
import { RelayerLive } from "../../layers/relayer.js"
import { QuoteQuery } from "../../schema/relayer.js"
import { relayerFetchClient } from "../../src/client.js"

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 5_000)
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16)
const WARMUP = Math.min(500, REQUESTS)

interface Series {
  readonly name: string
  readonly requests: number
  readonly ms: number
  readonly latencies: Float64Array
  readonly statuses: ReadonlyMap<number, number>
}

/** `count` GETs over `concurrency` keep-alive connections, cycling through `paths`. */
async function load(
  base: string,
  paths: readonly string[],
  count: number,
  concurrency: number
): Promise<Series> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency })
  const latencies = new Float64Array(count)
  const statuses = new Map<number, number>()
  let next = 0
  const one = (path: string) =>
    new Promise<number>((resolve, reject) => {
      const request = http.get(`${base}${path}`, { agent }, (response) => {
        response.resume()
        response.on("end", () => resolve(response.statusCode ?? 0))
        response.on("error", reject)
      })
      request.on("error", reject)
    })
  const worker = async () => {
    for (;;) {
      const i = next++
      if (i >= count) return
      const started = performance.now()
      const status = await one(paths[i % paths.length]!)
      latencies[i] = performance.now() - started
      statuses.set(status, (statuses.get(status) ?? 0) + 1)
    }
  }
  const started = performance.now()
  await Promise.all(Array.from({ length: concurrency }, worker))
  const ms = performance.now() - started
  agent.destroy()
  return { name: "", requests: count, ms, latencies, statuses }
}

const percentile = (sorted: Float64Array, p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!

const report = (series: ReadonlyArray<Series>) => {
  const baseline = series[0]!.requests / series[0]!.ms
  console.table(
    series.map((s) => {
      const sorted = Float64Array.from(s.latencies).sort()
      const perSecond = (s.requests / s.ms) * 1000
      return {
        series: s.name,
        "requests/s": Math.round(perSecond),
        "vs baseline": `${((perSecond / 1000 / baseline) * 100).toFixed(0)} %`,
        "p50 ms": percentile(sorted, 0.5).toFixed(2),
        "p99 ms": percentile(sorted, 0.99).toFixed(2),
        statuses: [...s.statuses].map(([status, n]) => `${status}x${n}`).join(" ")
      }
    })
  )
}

/** Anvil with the devnet contracts and the relayer alone, on loopback, for as long as the runtime. */
const bench = Layer.scoped(
  Devnet,
  Effect.gen(function* () {
    const chain = yield* devnetChain({ dir: join(tmpdir(), `bench-quote-${process.pid}`) })
    const port = yield* freeLoopbackPort
    const urls = { relayerUrl: `http://127.0.0.1:${port}`, attestorUrl: "http://127.0.0.1:9" }
    yield* writeDevnetFile(chain, urls)
    const env = {
      ...relayerEnv(chain, port),
      DATA_DIR: "memory://",
      INDEXER_ENABLED: "false",
      RATE_LIMIT_IP_BURST: "1000000000",
      RATE_LIMIT_IP_PER_MINUTE: "1000000000"
    }
    yield* Layer.buildWithScope(withSettings(RelayerLive, env), yield* Effect.scope)
    return { ...chain, ...urls }
  })
).pipe(Layer.provide(Logger.minimumLogLevel(LogLevel.Warning)))

async function main() {
  const runtime = ManagedRuntime.make(bench)
  try {
    const devnet = await runtime.runPromise(Devnet)
    const usdt = devnet.deployment.settlementAsset
    const tokens = devnet.deployment.tokens
    const question = (params: Record<string, string>) =>
      `/v1/quote?${new URLSearchParams({ asset: usdt, adapter: zeroAddress, ...params })}`
    const single = [question({})]
    const mixed = [
      question({}),
      question({ adapter: devnet.deployment.shieldAdapter }),
      question({ register: "1", consolidate: "1" }),
      question({ action: "ping" }),
      question({ action: "rotate-owner", asset: tokens.WETH! }),
      question({ action: "consolidate", asset: tokens.USDC! }),
      question({ action: "shield-templates", templates: "8" }),
      question({ action: "shield-templates", templates: "32", register: "1" })
    ]

    // Every question is answered, and decodes, before any is timed.
    const relayer = await Effect.runPromise(relayerFetchClient(devnet.relayerUrl))
    for (const path of mixed) {
      const query = Object.fromEntries(new URL(path, devnet.relayerUrl).searchParams)
      await Effect.runPromise(relayer.quote.quote({ urlParams: Schema.decodeUnknownSync(QuoteQuery)(query) }))
    }

    // The baseline answers the relayer's own bytes.
    const sample = await fetch(`${devnet.relayerUrl}${single[0]}`)
    if (sample.status !== 200)
      throw new Error(`the relayer answered ${sample.status}: ${await sample.text()}`)
    const body = Buffer.from(await sample.arrayBuffer())
    const raw = http.createServer((_, response) => {
      response.writeHead(200, { "content-type": "application/json", "content-length": body.length })
      response.end(body)
    })
    await new Promise<void>((resolve) => raw.listen(0, "127.0.0.1", resolve))
    const rawUrl = `http://127.0.0.1:${(raw.address() as AddressInfo).port}`

    console.log(
      `GET /v1/quote: ${REQUESTS} requests per series, ${CONCURRENCY} keep-alive connections, ${body.length}-byte body`
    )
    await load(rawUrl, ["/"], WARMUP, CONCURRENCY)
    await load(devnet.relayerUrl, mixed, WARMUP, CONCURRENCY)
    const series: Series[] = []
    series.push({
      ...(await load(rawUrl, ["/"], REQUESTS, CONCURRENCY)),
      name: "raw node:http, constant body"
    })
    series.push({
      ...(await load(devnet.relayerUrl, ["/v1/config"], REQUESTS, CONCURRENCY)),
      name: "relayer, GET /v1/config"
    })
    series.push({
      ...(await load(devnet.relayerUrl, single, REQUESTS, CONCURRENCY)),
      name: "relayer, one question"
    })
    series.push({
      ...(await load(devnet.relayerUrl, mixed, REQUESTS, CONCURRENCY)),
      name: "relayer, 8 questions"
    })
    report(series)
    await new Promise((resolve) => raw.close(resolve))
  } finally {
    await runtime.dispose()
  }
}

main().catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
