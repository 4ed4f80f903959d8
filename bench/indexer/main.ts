/**
 * Indexer benchmark: backfill of 100k vault events on anvil, and the relayer's peak RSS serving
 * GET /v1/accounts at 100k accounts, each beside a baseline measured in the same run.
 *
 *   node --import tsx bench/indexer/main.ts      (PGlite; with DATABASE_URL, PostgreSQL as well)
 *
 * Settings (environment): BENCH_ACCOUNTS (default 100000, one `Registered` event each),
 * BENCH_MAX_BLOCK_RANGE (2000, the indexer's ceiling and the baseline's range), BENCH_REQUESTS (30
 * per GET series), BENCH_ACCOUNTS_CONCURRENCY (4 connections), BENCH_ACCOUNTS_RUNS (3 starts of the
 * bundled relayer, the median peak is the figure), DATABASE_URL.
 *
 * The chain is seeded through the contract (2,500 registrations per multicall transaction), so the
 * database is filled by the indexer itself, exactly as in production. Per database:
 *
 * - Backfill: the relayer (src/bin/relayer.ts, its own process) from an empty database to the head.
 *   The rate is read from its own metrics (`indexer_events_total`) between the first answer of its
 *   HTTP server and the head, so process start-up is left out. Baselines: bare `eth_getLogs` over
 *   the same ranges (halved while an answer is over the client's size limit, as the indexer's
 *   are), and a bare bulk insert of the same rows into an empty event table (in this process).
 * - Serving: a fresh relayer process on the filled database (the indexer at the head, nothing to
 *   do), then GET /v1/accounts by the load generator: one cold request, then identity, gzip and
 *   If-None-Match series, first under tsx (`npm run relayer`), then bundled (scripts/bundle.ts)
 *   under plain node as operators and the image run it (bench/lib/build.ts), three times. The median of
 *   the bundled relayer's peak RSS (VmHWM) is the figure, the tsx one beside it. Baseline: a raw
 *   `node:http` server (bundled) answering the same bytes (identity and gzip) to the same
 *   series, its peak RSS.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { get } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect, Option, Redacted } from "effect"
import {
  type Address,
  createPublicClient,
  encodeFunctionData,
  getAddress,
  type Log,
  numberToHex,
  ResponseBodyTooLargeError,
  http as viemHttp
} from "viem"
import { feeVaultAbi } from "../../contracts/abi.js"
import { deployDevnet, devnetAccount, devnetClients } from "../../contracts/deploy.js"
import { DEVNET_METRICS_TOKEN } from "../../layers/devnet.js"
import { SERVICE_ALLOCATOR_ENV } from "../../src/bin/processTuning.js"
import { spawnAnvil } from "../../src/chain/anvil.js"
import { decodeVaultLog, minedLog } from "../../src/indexer/logs.js"
import type { StoredEvent } from "../../src/store/EventStore.js"
import { storageLayer } from "../../src/store/sql.js"
import { freshPostgresSchema } from "../../test/support/postgresSchema.js"
import { bundled, ensureBuild } from "../lib/build.js"
import { freePort, liftedRelayerLimits, relayerNodeArgs, startRaw } from "../lib/devnet.js"
import { medianBy, mib, runLoad, type Server, scratchFile, sleep, startServer } from "../lib/processes.js"
import { record, row } from "../lib/results.js"
import type { LoadResult } from "../load.js"

const ACCOUNTS = Number(process.env.BENCH_ACCOUNTS ?? 100_000)
const MAX_RANGE = Number(process.env.BENCH_MAX_BLOCK_RANGE ?? 2_000)
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 30)
const CONCURRENCY = Number(process.env.BENCH_ACCOUNTS_CONCURRENCY ?? 4)
/** Starts of the bundled relayer whose median peak is the row's figure. */
const BUNDLED_RUNS = Number(process.env.BENCH_ACCOUNTS_RUNS ?? 3)
const PER_TX = 2_500
const DATABASE_URL = process.env.DATABASE_URL
const ZERO = "0x0000000000000000000000000000000000000000" as Address
const RELAYER_KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"

const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`
const now = () => performance.now()

interface Database {
  readonly name: "PGlite" | "PostgreSQL"
  readonly env: Record<string, string>
  readonly layerOptions: Parameters<typeof storageLayer>[0]
  readonly drop: () => Promise<void>
}

/** A database of its own for one measurement: a fresh embedded one on disk, or a fresh PostgreSQL schema. */
async function freshDatabase(kind: "PGlite" | "PostgreSQL"): Promise<Database> {
  if (kind === "PGlite") {
    const dir = mkdtempSync(join(tmpdir(), "bench-indexer-db-"))
    return {
      name: kind,
      env: { DATA_DIR: dir },
      layerOptions: { databaseUrl: Option.none(), dataDir: dir, applicationName: "bench" },
      drop: async () => rmSync(dir, { recursive: true, force: true })
    }
  }
  const { url, drop } = await freshPostgresSchema(DATABASE_URL!, "bench")
  return {
    name: kind,
    env: { DATABASE_URL: url },
    layerOptions: {
      databaseUrl: Option.some(Redacted.make(url)),
      dataDir: "",
      applicationName: "bench"
    },
    drop
  }
}

/** The relayer's indexer gauges, read from its own metrics endpoint. */
const indexerProgress = async (server: Server) => {
  const text = await fetch(`${server.url}/v1/metrics`, {
    headers: { authorization: `Bearer ${DEVNET_METRICS_TOKEN}` }
  }).then((r) => r.text())
  const value = (name: string) =>
    Number(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+]+)$`, "m").exec(text)?.[1] ?? Number.NaN)
  const mibOf = (name: string) => Math.round(value(name) / 1048576)
  return {
    block: value("indexer_block"),
    events: value("indexer_events_total"),
    // What holds the process's memory, from its own metrics (src/http/metrics.ts).
    memory: {
      rssMiB: mibOf("process_resident_memory_bytes"),
      heapUsedMiB: mibOf("nodejs_heap_size_used_bytes"),
      heapTotalMiB: mibOf("nodejs_heap_size_total_bytes"),
      externalMiB: mibOf("nodejs_external_memory_bytes")
    }
  }
}

/** GET /v1/accounts series by the load generator: cold (builds the body), identity, gzip, 304. */
async function serveAccounts(origin: string, withEtag: boolean) {
  const series = (headers: Record<string, string>, count: number, concurrency = CONCURRENCY) =>
    runLoad({ origin, requests: [{ path: "/v1/accounts", headers }], concurrency, count })
  const cold = await series({}, 1, 1)
  const identity = await series({}, REQUESTS)
  const gzip = await series({ "accept-encoding": "gzip" }, REQUESTS)
  const tagged = withEtag
    ? await fetch(`${origin}/v1/accounts`, { headers: { "accept-encoding": "gzip" } })
    : undefined
  await tagged?.arrayBuffer()
  const etag = tagged?.headers.get("etag") ?? null
  const notModified = etag === null ? undefined : await series({ "if-none-match": etag }, REQUESTS)
  return { cold, identity, gzip, notModified }
}

const line = (label: string, r: LoadResult | undefined) =>
  r === undefined
    ? `  ${label.padEnd(30)} -`
    : `  ${label.padEnd(30)} ${r.perSecond.toFixed(1).padStart(8)} req/s  p50 ${r.p50.toFixed(1)} ms  p99 ${r.p99.toFixed(1)} ms  ${Math.round(r.bytes / Math.max(1, r.requests)).toLocaleString("en-US")} bytes  ${JSON.stringify(r.statuses)}`

async function main() {
  ensureBuild()
  const kinds: Array<"PGlite" | "PostgreSQL"> =
    DATABASE_URL === undefined ? ["PGlite"] : ["PGlite", "PostgreSQL"]
  console.log(
    `indexer benchmark: ${ACCOUNTS.toLocaleString("en-US")} accounts, range ceiling ${MAX_RANGE}, ${kinds.join(" and ")}`
  )
  const anvil = await spawnAnvil({ extraArgs: ["--gas-limit", "3000000000"] })
  try {
    const deployment = await deployDevnet(anvil.rpcUrl)
    const { publicClient, walletClient } = await devnetClients(anvil.rpcUrl, devnetAccount(9))

    // ---- the chain: one Registered event per account, many per multicall transaction
    let started = now()
    for (let first = 0; first < ACCOUNTS; first += PER_TX) {
      const count = Math.min(PER_TX, ACCOUNTS - first)
      const calls = Array.from({ length: count }, (_, k) => {
        const i = first + k
        // Every tenth account has a fallback, so records differ as they do in practice.
        const fallback = i % 10 === 0
        return encodeFunctionData({
          abi: feeVaultAbi,
          functionName: "registerOwner",
          args: [
            getAddress(numberToHex(i + 1, { size: 20 })),
            numberToHex(i, { size: 32 }),
            fallback ? getAddress(numberToHex(0xfa11 + i, { size: 20 })) : ZERO,
            fallback ? 86_400n : 0n
          ]
        })
      })
      const hash = await walletClient.writeContract({
        address: deployment.vault,
        abi: feeVaultAbi,
        functionName: "multicall",
        args: [calls],
        gas: BigInt(count) * 110_000n
      })
      const receipt = await publicClient.waitForTransactionReceipt({ hash, pollingInterval: 50 })
      if (receipt.status !== "success") throw new Error("a registration batch reverted")
    }
    // Everything final, so the whole history is backfilled in ranges.
    const raw = createPublicClient({ transport: viemHttp(anvil.rpcUrl, { timeout: 600_000 }) })
    await raw.request({ method: "anvil_mine" as never, params: ["0x41"] as never })
    const head = Number(await publicClient.getBlockNumber())
    console.log(
      `chain: ${ACCOUNTS.toLocaleString("en-US")} registrations in ${seconds(now() - started)}, head ${head}`
    )

    // ---- baseline: bare eth_getLogs over the same ranges
    started = now()
    const logs: Log[] = []
    let size = MAX_RANGE
    for (let from = deployment.startBlock; from <= head; ) {
      const to = Math.min(head, from + size - 1)
      try {
        logs.push(
          ...(await raw.getLogs({ address: deployment.vault, fromBlock: BigInt(from), toBlock: BigInt(to) }))
        )
        from = to + 1
      } catch (error) {
        if (!(error instanceof ResponseBodyTooLargeError) || to === from) throw error
        size = Math.max(1, Math.floor((to - from + 1) / 2))
      }
    }
    const getLogsMs = now() - started
    const events = logs.length
    const getLogsRate = (events / getLogsMs) * 1000
    const rows: StoredEvent[] = logs.map((l) => {
      const decoded = minedLog(l).pipe((m) => (m._tag === "Right" ? decodeVaultLog(m.right) : m))
      if (decoded._tag === "Left") throw new Error("undecodable log")
      return decoded.right
    })
    logs.length = 0

    const relayerEnv = (db: Database, port: number): Record<string, string> => ({
      ...SERVICE_ALLOCATOR_ENV,
      RPC_URL: anvil.rpcUrl,
      RPC_TIMEOUT_MS: "600000",
      FEE_VAULT: deployment.vault,
      SETTLEMENT_ASSET: deployment.settlementAsset,
      SHIELD_ADAPTER: deployment.shieldAdapter,
      INDEXER_START_BLOCK: String(deployment.startBlock),
      INDEXER_POLL_INTERVAL_MS: "50",
      INDEXER_MAX_BLOCK_RANGE: String(MAX_RANGE),
      RELAYER_PRIVATE_KEY: RELAYER_KEY,
      METRICS_TOKEN: DEVNET_METRICS_TOKEN,
      // Every series comes from one address, and an identity body weighs on the per-IP limit.
      ...liftedRelayerLimits,
      HOST: "127.0.0.1",
      PORT: String(port),
      ...db.env
    })
    const startRelayer = async (db: Database, options: { readonly bundled?: boolean } = {}) => {
      const port = await freePort()
      return startServer({
        script: options.bundled === true ? bundled("src/bin/relayer.ts") : "src/bin/relayer.ts",
        bundled: options.bundled === true,
        env: relayerEnv(db, port),
        nodeArgs: relayerNodeArgs(),
        readyPath: "/v1/config",
        port,
        startTimeoutMs: 600_000
      })
    }
    const untilHead = async (server: Server) => {
      for (;;) {
        const progress = await indexerProgress(server)
        if (progress.block >= head) return progress
        await sleep(20)
      }
    }

    for (const kind of kinds) {
      const db = await freshDatabase(kind)
      try {
        // ---- backfill, from the first answer of the server to the head
        const indexing = await startRelayer(db)
        const before = await indexerProgress(indexing)
        const t1 = now()
        const last = await untilHead(indexing)
        const backfillMs = now() - t1
        const backfillEvents = last.events - (Number.isNaN(before.events) ? 0 : before.events)
        const backfillRate = (backfillEvents / backfillMs) * 1000
        const backfillPeak = indexing.memory().peak
        await indexing.stop()

        // ---- bare bulk insert of the same rows into an empty event table, same kind of database
        const insertDb = await freshDatabase(kind)
        const insertMs = await Effect.runPromise(
          Effect.gen(function* () {
            const sql = yield* SqlClient
            const t = now()
            yield* sql.withTransaction(
              Effect.forEach(
                Array.from({ length: Math.ceil(rows.length / 5_000) }, (_, i) =>
                  rows.slice(i * 5_000, (i + 1) * 5_000)
                ),
                (chunk) => sql`
                  INSERT INTO vault_events (chain_id, vault, block_number, block_hash, log_index, tx_hash, event_name, args)
                  SELECT ${deployment.chainId}::integer, ${deployment.vault}::text, r.block_number, r.block_hash,
                         r.log_index, r.tx_hash, r.event_name, r.args
                  FROM jsonb_to_recordset(${JSON.stringify(
                    chunk.map((e) => ({
                      block_number: e.blockNumber,
                      block_hash: e.blockHash,
                      log_index: e.logIndex,
                      tx_hash: e.txHash,
                      event_name: e.eventName,
                      args: e.args
                    }))
                  )}::jsonb) AS r(block_number bigint, block_hash text, log_index integer, tx_hash text, event_name text, args jsonb)`,
                { discard: true }
              )
            )
            return now() - t
          }).pipe(Effect.scoped, Effect.provide(storageLayer(insertDb.layerOptions)))
        )
        await insertDb.drop()

        // ---- serving, a fresh process on the filled database
        const serving = await startRelayer(db)
        await untilHead(serving)
        const startedRss = serving.memory().rss
        const url = `${serving.url}/v1/accounts`
        const service = await serveAccounts(serving.url, true)
        const servingPeak = serving.memory().peak
        const servingRss = serving.memory().rss
        // The bytes served, for the raw baseline (read after the peak).
        const identityBytes = Buffer.from(
          await (await fetch(url, { headers: { "accept-encoding": "identity" } })).arrayBuffer()
        )
        const gzipBytes = await new Promise<Buffer>((resolve, reject) => {
          get(url, { headers: { "accept-encoding": "gzip" } }, (res) => {
            const chunks: Buffer[] = []
            res.on("data", (c: Buffer) => chunks.push(c))
            res.on("end", () => resolve(Buffer.concat(chunks)))
          }).on("error", reject)
        })
        const listed = JSON.parse(identityBytes.toString("utf8")) as { block: number; accounts?: unknown[] }
        if (listed.accounts === undefined)
          throw new Error(`/v1/accounts answered ${identityBytes.toString("utf8").slice(0, 300)}`)
        await serving.stop()

        // ---- the same, bundled (scripts/bundle.ts) under plain node, several times: one start's peak
        // moves by tens of MiB from the next's (where the collector happens to be), so the row is
        // the median
        const bundledRuns: Array<{
          readonly startedRss: number
          readonly peak: number
          readonly started: Awaited<ReturnType<typeof untilHead>>["memory"]
          readonly served: Awaited<ReturnType<typeof indexerProgress>>["memory"]
          readonly identityP50: number
        }> = []
        for (let run = 0; run < BUNDLED_RUNS; run++) {
          const servingBundled = await startRelayer(db, { bundled: true })
          const started = (await untilHead(servingBundled)).memory
          const startedRss = servingBundled.memory().rss
          const served = await serveAccounts(servingBundled.url, true)
          const peak = servingBundled.memory().peak
          bundledRuns.push({
            startedRss,
            peak,
            started,
            served: (await indexerProgress(servingBundled)).memory,
            identityP50: served.identity.p50
          })
          await servingBundled.stop()
        }
        const bundledMedian = medianBy(bundledRuns, (run) => run.peak)
        const bundledPeak = bundledMedian.peak
        const bundledStartedRss = bundledMedian.startedRss
        const bundledStarted = bundledMedian.started
        const bundledServed = bundledMedian.served
        if (listed.block !== head || listed.accounts.length !== ACCOUNTS)
          throw new Error(`/v1/accounts lists ${listed.accounts.length} accounts at block ${listed.block}`)

        const rawServer = await startRaw(
          scratchFile(`accounts-${kind}.json`, identityBytes),
          scratchFile(`accounts-${kind}.json.gz`, gzipBytes),
          { bundled: true }
        )
        const rawStartedRss = rawServer.memory().rss
        const baseline = await serveAccounts(rawServer.url, false)
        const rawPeak = rawServer.memory().peak
        await rawServer.stop()

        console.log("")
        console.log(
          `${kind}: backfill of ${events.toLocaleString("en-US")} vault events (blocks ${deployment.startBlock}..${head})`
        )
        console.log(
          `  indexer (from its first answer to the head):   ${seconds(backfillMs)}  ${Math.round(backfillRate).toLocaleString("en-US")} events/s  (${backfillEvents.toLocaleString("en-US")} events)`
        )
        console.log(
          `  baseline bare eth_getLogs, same ranges:       ${seconds(getLogsMs)}  ${Math.round(getLogsRate).toLocaleString("en-US")} events/s`
        )
        console.log(
          `  baseline bare bulk insert of the same rows:   ${seconds(insertMs)}  ${Math.round((events / insertMs) * 1000).toLocaleString("en-US")} events/s`
        )
        console.log(`  peak RSS of the indexing relayer:             ${mib(backfillPeak)} MiB`)
        console.log(
          `${kind}: GET /v1/accounts with ${ACCOUNTS.toLocaleString("en-US")} accounts, ${REQUESTS} requests per series over ${CONCURRENCY} connections`
        )
        console.log(line("relayer, first request", service.cold))
        console.log(line("relayer, identity", service.identity))
        console.log(line("relayer, gzip", service.gzip))
        console.log(line("relayer, If-None-Match", service.notModified))
        console.log(line("raw node:http, identity", baseline.identity))
        console.log(line("raw node:http, gzip", baseline.gzip))
        console.log(
          `  relayer RSS: ${mib(startedRss)} MiB at start, peak ${mib(servingPeak)} MiB, ${mib(servingRss)} MiB after`
        )
        for (const [i, run] of bundledRuns.entries())
          console.log(
            `  relayer bundled (plain node), start ${i + 1}: RSS ${mib(run.startedRss)} MiB at start, peak ${mib(run.peak)} MiB (identity p50 ${run.identityP50.toFixed(1)} ms)`
          )
        console.log(`  relayer bundled, the median start's peak: ${mib(bundledPeak)} MiB`)
        console.log(
          `  relayer bundled, its own metrics at start: ${JSON.stringify(bundledStarted)}; after the series: ${JSON.stringify(bundledServed)}`
        )
        console.log(`  raw node:http RSS: ${mib(rawStartedRss)} MiB at start, peak ${mib(rawPeak)} MiB`)

        const bench = "bench/indexer/main.ts"
        const details = {
          accounts: ACCOUNTS,
          identityBytes: identityBytes.length,
          gzipBytes: gzipBytes.length,
          startedMiB: mib(startedRss),
          afterMiB: mib(servingRss),
          backfillPeakMiB: mib(backfillPeak),
          identityP50Ms: service.identity.p50,
          gzipP50Ms: service.gzip.p50,
          rawIdentityP50Ms: baseline.identity.p50,
          bundledStartedMiB: mib(bundledStartedRss),
          bundledPeakMiB: mib(bundledPeak),
          bundledPeaksMiB: bundledRuns.map((run) => mib(run.peak)),
          bundledMemoryAtStart: bundledStarted,
          bundledMemoryAfterSeries: bundledServed
        }
        record({
          [kind === "PGlite" ? "accounts_peak_rss_pglite" : "accounts_peak_rss_postgres"]: row(bench, {
            measure: `peak RSS serving /v1/accounts at ${ACCOUNTS.toLocaleString("en-US")} accounts (${kind}, relayer bundled)`,
            value: mib(bundledPeak),
            unit: "MiB",
            baseline: mib(rawPeak),
            baselineLabel: "raw node:http serving the same bytes, bundled",
            goal: kind === "PGlite" ? "<= 400 MB" : "<= 250 MB",
            note: `the relayer under tsx (npm run relayer): peak ${Math.round(mib(servingPeak))} MiB`,
            details
          }),
          ...(kind === "PGlite"
            ? {
                backfill_vs_getlogs: row(bench, {
                  measure: "indexer backfill events/s vs bare eth_getLogs events/s (PGlite)",
                  value: backfillRate,
                  unit: "events/s",
                  baseline: getLogsRate,
                  baselineLabel: "bare eth_getLogs, same ranges",
                  goal: "stays >= 1x",
                  details: { events, backfillMs, getLogsMs, insertMs, head }
                })
              }
            : {})
        })
      } finally {
        await db.drop()
      }
    }
    if (DATABASE_URL === undefined)
      record({
        accounts_peak_rss_postgres: row("bench/indexer/main.ts", {
          measure: "peak RSS serving /v1/accounts at 100k accounts (PostgreSQL)",
          value: null,
          unit: "MiB",
          baseline: null,
          baselineLabel: "raw node:http serving the same bytes",
          goal: "<= 250 MB",
          note: "not measured: DATABASE_URL is not set"
        })
      })
  } finally {
    await anvil.stop()
  }
}

await main()
