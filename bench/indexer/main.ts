/**
 * Indexer benchmark: backfill of 100k vault events on anvil and GET /v1/accounts at 100k accounts,
 * each beside a baseline measured in the same run.
 *
 *   npx tsx bench/indexer/main.ts            (PGlite; set DATABASE_URL to use PostgreSQL)
 *
 * Settings (environment): BENCH_ACCOUNTS (default 100000, one `Registered` event each),
 * BENCH_MAX_BLOCK_RANGE (default 2000, the indexer's ceiling and the baseline's range),
 * BENCH_REQUESTS (default 30 per measured GET series), BENCH_LOG=debug to see each committed range.
 *
 * - Backfill: the relayer's indexer from an empty database to the head, in events/s; beside it the
 *   bare `eth_getLogs` over the same ranges, and a bare bulk insert of the same rows into an empty
 *   event table.
 * - GET /v1/accounts: latency of the first request (builds the body), warm requests (identity,
 *   gzip, 304) and their bytes; beside them a raw `node:http` server answering the same bytes.
 * - Peak RSS of this process while indexing and serving (the indexer, the embedded database and
 *   the HTTP server; measured before the baselines run), and including them.
 */
import { randomBytes } from "node:crypto"
import http from "node:http"
import type { AddressInfo } from "node:net"
import { Reactivity } from "@effect/experimental"
import { SqlClient } from "@effect/sql/SqlClient"
import { PgClient } from "@effect/sql-pg"
import { ConfigProvider, Effect, Layer, Logger, LogLevel, ManagedRuntime, Option, Redacted } from "effect"
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
import { relayerServer, relayerServices } from "../../layers/relayer.js"
import { spawnAnvil } from "../../src/chain/anvil.js"
import { relayerFetchClient } from "../../src/client.js"
import { RelayerSettings } from "../../src/config/relayer.js"
import { serverUrl } from "../../src/http/server.js"
import { Indexer } from "../../src/indexer/Indexer.js"
import { decodeVaultLog, minedLog } from "../../src/indexer/logs.js"
import type { StoredEvent } from "../../src/store/EventStore.js"
import { storageLayer } from "../../src/store/sql.js"

const ACCOUNTS = Number(process.env.BENCH_ACCOUNTS ?? 100_000)
const MAX_RANGE = Number(process.env.BENCH_MAX_BLOCK_RANGE ?? 2_000)
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 30)
const PER_TX = 2_500
const DATABASE_URL = process.env.DATABASE_URL
const ZERO = "0x0000000000000000000000000000000000000000" as Address

const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`
const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`
const rate = (n: number, ms: number) => `${Math.round((n / ms) * 1000).toLocaleString("en-US")} events/s`
const now = () => performance.now()

/** A database of its own for one measurement: a fresh embedded one, or a fresh PostgreSQL schema. */
async function freshDatabase(): Promise<{
  env: Record<string, string>
  layerOptions: Parameters<typeof storageLayer>[0]
  drop: () => Promise<void>
}> {
  if (DATABASE_URL === undefined)
    return {
      env: { DATA_DIR: "memory://" },
      layerOptions: { databaseUrl: Option.none(), dataDir: "memory://", applicationName: "bench" },
      drop: async () => {}
    }
  const schema = `bench_${randomBytes(6).toString("hex")}`
  const admin = PgClient.make({ url: Redacted.make(DATABASE_URL), maxConnections: 1 }).pipe(
    Effect.provide(Reactivity.layer)
  )
  const run = (statement: string) =>
    Effect.runPromise(Effect.scoped(Effect.flatMap(admin, (sql) => sql.unsafe(statement))))
  await run(`CREATE SCHEMA ${schema}`)
  const url = new URL(DATABASE_URL)
  url.searchParams.set("options", `-c search_path=${schema}`)
  return {
    env: { DATABASE_URL: url.toString() },
    layerOptions: {
      databaseUrl: Option.some(Redacted.make(url.toString())),
      dataDir: "",
      applicationName: "bench"
    },
    drop: () => run(`DROP SCHEMA ${schema} CASCADE`).then(() => {})
  }
}

/** GETs `url` `count` times over one keep-alive connection; latencies in ms and the last body size. */
async function measureGets(url: string, headers: Record<string, string>, count: number) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  const latencies: number[] = []
  let bytes = 0
  let status = 0
  for (let i = 0; i < count; i++) {
    const started = now()
    await new Promise<void>((resolve, reject) => {
      const req = http.get(url, { agent, headers }, (res) => {
        let size = 0
        res.on("data", (c: Buffer) => {
          size += c.length
        })
        res.on("end", () => {
          bytes = size
          status = res.statusCode ?? 0
          resolve()
        })
      })
      req.on("error", reject)
    })
    latencies.push(now() - started)
  }
  agent.destroy()
  latencies.sort((a, b) => a - b)
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0
  return { status, bytes, p50: at(0.5), p95: at(0.95), max: latencies[latencies.length - 1] ?? 0 }
}

const fmt = (m: Awaited<ReturnType<typeof measureGets>>) =>
  `p50 ${m.p50.toFixed(2)} ms, p95 ${m.p95.toFixed(2)} ms, max ${m.max.toFixed(2)} ms, ${m.bytes.toLocaleString("en-US")} bytes (HTTP ${m.status})`

async function main() {
  console.log(
    `indexer benchmark: ${ACCOUNTS.toLocaleString("en-US")} accounts, range ceiling ${MAX_RANGE}, ${DATABASE_URL === undefined ? "PGlite" : "PostgreSQL"}`
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
      const receipt = await publicClient.waitForTransactionReceipt({ hash })
      if (receipt.status !== "success") throw new Error("a registration batch reverted")
    }
    // Everything final, so the whole history is backfilled in ranges.
    const raw = createPublicClient({ transport: viemHttp(anvil.rpcUrl, { timeout: 600_000 }) })
    await raw.request({ method: "anvil_mine" as never, params: ["0x41"] as never })
    const head = Number(await publicClient.getBlockNumber())
    console.log(
      `chain: ${ACCOUNTS.toLocaleString("en-US")} registrations in ${seconds(now() - started)}, head ${head}`
    )

    // ---- the indexer, from an empty database to the head, then GET /v1/accounts beside a raw
    // server with the same bytes (first, so the peak memory below is the indexer's own)
    const db = await freshDatabase()
    const env: Record<string, string> = {
      RPC_URL: anvil.rpcUrl,
      RPC_TIMEOUT_MS: "600000",
      FEE_VAULT: deployment.vault,
      SETTLEMENT_ASSET: deployment.settlementAsset,
      SHIELD_ADAPTER: deployment.shieldAdapter,
      INDEXER_START_BLOCK: String(deployment.startBlock),
      INDEXER_POLL_INTERVAL_MS: "50",
      INDEXER_MAX_BLOCK_RANGE: String(MAX_RANGE),
      RELAYER_PRIVATE_KEY: "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
      HOST: "127.0.0.1",
      PORT: "0",
      ...db.env
    }
    const settings = RelayerSettings.layer.pipe(
      Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))
    )
    const runtime = ManagedRuntime.make(
      relayerServer.pipe(
        Layer.provideMerge(relayerServices),
        Layer.provideMerge(settings),
        Layer.provide(
          Logger.minimumLogLevel(process.env.BENCH_LOG === "debug" ? LogLevel.Debug : LogLevel.Error)
        )
      )
    )
    const http1 = await (async () => {
      try {
        const base = await runtime.runPromise(serverUrl)
        const t = now()
        while (true) {
          const status = await runtime.runPromise(Effect.flatMap(Indexer, (i) => i.status))
          if (status.block === head) break
          await new Promise((r) => setTimeout(r, 20))
        }
        const indexMs = now() - t

        const url = `${base}/v1/accounts`
        const cold = await measureGets(url, {}, 1)
        const identity = await measureGets(url, {}, REQUESTS)
        const gzipCold = await measureGets(url, { "accept-encoding": "gzip" }, 1)
        const gzip = await measureGets(url, { "accept-encoding": "gzip" }, REQUESTS)
        const etag = (await fetch(url)).headers.get("etag") ?? ""
        const notModified = await measureGets(url, { "if-none-match": etag }, REQUESTS)
        const identityBytes = Buffer.from(await (await fetch(url)).arrayBuffer())
        const gzipBytes = await new Promise<Buffer>((resolve, reject) => {
          http
            .get(url, { headers: { "accept-encoding": "gzip" } }, (res) => {
              const chunks: Buffer[] = []
              res.on("data", (c: Buffer) => chunks.push(c))
              res.on("end", () => resolve(Buffer.concat(chunks)))
            })
            .on("error", reject)
        })
        const rss = process.resourceUsage().maxRSS * 1024
        // The list that was timed decodes through the typed client with every account at the head
        // (checked after the RSS reading, which the decoding would inflate).
        const listed = await Effect.runPromise(
          Effect.flatMap(relayerFetchClient(base), (client) => client.accounts.accounts({ headers: {} }))
        )
        if (listed.block !== head || listed.accounts.length !== ACCOUNTS)
          throw new Error(`/v1/accounts lists ${listed.accounts.length} accounts at block ${listed.block}`)
        return { indexMs, cold, identity, gzipCold, gzip, notModified, identityBytes, gzipBytes, rss }
      } finally {
        await runtime.dispose()
        await db.drop()
      }
    })()

    const rawServer = http.createServer((req, res) => {
      const zipped = /gzip/.test(req.headers["accept-encoding"] ?? "")
      res.writeHead(200, {
        "content-type": "application/json",
        ...(zipped ? { "content-encoding": "gzip" } : {})
      })
      res.end(zipped ? http1.gzipBytes : http1.identityBytes)
    })
    await new Promise<void>((resolve) => rawServer.listen(0, "127.0.0.1", resolve))
    const rawUrl = `http://127.0.0.1:${(rawServer.address() as AddressInfo).port}/`
    const rawIdentity = await measureGets(rawUrl, {}, REQUESTS)
    const rawGzip = await measureGets(rawUrl, { "accept-encoding": "gzip" }, REQUESTS)
    rawServer.close()

    // ---- baseline 1: bare eth_getLogs over the same ranges: the ceiling, halved while the
    // response is over the client's size limit, as the indexer's ranges are
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

    // ---- baseline 2: bare bulk insert of the same rows into an empty event table
    const rows: StoredEvent[] = logs.map((l) => {
      const decoded = minedLog(l).pipe((m) => (m._tag === "Right" ? decodeVaultLog(m.right) : m))
      if (decoded._tag === "Left") throw new Error("undecodable log")
      return decoded.right
    })
    logs.length = 0
    const insertDb = await freshDatabase()
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

    console.log("")
    console.log(
      `backfill of ${events.toLocaleString("en-US")} vault events (blocks ${deployment.startBlock}..${head})`
    )
    console.log(
      `  indexer (fetch, decode, append, reconcile nonces, fold): ${seconds(http1.indexMs)}  ${rate(events, http1.indexMs)}`
    )
    console.log(
      `  baseline bare eth_getLogs, same ranges:                 ${seconds(getLogsMs)}  ${rate(events, getLogsMs)}`
    )
    console.log(
      `  baseline bare bulk insert of the same rows:             ${seconds(insertMs)}  ${rate(events, insertMs)}`
    )
    console.log("")
    console.log(
      `GET /v1/accounts with ${ACCOUNTS.toLocaleString("en-US")} accounts (${REQUESTS} sequential requests per line)`
    )
    console.log(`  first request (builds the body):  ${fmt(http1.cold)}`)
    console.log(`  identity:                         ${fmt(http1.identity)}`)
    console.log(`  first gzip request (compresses):  ${fmt(http1.gzipCold)}`)
    console.log(`  gzip:                             ${fmt(http1.gzip)}`)
    console.log(`  If-None-Match (304):              ${fmt(http1.notModified)}`)
    console.log(`  baseline raw node:http, identity: ${fmt(rawIdentity)}`)
    console.log(`  baseline raw node:http, gzip:     ${fmt(rawGzip)}`)
    console.log("")
    console.log(`peak RSS of this process while indexing and serving: ${mib(http1.rss)}`)
    console.log(
      `peak RSS including the baselines:                    ${mib(process.resourceUsage().maxRSS * 1024)}`
    )
  } finally {
    await anvil.stop()
  }
}

await main()
