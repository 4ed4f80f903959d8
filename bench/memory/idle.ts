/**
 * Idle memory benchmark: resident set size of one service at rest on the devnet with its
 * embedded database (PGlite on disk, the indexer following an idle chain), beside a bare
 * `HttpApi` server process (the floor of Node, Effect and the platform), measured in the same run.
 *
 *   node --import tsx bench/memory/idle.ts
 *
 * Settings (environment): BENCH_IDLE_SETTLE_MS (default 15000): how long each process rests after
 * its first answer before its RSS is read (the median of a reading a second over the last five);
 * BENCH_IDLE_RESTARTS (default 3): how many restarts of the relayer the figure is the median of.
 *
 * The figure is the relayer as operators run it: bundled (scripts/bundle.ts) under plain node
 * (`npm run start:relayer`, bench/lib/build.ts), restarted over the data directory its first start
 * created, which is what a long-running process holds. Its first start (creating the PGlite
 * cluster keeps more), the relayer under tsx (`npm run relayer`, the devnet), the attestor, and the
 * bare server both ways are printed beside it and kept in the row's details.
 */
import { ensureBuild } from "../lib/build.js"
import { startAttestor, startBare, startDevnet, startRelayer } from "../lib/devnet.js"
import { medianBy, mib, type Server, scratchFile, sleep } from "../lib/processes.js"
import { record, row } from "../lib/results.js"

const SETTLE_MS = Number(process.env.BENCH_IDLE_SETTLE_MS ?? 15_000)
// The figure is about the embedded database: a relayer on BENCH_DATABASE_URL would leave it out.
delete process.env.BENCH_DATABASE_URL

/** Restarts of the relayer over its data whose median is the row's figure. */
const RESTARTS = Number(process.env.BENCH_IDLE_RESTARTS ?? 3)
const SAMPLES = 5

/**
 * RSS at rest: the median of one reading a second over the last seconds of the rest. A process
 * at rest still polls (the indexer, the sender's monitor), so one reading may fall just before or
 * after a collection.
 */
const atRest = async (server: Server) => {
  await sleep(Math.max(0, SETTLE_MS - (SAMPLES - 1) * 1_000))
  const readings: Array<{ rss: number; peak: number }> = []
  for (let i = 0; i < SAMPLES; i++) {
    if (i > 0) await sleep(1_000)
    readings.push(server.memory())
  }
  return { rss: medianBy(readings, (r) => r.rss).rss, peak: Math.max(...readings.map((r) => r.peak)) }
}

ensureBuild()
const devnet = await startDevnet("idle")
try {
  const measure = async (start: () => Promise<Server>) => {
    const server = await start()
    const memory = await atRest(server)
    await server.stop()
    return memory
  }
  const sample = scratchFile("idle-quote.json", JSON.stringify(sampleQuote()))
  // Each service's first start creates its embedded database's cluster; the later ones open it.
  const relayerFirst = await measure(() => startRelayer(devnet, {}, { bundled: true }))
  // Restarted several times: what a restarted process holds moves by up to tens of MiB from one
  // start to the next (glibc's heaps, what PGlite's WebAssembly code tiers up, the collector).
  const relayerRestarts: Array<{ rss: number; peak: number }> = []
  for (let i = 0; i < RESTARTS; i++)
    relayerRestarts.push(await measure(() => startRelayer(devnet, {}, { bundled: true })))
  const relayerBundled = medianBy(relayerRestarts, (m) => m.rss)
  const relayerTsx = await measure(() => startRelayer(devnet))
  const attestorFirst = await measure(() => startAttestor(devnet, {}, { bundled: true }))
  const attestorBundled = await measure(() => startAttestor(devnet, {}, { bundled: true }))
  const attestorTsx = await measure(() => startAttestor(devnet))
  const bareBundled = await measure(() => startBare("get", sample, { bundled: true }))
  const bareTsx = await measure(() => startBare("get", sample))

  console.log(`RSS after ${SETTLE_MS / 1000} s at rest (MiB; the median of its last ${SAMPLES} seconds)`)
  const line = (process: string, m: { rss: number; peak: number }) => ({
    process,
    rss: mib(m.rss),
    peak: mib(m.peak)
  })
  console.table([
    line("relayer, bundled, first start (creates its PGlite cluster)", relayerFirst),
    ...relayerRestarts.map((m, i) => line(`relayer, bundled, restarted over its data, start ${i + 1}`, m)),
    line(`relayer, bundled, restarted (as in production): median of ${RESTARTS}`, relayerBundled),
    line("relayer, tsx on the source (npm run relayer), restarted", relayerTsx),
    line("attestor, bundled, first start (creates its PGlite cluster)", attestorFirst),
    line("attestor, bundled, restarted over its data", attestorBundled),
    line("attestor, tsx on the source, restarted", attestorTsx),
    line("bare HttpApi server, bundled", bareBundled),
    line("bare HttpApi server, tsx", bareTsx)
  ])
  record({
    idle_rss: row("bench/memory/idle.ts", {
      measure: "idle RSS of one service on the embedded database (relayer, bundled, devnet settings)",
      value: mib(relayerBundled.rss),
      unit: "MiB",
      baseline: mib(bareBundled.rss),
      baselineLabel: "bare HttpApi server process, bundled",
      goal: "<= 200 MB",
      note: `first start (creating the cluster) ${Math.round(mib(relayerFirst.rss))} MiB, under tsx ${Math.round(mib(relayerTsx.rss))} MiB; attestor ${Math.round(mib(attestorBundled.rss))} MiB (tsx ${Math.round(mib(attestorTsx.rss))})`,
      details: {
        settleMs: SETTLE_MS,
        runtime:
          "bundled (scripts/bundle.ts) under plain node, as npm run start:relayer; restarted over its data directory (median of the restarts)",
        restartsMiB: relayerRestarts.map((m) => mib(m.rss)),
        relayerFirstStartMiB: mib(relayerFirst.rss),
        relayerFirstStartPeakMiB: mib(relayerFirst.peak),
        relayerTsxMiB: mib(relayerTsx.rss),
        attestorFirstStartMiB: mib(attestorFirst.rss),
        attestorFirstStartPeakMiB: mib(attestorFirst.peak),
        attestorMiB: mib(attestorBundled.rss),
        attestorTsxMiB: mib(attestorTsx.rss),
        bareTsxMiB: mib(bareTsx.rss)
      }
    })
  })
} finally {
  await devnet.close()
}

/** A well-formed quote answer: the bare server decodes it once at start. */
function sampleQuote() {
  const address = "0x0000000000000000000000000000000000000001"
  return {
    chainId: 31337,
    vault: address,
    asset: address,
    adapter: address,
    action: "claim",
    relayer: address,
    relayerFee: "1",
    gasEstimate: "1",
    gasPrice: "1",
    validUntil: 1
  }
}
