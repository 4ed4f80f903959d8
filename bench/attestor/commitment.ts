/**
 * Commitment benchmark: `POST /v1/commitment` (a numeric messenger `userId`: free, nothing outside
 * the process) requests/s on the attestor, beside a bare `HttpApi` server with the same payload and
 * answer schemas and a raw `node:http` server reading the body and sending the same bytes, all
 * measured in the same run.
 *
 *   node --import tsx bench/attestor/commitment.ts
 *
 * Settings: as bench/relayer/quote.ts (BENCH_DURATION_MS, BENCH_WARMUP_MS, BENCH_CONCURRENCY,
 * BENCH_ROUNDS). The attestor is the production entry point (src/bin/attestor.ts) with the
 * devnet's settings (`attestorEnv`), its rate limit out of reach; each answer draws a fresh nonce
 * and derives the commitment, as it does for a client.
 */
import { ensureBuild } from "../lib/build.js"
import { liftedRelayerLimits, startAttestor, startBare, startDevnet, startRaw } from "../lib/devnet.js"
import { scratchFile } from "../lib/processes.js"
import { record, row } from "../lib/results.js"
import { CONCURRENCY, cpuComparison, noted, printSeries, runSeries } from "../lib/series.js"

const request = {
  method: "POST",
  path: "/v1/commitment",
  body: JSON.stringify({ platform: "messenger", userId: "7012345678" })
}

// Every server bundled (scripts/bundle.ts) under plain node, as `npm run start:attestor` runs the attestor.
ensureBuild()
const asOperatorsRun = { bundled: true }

const devnet = await startDevnet("commitment")
try {
  const attestor = await startAttestor(
    devnet,
    {
      RATE_LIMIT_BURST: liftedRelayerLimits.RATE_LIMIT_IP_BURST,
      RATE_LIMIT_PER_MINUTE: liftedRelayerLimits.RATE_LIMIT_IP_PER_MINUTE
    },
    asOperatorsRun
  )
  try {
    const sample = await fetch(`${attestor.url}/v1/commitment`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: request.body
    })
    if (sample.status !== 200)
      throw new Error(`the attestor answered ${sample.status}: ${await sample.text()}`)
    const body = Buffer.from(await sample.arrayBuffer())
    const bodyFile = scratchFile("commitment.json", body)
    const raw = await startRaw(bodyFile, undefined, asOperatorsRun)
    const bare = await startBare("post", bodyFile, asOperatorsRun)
    try {
      const all = await runSeries([
        { name: "raw node:http POST, same bytes", origin: raw.url, server: raw, requests: [request] },
        { name: "bare HttpApi POST, same schemas", origin: bare.url, server: bare, requests: [request] },
        { name: "attestor POST /v1/commitment", origin: attestor.url, server: attestor, requests: [request] },
        {
          name: "attestor GET /v1/info",
          origin: attestor.url,
          server: attestor,
          requests: [{ path: "/v1/info" }]
        }
      ])
      printSeries(
        `POST /v1/commitment, ${CONCURRENCY} keep-alive connections, ${body.length}-byte answer`,
        all
      )
      const [rawSeries, bareSeries, commitmentSeries] = all
      record({
        commitment_vs_bare: row("bench/attestor/commitment.ts", {
          measure: "POST /v1/commitment req/s vs bare HttpApi POST",
          value: commitmentSeries!.perSecond,
          unit: "req/s",
          baseline: bareSeries!.perSecond,
          baselineLabel: "bare HttpApi POST",
          goal: ">= 0.8x",
          ...noted(cpuComparison(commitmentSeries!, bareSeries!)),
          details: {
            concurrency: CONCURRENCY,
            rawPerSecond: Math.round(rawSeries!.perSecond),
            commitmentP50Ms: commitmentSeries!.p50,
            bareP50Ms: bareSeries!.p50,
            rounds: { commitment: commitmentSeries!.rounds, bare: bareSeries!.rounds, raw: rawSeries!.rounds }
          }
        })
      })
    } finally {
      await raw.stop()
      await bare.stop()
    }
  } finally {
    await attestor.stop()
  }
} finally {
  await devnet.close()
}
