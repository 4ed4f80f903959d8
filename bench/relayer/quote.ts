/**
 * Quote benchmark: `GET /v1/quote` requests/s on the relayer, beside a raw `node:http` server
 * sending the same bytes and a bare `HttpApi` server (the same query and answer schemas, no
 * middleware), all measured in the same run.
 *
 *   node --import tsx bench/relayer/quote.ts
 *
 * Settings (environment): BENCH_DURATION_MS (default 5000 per series), BENCH_WARMUP_MS (1500),
 * BENCH_CONCURRENCY (16 keep-alive connections), BENCH_ROUNDS (2, best kept).
 *
 * Every server runs in a process of its own, as does the load generator (bench/load.ts). The
 * relayer is the production entry point (src/bin/relayer.ts) with the devnet's settings: logs at
 * info to /dev/null, metrics, the IP rate limiter (with limits out of reach), embedded database on
 * disk; only the indexer is off, so that no background work lands in the timed windows.
 *
 * Series: the raw baseline; the bare HttpApi baseline; `GET /v1/config` (the service's stack
 * without pricing); one quote question over and over (a cached quote, the common case); eight
 * different questions in turn.
 */
import { Effect, Schema } from "effect"
import { zeroAddress } from "viem"
import { QuoteQuery } from "../../schema/relayer.js"
import { relayerFetchClient } from "../../src/client.js"
import { ensureBuild } from "../lib/build.js"
import { liftedRelayerLimits, startBare, startDevnet, startRaw, startRelayer } from "../lib/devnet.js"
import { scratchFile } from "../lib/processes.js"
import { record, row } from "../lib/results.js"
import { CONCURRENCY, cpuComparison, noted, printSeries, runSeries } from "../lib/series.js"

// Every server bundled (scripts/bundle.ts) under plain node, as `npm run start:relayer` runs the relayer.
ensureBuild()
const asOperatorsRun = { bundled: true }

const devnet = await startDevnet("quote")
try {
  const relayer = await startRelayer(
    devnet,
    { ...liftedRelayerLimits, INDEXER_ENABLED: "false" },
    asOperatorsRun
  )
  try {
    const usdt = devnet.chain.deployment.settlementAsset
    const tokens = devnet.chain.deployment.tokens
    const question = (params: Record<string, string>) =>
      `/v1/quote?${new URLSearchParams({ asset: usdt, adapter: zeroAddress, ...params })}`
    const single = question({})
    const mixed = [
      single,
      question({ adapter: devnet.chain.deployment.shieldAdapter }),
      question({ register: "1", consolidate: "1" }),
      question({ action: "ping" }),
      question({ action: "rotate-owner", asset: tokens.WETH! }),
      question({ action: "consolidate", asset: tokens.USDC! }),
      question({ action: "shield-templates", templates: "8" }),
      question({ action: "shield-templates", templates: "32", register: "1" })
    ]

    // Every question is answered, and decodes, before any is timed.
    const client = await Effect.runPromise(relayerFetchClient(relayer.url))
    for (const path of mixed) {
      const query = Object.fromEntries(new URL(path, relayer.url).searchParams)
      await Effect.runPromise(client.quote.quote({ urlParams: Schema.decodeUnknownSync(QuoteQuery)(query) }))
    }

    // The baselines answer the relayer's own bytes.
    const sample = await fetch(`${relayer.url}${single}`)
    if (sample.status !== 200)
      throw new Error(`the relayer answered ${sample.status}: ${await sample.text()}`)
    const body = Buffer.from(await sample.arrayBuffer())
    const bodyFile = scratchFile("quote.json", body)
    const raw = await startRaw(bodyFile, undefined, asOperatorsRun)
    const bare = await startBare("get", bodyFile, asOperatorsRun)
    try {
      const [rawSeries, bareSeries, , quoteSeries] = await runSeries([
        { name: "raw node:http, same bytes", origin: raw.url, server: raw, requests: [{ path: single }] },
        { name: "bare HttpApi, same schemas", origin: bare.url, server: bare, requests: [{ path: single }] },
        {
          name: "relayer GET /v1/config",
          origin: relayer.url,
          server: relayer,
          requests: [{ path: "/v1/config" }]
        },
        {
          name: "relayer GET /v1/quote, one question",
          origin: relayer.url,
          server: relayer,
          requests: [{ path: single }]
        },
        {
          name: "relayer GET /v1/quote, 8 questions",
          origin: relayer.url,
          server: relayer,
          requests: mixed.map((path) => ({ path }))
        }
      ]).then((all) => {
        printSeries(`GET /v1/quote, ${CONCURRENCY} keep-alive connections, ${body.length}-byte body`, all)
        return all
      })
      const details = { concurrency: CONCURRENCY, bodyBytes: body.length }
      record({
        quote_vs_raw: row("bench/relayer/quote.ts", {
          measure: "GET /v1/quote req/s vs raw node:http (same bytes)",
          value: quoteSeries!.perSecond,
          unit: "req/s",
          baseline: rawSeries!.perSecond,
          baselineLabel: "raw node:http",
          goal: ">= 0.6x",
          ...noted(cpuComparison(quoteSeries!, rawSeries!)),
          details: {
            ...details,
            quoteP50Ms: quoteSeries!.p50,
            rawP50Ms: rawSeries!.p50,
            rounds: { quote: quoteSeries!.rounds, raw: rawSeries!.rounds }
          }
        }),
        quote_vs_bare: row("bench/relayer/quote.ts", {
          measure: "GET /v1/quote req/s vs bare HttpApi GET",
          value: quoteSeries!.perSecond,
          unit: "req/s",
          baseline: bareSeries!.perSecond,
          baselineLabel: "bare HttpApi GET",
          goal: ">= 0.85x",
          ...noted(cpuComparison(quoteSeries!, bareSeries!)),
          details: {
            ...details,
            bareP50Ms: bareSeries!.p50,
            rounds: { quote: quoteSeries!.rounds, bare: bareSeries!.rounds }
          }
        })
      })
    } finally {
      await raw.stop()
      await bare.stop()
    }
  } finally {
    await relayer.stop()
  }
} finally {
  await devnet.close()
}
