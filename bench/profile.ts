/**
 * CPU profiles of the request paths of `GET /v1/quote` (relayer) and `POST /v1/commitment`
 * (attestor), and of the bare HttpApi baselines for comparison, under the same load as the
 * benches; self time grouped by module (bench/lib/cpuprofile.ts).
 *
 *   node --import tsx bench/profile.ts
 *
 * Each server runs with `node --cpu-prof` into bench/.profiles; only the samples taken while the
 * timed load ran are counted (start-up, warm-up and shutdown are left out). Writes
 * bench/.profiles/summary.md, the tables bench/PROFILE.md is written from.
 *
 * Settings: BENCH_PROFILE_MS (default 8000), BENCH_CONCURRENCY (16).
 */
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { zeroAddress } from "viem"
import { ensureBuild } from "./lib/build.js"
import { markdown, monotonicMicros, summarise } from "./lib/cpuprofile.js"
import {
  liftedRelayerLimits,
  startAttestor,
  startBare,
  startDevnet,
  startRaw,
  startRelayer
} from "./lib/devnet.js"
import { ROOT, runLoad, type Server, scratchFile } from "./lib/processes.js"
import { CONCURRENCY } from "./lib/series.js"
import type { LoadRequest } from "./load.js"

// Bundled under plain node, as the benches and operators run the services.
ensureBuild()

const PROFILE_MS = Number(process.env.BENCH_PROFILE_MS ?? 8_000)
const DIR = join(ROOT, "bench", ".profiles")

/** Load on `server` while it profiles itself; the summary of its main thread over the timed window. */
const profiled = async (
  label: string,
  dir: string,
  start: (nodeArgs: ReadonlyArray<string>) => Promise<Server>,
  request: LoadRequest
) => {
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(dir, { recursive: true })
  const server = await start(["--cpu-prof", "--cpu-prof-dir", dir])
  await runLoad({ origin: server.url, requests: [request], concurrency: CONCURRENCY, durationMs: 3_000 })
  const from = monotonicMicros()
  const load = await runLoad({
    origin: server.url,
    requests: [request],
    concurrency: CONCURRENCY,
    durationMs: PROFILE_MS
  })
  const to = monotonicMicros()
  await server.stop()
  // CPU.<date>.<time>.<pid>.<thread>.<seq>.cpuprofile: thread 0 is the main thread (tsx's loader
  // has a thread of its own).
  const file = readdirSync(dir).find((f) => f.split(".")[4] === "0")
  if (file === undefined) throw new Error(`${label}: no main-thread profile in ${dir}`)
  writeFileSync(join(dir, "window.json"), JSON.stringify({ file, from, to }))
  const summary = summarise(join(dir, file), { from, to }, 20)
  console.log(`${label}: ${Math.round(load.perSecond)} req/s while profiled`)
  console.table(summary.attributed)
  return markdown(
    label,
    summary,
    `${Math.round(load.perSecond)} req/s over ${CONCURRENCY} connections for ${PROFILE_MS / 1000} s ` +
      `(${load.requests} requests, ${JSON.stringify(load.statuses)}); ` +
      `${((summary.busyMs * 1000) / Math.max(1, load.requests)).toFixed(0)} µs of sampled CPU per request.`
  )
}

const devnet = await startDevnet("profile")
const sections: string[] = []
try {
  const usdt = devnet.chain.deployment.settlementAsset
  const quote: LoadRequest = {
    path: `/v1/quote?${new URLSearchParams({ asset: usdt, adapter: zeroAddress })}`
  }
  const commitment: LoadRequest = {
    method: "POST",
    path: "/v1/commitment",
    body: JSON.stringify({ platform: "messenger", userId: "7012345678" })
  }
  let quoteSample = ""
  sections.push(
    await profiled(
      "relayer GET /v1/quote",
      join(DIR, "relayer"),
      async (nodeArgs) => {
        const relayer = await startRelayer(
          devnet,
          { ...liftedRelayerLimits, INDEXER_ENABLED: "false" },
          { nodeArgs, bundled: true }
        )
        quoteSample = await fetch(`${relayer.url}${quote.path}`).then((r) => r.text())
        return relayer
      },
      quote
    )
  )
  const quoteFile = scratchFile("profile-quote.json", quoteSample)
  sections.push(
    await profiled(
      "bare HttpApi GET",
      join(DIR, "bare-get"),
      (nodeArgs) => startBare("get", quoteFile, { nodeArgs, bundled: true }),
      quote
    )
  )
  let commitmentSample = ""
  sections.push(
    await profiled(
      "attestor POST /v1/commitment",
      join(DIR, "attestor"),
      async (nodeArgs) => {
        const attestor = await startAttestor(
          devnet,
          {
            RATE_LIMIT_BURST: liftedRelayerLimits.RATE_LIMIT_IP_BURST,
            RATE_LIMIT_PER_MINUTE: liftedRelayerLimits.RATE_LIMIT_IP_PER_MINUTE
          },
          { nodeArgs, bundled: true }
        )
        commitmentSample = await fetch(`${attestor.url}/v1/commitment`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: commitment.body!
        }).then((r) => r.text())
        return attestor
      },
      commitment
    )
  )
  const commitmentFile = scratchFile("profile-commitment.json", commitmentSample)
  sections.push(
    await profiled(
      "bare HttpApi POST",
      join(DIR, "bare-post"),
      (nodeArgs) => startBare("post", commitmentFile, { nodeArgs, bundled: true }),
      commitment
    )
  )
  // The floor, for scale: no framework at all.
  const raw = await startRaw(quoteFile)
  const rawLoad = await runLoad({
    origin: raw.url,
    requests: [quote],
    concurrency: CONCURRENCY,
    durationMs: 3_000
  })
  await raw.stop()
  sections.push(`Raw node:http with the quote's bytes, same load: ${Math.round(rawLoad.perSecond)} req/s.\n`)
} finally {
  await devnet.close()
}
writeFileSync(join(DIR, "summary.md"), sections.join("\n"))
console.log(`written: ${join(DIR, "summary.md")}`)
