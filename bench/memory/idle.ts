/**
 * Idle memory benchmark: resident set size of one service at rest on the devnet with its
 * embedded database (PGlite on disk, the indexer following an idle chain), beside a bare
 * `HttpApi` server process (the floor of Node, Effect and the platform), measured in the same run.
 *
 *   node --import tsx bench/memory/idle.ts
 *
 * Settings (environment): BENCH_IDLE_SETTLE_MS (default 15000): how long each process rests after
 * its first answer before its RSS is read.
 *
 * The figure is the relayer as `npm run relayer` runs it (tsx on the source). The same relayer
 * compiled to JavaScript and run by plain node (bench/lib/build.ts), the attestor, and the bare
 * server both ways are in the row's details: the loader's share is large enough to matter.
 */
import { ensureBuild } from "../lib/build.js"
import { startAttestor, startBare, startDevnet, startRelayer } from "../lib/devnet.js"
import { mib, type Server, scratchFile, sleep } from "../lib/processes.js"
import { record, row } from "../lib/results.js"

const SETTLE_MS = Number(process.env.BENCH_IDLE_SETTLE_MS ?? 15_000)
// The figure is about the embedded database: a relayer on BENCH_DATABASE_URL would leave it out.
delete process.env.BENCH_DATABASE_URL

const atRest = async (server: Server) => {
  await sleep(SETTLE_MS)
  return server.memory()
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
  const relayerMemory = await measure(() => startRelayer(devnet))
  const relayerCompiled = await measure(() => startRelayer(devnet, {}, { compiled: true }))
  const attestorMemory = await measure(() => startAttestor(devnet))
  const attestorCompiled = await measure(() => startAttestor(devnet, {}, { compiled: true }))
  const bareMemory = await measure(() => startBare("get", sample))
  const bareCompiled = await measure(() => startBare("get", sample, { compiled: true }))

  console.log(`RSS after ${SETTLE_MS / 1000} s at rest (MiB)`)
  const line = (process: string, m: { rss: number; peak: number }) => ({
    process,
    rss: mib(m.rss),
    peak: mib(m.peak)
  })
  console.table([
    line("relayer (devnet, PGlite on disk, indexer on), tsx", relayerMemory),
    line("relayer, compiled, plain node", relayerCompiled),
    line("attestor (devnet, PGlite on disk, indexer on), tsx", attestorMemory),
    line("attestor, compiled, plain node", attestorCompiled),
    line("bare HttpApi server, tsx", bareMemory),
    line("bare HttpApi server, compiled, plain node", bareCompiled)
  ])
  record({
    idle_rss: row("bench/memory/idle.ts", {
      measure: "idle RSS of one service on the embedded database (relayer, devnet, tsx)",
      value: mib(relayerMemory.rss),
      unit: "MiB",
      baseline: mib(bareMemory.rss),
      baselineLabel: "bare HttpApi server process",
      goal: "<= 200 MB",
      details: {
        settleMs: SETTLE_MS,
        runtime: "tsx on the source, as npm run relayer",
        relayerPeakMiB: mib(relayerMemory.peak),
        relayerCompiledMiB: mib(relayerCompiled.rss),
        attestorMiB: mib(attestorMemory.rss),
        attestorCompiledMiB: mib(attestorCompiled.rss),
        bareCompiledMiB: mib(bareCompiled.rss)
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
