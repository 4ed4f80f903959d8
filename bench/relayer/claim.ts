/**
 * Claim benchmark: JSON-RPC calls per `POST /v1/claim`, its latency (request to `{ txHash }`)
 * beside the sum of its own RPC calls made bare, and relayed claims per second with interval
 * mining beside bare `eth_sendRawTransaction`s per second, all in the same run.
 *
 *   node --import tsx bench/relayer/claim.ts
 *
 * Settings (environment): BENCH_CLAIMS (default 30, one at a time), BENCH_THROUGHPUT_CLAIMS (200),
 * BENCH_THROUGHPUT_CONCURRENCY (32), BENCH_BLOCK_TIME (1 s).
 *
 * Anvil with the devnet contracts; the relayer bundled (scripts/bundle.ts) under plain node, as
 * `npm run start:relayer` runs it (bench/lib/build.ts; devnet settings, limits out of reach); the
 * claims sent by the load generator in its own process. Each claim is for a fresh kind-1 account
 * registered in the same transaction, direct to a fresh recipient.
 *
 * 1. Throughput: interval mining, BENCH_THROUGHPUT_CLAIMS claims over BENCH_THROUGHPUT_CONCURRENCY
 *    connections: accepted per second; then every returned hash must be mined successfully with the
 *    relayer's nonces contiguous and no other transaction from it (no replacement, no gap).
 *    The relayer runs as on the devnet (indexer on, the sender's monitor at its default interval),
 *    straight on anvil; its CPU time, anvil's and its RPC requests (the monitor's too, from its own
 *    `chain_rpc_requests_total`) are counted per claim until all are mined. A counting proxy in
 *    front of anvil would spend the shared cores the figure is about. Baseline: as many pre-signed
 *    transfers sent bare to anvil, same concurrency.
 * 2. Calls and latency: a second relayer, whose RPC_URL is a counting JSON-RPC proxy in front of
 *    anvil (bench/lib/proxy.ts) (indexer off, the monitor on a long interval so that its
 *    receipt polling stays out of the windows), automine, claims one at a time; each proxy call is attributed to the claim
 *    whose request window it arrived in (median per claim, as a background poll may land in one).
 *    Baseline: the chain is reverted to before the claims and each claim's own calls are replayed
 *    one after another through the proxy, exactly as sent (the broadcasts too, in order), and
 *    summed per claim.
 */
import { mkdtempSync } from "node:fs"
import { cpus, tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Schema } from "effect"
import {
  type Address,
  createPublicClient,
  type Hex,
  keccak256,
  parseEther,
  toHex,
  http as viemHttp,
  zeroAddress
} from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { feeVaultAbi, testTokenAbi } from "../../contracts/abi.js"
import { devnetAccount, devnetClients } from "../../contracts/deploy.js"
import { devnetKeys } from "../../layers/devnet.js"
import { computeId, ownerCommitment } from "../../schema/ids.js"
import { QuoteQuery } from "../../schema/relayer.js"
import { relayerFetchClient } from "../../src/client.js"
import { directClaimBody } from "../../test/support/directClaim.js"
import { ensureBuild } from "../lib/build.js"
import { liftedRelayerLimits, startDevnet, startRelayer } from "../lib/devnet.js"
import { commandCpuMs, machineBusyMs, pidListeningOn, processCpuMs, runLoad } from "../lib/processes.js"
import { call, rpc, startProxy } from "../lib/proxy.js"
import { record, row } from "../lib/results.js"
import type { LoadRequest } from "../load.js"

const CLAIMS = Math.max(1, Number(process.env.BENCH_CLAIMS ?? 30))
const THROUGHPUT_CLAIMS = Math.max(0, Number(process.env.BENCH_THROUGHPUT_CLAIMS ?? 200))
const THROUGHPUT_CONCURRENCY = Math.max(1, Number(process.env.BENCH_THROUGHPUT_CONCURRENCY ?? 32))
const BLOCK_TIME = Math.max(1, Number(process.env.BENCH_BLOCK_TIME ?? 1))
const AMOUNT = 10n * 10n ** 18n

ensureBuild()

const cpuMsOfThisProcess = () => {
  const { user, system } = process.cpuUsage()
  return (user + system) / 1000
}

interface AcceptWindow {
  readonly relayerCores: number
  readonly machineBusyShare: number
  readonly cpuMsPerClaim: Record<string, number>
  readonly relayerBoundPerSecond: number
}

const windowNote = (w: AcceptWindow) =>
  `while accepting, the relayer process used ${w.relayerCores} cores (its one JavaScript thread, plus GC and I/O threads) at ${w.cpuMsPerClaim.relayer} ms CPU per claim (~${w.relayerBoundPerSecond} claims/s per core of it); the machine's ${cpus().length} cores were ${Math.round(w.machineBusyShare * 100)}% busy, ${w.cpuMsPerClaim.machine} ms per claim in all (anvil ${w.cpuMsPerClaim.anvil}, PostgreSQL ${w.cpuMsPerClaim.postgres}, this bench process ${w.cpuMsPerClaim.benchProcess}, the load generator and the rest ${w.cpuMsPerClaim.loadGeneratorAndOthers})`

const median = (xs: readonly number[]) => {
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] ?? 0
}
const percentile = (xs: readonly number[], q: number) => {
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))] ?? 0
}

/** The relayer's `chain_rpc_requests_total` by operation, all outcomes summed (src/chain/metrics.ts). */
const rpcRequestsOf = async (origin: string, token: string): Promise<Record<string, number>> => {
  const response = await fetch(`${origin}/v1/metrics`, { headers: { authorization: `Bearer ${token}` } })
  if (!response.ok) throw new Error(`/v1/metrics answered ${response.status}`)
  const counts: Record<string, number> = {}
  for (const line of (await response.text()).split("\n")) {
    const match = /^chain_rpc_requests_total\{operation="([^"]+)",outcome="[^"]+"\} (\S+)$/.exec(line)
    if (match !== null) counts[match[1] as string] = (counts[match[1] as string] ?? 0) + Number(match[2])
  }
  return counts
}
const METRICS_TOKEN = keccak256(toHex(`bench ${Date.now()}`)).slice(2)

const devnet = await startDevnet("claim")
const proxy = await startProxy(devnet.chain.anvil.rpcUrl)
try {
  const rpcUrl = devnet.chain.anvil.rpcUrl
  const vault = devnet.chain.deployment.vault
  const usdt = devnet.chain.deployment.settlementAsset
  const relayerAddress = privateKeyToAccount(devnetKeys.relayer).address

  // Accounts, funded straight on anvil (not through the proxy): one mint, one approval, deposits.
  const accounts = Array.from({ length: CLAIMS + THROUGHPUT_CLAIMS }, () => {
    const owner = privateKeyToAccount(generatePrivateKey())
    const salt = keccak256(toHex(owner.address))
    return {
      owner,
      salt,
      id: computeId(1, ownerCommitment(owner.address, salt), zeroAddress, 0n),
      recipient: privateKeyToAccount(generatePrivateKey()).address
    }
  })
  const admin = devnetAccount(0)
  const { publicClient, walletClient } = await devnetClients(rpcUrl, admin)
  let nonce = await publicClient.getTransactionCount({ address: admin.address, blockTag: "pending" })
  const hashes: Hex[] = []
  const write = async (request: Record<string, unknown>) =>
    hashes.push(await walletClient.writeContract({ ...request, nonce: nonce++ } as never))
  const total = AMOUNT * BigInt(accounts.length)
  await write({ address: usdt, abi: testTokenAbi, functionName: "mint", args: [admin.address, total] })
  await write({ address: usdt, abi: testTokenAbi, functionName: "approve", args: [vault, total] })
  for (const a of accounts)
    await write({ address: vault, abi: feeVaultAbi, functionName: "deposit", args: [a.id, usdt, AMOUNT] })
  for (const hash of hashes) await publicClient.waitForTransactionReceipt({ hash })

  // Throughput runs as the devnet runs the relayer: its indexer on, its sender's monitor polling
  // at the default interval, both paid for in the figure. The one-at-a-time series runs on a
  // relayer whose background polls stay out of the claims' windows (see the header).
  let relayer = await startRelayer(
    devnet,
    { ...liftedRelayerLimits, RPC_URL: rpcUrl, METRICS_TOKEN },
    { bundled: true }
  )
  // Each series signs its claims at a quote its own relayer gives just before it runs: the
  // throughput run's full blocks raise the base fee, and with it the next quote.
  const signedClaims = async (
    relayerUrl: string,
    of: ReadonlyArray<(typeof accounts)[number]>
  ): Promise<LoadRequest[]> => {
    const client = await Effect.runPromise(relayerFetchClient(relayerUrl))
    const urlParams = Schema.decodeUnknownSync(QuoteQuery)({
      asset: usdt,
      adapter: zeroAddress,
      register: "1"
    })
    const fee = (await Effect.runPromise(client.quote.quote({ urlParams }))).relayerFee
    const deadline = BigInt(Math.floor(Date.now() / 1000) + 3600)
    return Promise.all(
      of.map(async (a) => ({
        method: "POST",
        path: "/v1/claim",
        body: await directClaimBody({
          signer: a.owner,
          chainId: devnet.chain.deployment.chainId,
          vault,
          id: a.id,
          asset: usdt,
          amount: AMOUNT,
          recipient: a.recipient,
          relayer: relayerAddress,
          relayerFee: fee,
          nonce: 0n,
          deadline,
          register: {
            kind: 1,
            owner: a.owner.address,
            salt: a.salt,
            fallbackRecipient: zeroAddress,
            fallbackDelay: 0n
          }
        })
      }))
    )
  }
  try {
    const reader = createPublicClient({ transport: viemHttp(rpcUrl) })
    const txHashOf = (body: string) => (JSON.parse(body) as { txHash?: Hex }).txHash

    // ---- 1. throughput with interval mining
    let throughput: Record<string, unknown> | undefined
    if (THROUGHPUT_CLAIMS > 0) {
      const concurrent = await signedClaims(relayer.url, accounts.slice(CLAIMS))
      await call(rpcUrl, "evm_setAutomine", [false])
      await call(rpcUrl, "evm_setIntervalMining", [BLOCK_TIME])
      const firstNonce = await reader.getTransactionCount({ address: relayerAddress, blockTag: "latest" })
      const anvilPid = pidListeningOn(devnet.chain.anvil.port)
      const anvilCpuBefore = anvilPid === undefined ? Number.NaN : processCpuMs(anvilPid)
      const cpuBefore = relayer.cpuMs()
      // Who spent the machine's CPU while the claims were being accepted (see `acceptWindow`).
      const windowBefore = {
        machine: machineBusyMs(),
        postgres: commandCpuMs("postgres"),
        bench: cpuMsOfThisProcess()
      }
      const rpcBefore = await rpcRequestsOf(relayer.url, METRICS_TOKEN)
      const result = await runLoad({
        origin: relayer.url,
        requests: concurrent,
        concurrency: THROUGHPUT_CONCURRENCY,
        once: true
      })
      const perClaim = (ms: number) => Math.round((ms / concurrent.length) * 10) / 10
      const windowRelayerMs = relayer.cpuMs() - cpuBefore
      const windowAnvilMs = anvilPid === undefined ? Number.NaN : processCpuMs(anvilPid) - anvilCpuBefore
      const windowMachineMs = machineBusyMs() - windowBefore.machine
      const windowPostgresMs = commandCpuMs("postgres") - windowBefore.postgres
      const windowBenchMs = cpuMsOfThisProcess() - windowBefore.bench
      // The relayer's JavaScript runs on one thread: the cores its process used in the window, and
      // the rate its CPU time per claim allows, tell whether it or the machine set the figure.
      const acceptWindow = {
        ms: Math.round(result.ms),
        relayerCores: Math.round((windowRelayerMs / result.ms) * 100) / 100,
        machineBusyShare: Math.round((windowMachineMs / (result.ms * cpus().length)) * 100) / 100,
        cpuMsPerClaim: {
          relayer: perClaim(windowRelayerMs),
          anvil: perClaim(windowAnvilMs),
          postgres: perClaim(windowPostgresMs),
          benchProcess: perClaim(windowBenchMs),
          loadGeneratorAndOthers: perClaim(
            windowMachineMs - windowRelayerMs - windowAnvilMs - windowPostgresMs - windowBenchMs
          ),
          machine: perClaim(windowMachineMs)
        },
        relayerBoundPerSecond: Math.round((concurrent.length / windowRelayerMs) * 1000)
      }
      const accepted = result.bodies!.map(txHashOf)
      const refused = accepted.filter((h) => h === undefined).length
      const mineStarted = performance.now()
      const receipts = await Promise.all(
        accepted.flatMap((hash) =>
          hash === undefined
            ? []
            : [reader.waitForTransactionReceipt({ hash, pollingInterval: 200, timeout: 300_000 })]
        )
      )
      const allMinedMs = result.ms + (performance.now() - mineStarted)
      // Everything the relayer did for these claims, its sender's monitor included, until all
      // were mined: CPU time and RPC calls per claim.
      const relayerCpuMsPerClaim = (relayer.cpuMs() - cpuBefore) / concurrent.length
      const anvilCpuMsPerClaim =
        anvilPid === undefined ? Number.NaN : (processCpuMs(anvilPid) - anvilCpuBefore) / concurrent.length
      // By the chain client's operation: `eth_getBlock` is a block by number or hash, and
      // `estimateFeesPerGas` a block and the priority fee.
      const rpcAfter = await rpcRequestsOf(relayer.url, METRICS_TOKEN)
      const rpcByMethod: Record<string, number> = {}
      let rpcCalls = 0
      for (const [operation, count] of Object.entries(rpcAfter)) {
        const made = count - (rpcBefore[operation] ?? 0)
        if (made <= 0) continue
        rpcCalls += made
        rpcByMethod[operation] = Math.round((made / concurrent.length) * 100) / 100
      }
      const rpcCallsPerClaim = rpcCalls / concurrent.length
      const reverted = receipts.filter((r) => r.status !== "success").length
      const nonces = (
        await Promise.all(
          accepted.flatMap((hash) => (hash === undefined ? [] : [reader.getTransaction({ hash })]))
        )
      )
        .map((t) => t.nonce)
        .sort((a, b) => a - b)
      const contiguous = nonces.every((n, i) => n === firstNonce + i)
      const lastNonce = await reader.getTransactionCount({ address: relayerAddress, blockTag: "latest" })
      const noOthers = lastNonce === firstNonce + nonces.length
      const blocks = new Set(receipts.map((r) => r.blockNumber)).size

      // Baseline: pre-signed transfers, contiguous nonces from a spare account, same concurrency.
      const spender = devnetAccount(7)
      const { walletClient: spenderWallet } = await devnetClients(rpcUrl, spender)
      const spenderNonce = await reader.getTransactionCount({ address: spender.address, blockTag: "pending" })
      const gasPrice = (await reader.getGasPrice()) * 2n
      const transfers = await Promise.all(
        concurrent.map(async (_, i) => ({
          method: "POST",
          path: "/",
          body: JSON.stringify({
            jsonrpc: "2.0",
            id: i,
            method: "eth_sendRawTransaction",
            params: [
              await spenderWallet.signTransaction({
                to: privateKeyToAccount(generatePrivateKey()).address as Address,
                value: parseEther("0.001"),
                nonce: spenderNonce + i,
                gas: 21_000n,
                gasPrice,
                type: "legacy"
              })
            ]
          })
        }))
      )
      const bare = await runLoad({
        origin: rpcUrl,
        requests: transfers,
        concurrency: THROUGHPUT_CONCURRENCY,
        once: true
      })
      const bareFailed = bare.bodies!.filter(
        (b) => (JSON.parse(b) as { error?: unknown }).error !== undefined
      ).length
      await call(rpcUrl, "evm_setIntervalMining", [0])
      await call(rpcUrl, "evm_setAutomine", [true])
      await call(rpcUrl, "evm_mine", [])

      const valid = refused === 0 && reverted === 0 && contiguous && noOthers && bareFailed === 0
      throughput = {
        database: process.env.BENCH_DATABASE_URL === undefined ? "PGlite" : "PostgreSQL",
        claims: concurrent.length,
        concurrency: THROUGHPUT_CONCURRENCY,
        blockTimeSeconds: BLOCK_TIME,
        acceptedPerSecond: (concurrent.length / result.ms) * 1000,
        minedPerSecond: (receipts.length / allMinedMs) * 1000,
        refused,
        reverted,
        contiguousNonces: contiguous,
        noOtherTransactions: noOthers,
        blocks,
        acceptWindow,
        acceptP50Ms: result.p50,
        acceptP99Ms: result.p99,
        relayerCpuMsPerClaim: Math.round(relayerCpuMsPerClaim * 10) / 10,
        anvilCpuMsPerClaim: Math.round(anvilCpuMsPerClaim * 10) / 10,
        rpcCallsPerClaim: Math.round(rpcCallsPerClaim * 100) / 100,
        rpcByMethod,
        statuses: result.statuses,
        bareSendsPerSecond: (transfers.length / bare.ms) * 1000,
        bareFailed,
        valid
      }
      console.log(
        `throughput: ${concurrent.length} claims over ${THROUGHPUT_CONCURRENCY} connections, ${BLOCK_TIME} s blocks`
      )
      console.table([{ ...throughput, rpcByMethod: undefined }])
      console.log(
        "RPC requests per claim during the throughput run, the sender's monitor included (chain_rpc_requests_total):"
      )
      console.table(rpcByMethod)
    }

    // ---- 2. calls and latency, one claim at a time, automine
    await relayer.stop()
    relayer = await startRelayer(
      devnet,
      {
        ...liftedRelayerLimits,
        RPC_URL: proxy.url,
        INDEXER_ENABLED: "false",
        TX_POLL_INTERVAL_MS: "600000",
        // A store of its own: over the first relayer's, it would spend its first seconds
        // confirming the throughput run's transactions, inside the claims' windows.
        DATA_DIR: mkdtempSync(join(tmpdir(), "bench-claim-latency-"))
      },
      { bundled: true }
    )
    const sequential = await signedClaims(relayer.url, accounts.slice(0, CLAIMS))
    const snapshot = await call(rpcUrl, "evm_snapshot", [])
    proxy.calls.length = 0
    proxy.recording = true
    const seq = await runLoad({ origin: relayer.url, requests: sequential, concurrency: 1, once: true })
    proxy.recording = false
    const claimHashes = seq.bodies!.map(txHashOf)
    if (claimHashes.some((h) => h === undefined))
      throw new Error(`a claim was refused: ${seq.bodies!.find((b) => txHashOf(b) === undefined)}`)
    let failed = 0
    for (const hash of claimHashes) {
      const receipt = await reader.waitForTransactionReceipt({ hash: hash!, pollingInterval: 50 })
      if (receipt.status !== "success") failed++
    }
    const perClaim = seq.timings!.map(([from, to]) => proxy.calls.filter((c) => c.at >= from && c.at <= to))
    const claimMs = seq.timings!.map(([from, to]) => (to - from) / 1000)
    const counts = perClaim.map((calls) => calls.length)
    const byMethod = new Map<string, number>()
    for (const calls of perClaim)
      for (const c of calls) byMethod.set(c.method, (byMethod.get(c.method) ?? 0) + 1)

    // Baseline: back to before the claims, then each claim's own calls, one after another.
    const reverted = await call(rpcUrl, "evm_revert", [snapshot])
    if (reverted !== true) throw new Error("evm_revert failed")
    const replayMs: number[] = []
    const replayMethodMs = new Map<string, number[]>()
    let replayErrors = 0
    for (const calls of perClaim) {
      let sum = 0
      for (const c of calls) {
        const started = performance.now()
        const answer = await rpc(proxy.url, c.body)
        const ms = performance.now() - started
        if (answer.error !== undefined) replayErrors++
        sum += ms
        replayMethodMs.set(c.method, [...(replayMethodMs.get(c.method) ?? []), ms])
      }
      replayMs.push(sum)
    }

    const claimP50 = median(claimMs)
    const replayP50 = median(replayMs)
    console.log(`POST /v1/claim (register + direct), ${CLAIMS} claims one at a time; ${failed} reverted`)
    console.table([
      {
        series: "POST /v1/claim -> txHash",
        "p50 ms": claimP50.toFixed(2),
        "p95 ms": percentile(claimMs, 0.95).toFixed(2),
        "RPC calls (median)": median(counts),
        "RPC calls (mean)": (counts.reduce((a, b) => a + b, 0) / counts.length).toFixed(2)
      },
      {
        series: "its own RPC calls replayed bare, summed",
        "p50 ms": replayP50.toFixed(2),
        "p95 ms": percentile(replayMs, 0.95).toFixed(2),
        "RPC calls (median)": median(counts),
        "RPC calls (mean)": ""
      }
    ])
    const methods = [...byMethod]
      .sort((a, b) => b[1] - a[1])
      .map(([method, n]) => ({
        method,
        "per claim": Math.round((n / CLAIMS) * 100) / 100,
        "bare p50 ms": Math.round(median(replayMethodMs.get(method) ?? []) * 100) / 100
      }))
    console.log("RPC calls per claim, by method (replay errors: " + replayErrors + ")")
    console.table(methods)

    const bench = "bench/relayer/claim.ts"
    record({
      claim_rpc_calls: row(bench, {
        measure: "JSON-RPC calls on the claim request path",
        value: median(counts),
        unit: "calls",
        baseline: 1,
        baselineLabel: "the broadcast alone",
        ratio: null,
        goal: "<= 4",
        details: {
          claims: CLAIMS,
          mean: counts.reduce((a, b) => a + b, 0) / counts.length,
          byMethod: methods
        }
      }),
      claim_latency: row(bench, {
        measure: "claim request -> txHash p50 vs the sum of its bare RPC calls",
        value: claimP50,
        unit: "ms",
        baseline: replayP50,
        baselineLabel: "its own calls replayed bare, summed",
        goal: "<= 3x",
        details: { claims: CLAIMS, claimP95Ms: percentile(claimMs, 0.95), reverted: failed, replayErrors }
      }),
      claim_throughput:
        throughput === undefined
          ? row(bench, {
              measure: "relayed claims/s, distinct accounts, interval mining",
              value: null,
              unit: "claims/s",
              baseline: null,
              baselineLabel: "bare eth_sendRawTransaction/s",
              goal: ">= 100/s",
              note: "not measured: BENCH_THROUGHPUT_CLAIMS=0"
            })
          : row(bench, {
              measure: "relayed claims/s, distinct accounts, interval mining (all mined, nonces contiguous)",
              value: throughput.valid === true ? (throughput.acceptedPerSecond as number) : null,
              unit: "claims/s",
              baseline: throughput.bareSendsPerSecond as number,
              baselineLabel: "bare eth_sendRawTransaction/s, same concurrency",
              goal: ">= 100/s",
              note:
                throughput.valid === true
                  ? windowNote(throughput.acceptWindow as AcceptWindow)
                  : `not valid: ${JSON.stringify({ ...throughput, statuses: undefined })}`,
              details: throughput
            })
    })
    if (failed > 0) process.exitCode = 1
  } finally {
    await relayer.stop()
  }
} finally {
  await proxy.close()
  await devnet.close()
}
