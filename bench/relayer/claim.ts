/**
 * Claim benchmark: `POST /v1/claim` latency (request to `{ txHash }`) and JSON-RPC calls per claim,
 * beside the raw node round trips the relayer cannot do without, measured in the same run.
 *
 *   npx tsx bench/relayer/claim.ts
 *
 * Settings (environment): BENCH_CLAIMS (default 30). Everything listens on 127.0.0.1: anvil with
 * the devnet contracts, a counting `node:http` proxy in front of it, and the relayer (indexer off,
 * in-memory database, rate limits lifted) whose RPC_URL is the proxy. Claims go one at a time, each
 * for a fresh kind-1 account registered in the same transaction, direct to a fresh recipient.
 *
 * The sender's monitor polls on a long interval here so that its receipt polling stays out of the
 * counted windows: the figures are the cost of answering a claim, not of watching it afterwards.
 */
import http from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Context, Effect, Layer, Logger, LogLevel, ManagedRuntime, Schema } from "effect"
import {
  type Address,
  createPublicClient,
  encodeAbiParameters,
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
import {
  type DevnetChain,
  devnetChain,
  devnetKeys,
  freeLoopbackPort,
  relayerEnv,
  withSettings,
  writeDevnetFile
} from "../../layers/devnet.js"
import { RelayerLive } from "../../layers/relayer.js"
import { computeId, ownerCommitment } from "../../schema/ids.js"
import { QuoteQuery } from "../../schema/relayer.js"
import { relayerFetchClient } from "../../src/client.js"
import { directClaimBody } from "../../test/support/directClaim.js"

const CLAIMS = Math.max(1, Number(process.env.BENCH_CLAIMS ?? 30))
const AMOUNT = 10n * 10n ** 18n

// ---------------------------------------------------------------------------------------------
// Counting proxy

interface Proxy {
  readonly url: string
  /** Method counts since the last `reset`, only while `counting` is on. */
  readonly counts: Map<string, number>
  counting: boolean
  readonly close: () => Promise<void>
}

/** Forwards every body to `target` unchanged; counts JSON-RPC methods, one per batch element. */
const startProxy = async (target: string): Promise<Proxy> => {
  const upstream = new URL(target)
  const agent = new http.Agent({ keepAlive: true })
  const proxy: Proxy = {
    url: "",
    counts: new Map(),
    counting: false,
    close: async () => {
      agent.destroy()
      await new Promise((resolve) => server.close(resolve))
    }
  }
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      const body = Buffer.concat(chunks)
      if (proxy.counting) {
        try {
          const parsed = JSON.parse(body.toString("utf8")) as unknown
          for (const call of Array.isArray(parsed) ? parsed : [parsed]) {
            const method = String((call as { method?: unknown }).method)
            proxy.counts.set(method, (proxy.counts.get(method) ?? 0) + 1)
          }
        } catch {
          proxy.counts.set("(unparsable)", (proxy.counts.get("(unparsable)") ?? 0) + 1)
        }
      }
      const forward = http.request(
        {
          host: upstream.hostname,
          port: upstream.port,
          path: upstream.pathname,
          method: "POST",
          agent,
          headers: { "content-type": "application/json", "content-length": body.length }
        },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers)
          answer.pipe(res)
        }
      )
      forward.on("error", () => {
        res.writeHead(502)
        res.end()
      })
      forward.end(body)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return Object.assign(proxy, { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` })
}

// ---------------------------------------------------------------------------------------------
// Devnet with the relayer behind the proxy

class BenchDevnet extends Context.Tag("BenchDevnet")<
  BenchDevnet,
  { readonly chain: DevnetChain; readonly relayerUrl: string; readonly proxy: Proxy }
>() {}

const bench = Layer.scoped(
  BenchDevnet,
  Effect.gen(function* () {
    const chain = yield* devnetChain({ dir: join(tmpdir(), `bench-claim-${process.pid}`) })
    const proxy = yield* Effect.acquireRelease(
      Effect.promise(() => startProxy(chain.anvil.rpcUrl)),
      (p) => Effect.promise(() => p.close())
    )
    const port = yield* freeLoopbackPort
    const relayerUrl = `http://127.0.0.1:${port}`
    yield* writeDevnetFile(chain, { relayerUrl, attestorUrl: "http://127.0.0.1:9" })
    const env = {
      ...relayerEnv(chain, port),
      RPC_URL: proxy.url,
      DATA_DIR: "memory://",
      INDEXER_ENABLED: "false",
      RATE_LIMIT_IP_BURST: "1000000",
      RATE_LIMIT_IP_PER_MINUTE: "1000000",
      RATE_LIMIT_ID_BURST: "1000000",
      RATE_LIMIT_ID_PER_MINUTE: "1000000",
      TX_POLL_INTERVAL_MS: "600000"
    }
    yield* Layer.buildWithScope(withSettings(RelayerLive, env), yield* Effect.scope)
    return { chain, relayerUrl, proxy }
  })
).pipe(Layer.provide(Logger.minimumLogLevel(LogLevel.Warning)))

// ---------------------------------------------------------------------------------------------

const json = (value: unknown) => JSON.stringify(value, (_, v) => (typeof v === "bigint" ? v.toString() : v))

const stats = (samples: readonly number[]) => {
  const sorted = [...samples].sort((a, b) => a - b)
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!
  return { n: sorted.length, p50: at(0.5), p95: at(0.95), max: sorted[sorted.length - 1]! }
}

const rpc = async (url: string, method: string, params: unknown[]) => {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params })
  })
  const body = (await res.json()) as { result?: unknown; error?: { message: string } }
  if (body.error) throw new Error(`${method}: ${body.error.message}`)
  return body.result
}

async function main() {
  const runtime = ManagedRuntime.make(bench)
  try {
    const { chain, relayerUrl, proxy } = await runtime.runPromise(BenchDevnet)
    const rpcUrl = chain.anvil.rpcUrl
    const vault = chain.deployment.vault
    const usdt = chain.deployment.settlementAsset
    const relayerAddress = privateKeyToAccount(devnetKeys.relayer).address

    // Accounts, funded straight on anvil (not through the proxy): one mint, one approval, deposits.
    const accounts = Array.from({ length: CLAIMS }, () => {
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
    const total = AMOUNT * BigInt(CLAIMS)
    await write({ address: usdt, abi: testTokenAbi, functionName: "mint", args: [admin.address, total] })
    await write({ address: usdt, abi: testTokenAbi, functionName: "approve", args: [vault, total] })
    for (const a of accounts)
      await write({ address: vault, abi: feeVaultAbi, functionName: "deposit", args: [a.id, usdt, AMOUNT] })
    for (const hash of hashes) await publicClient.waitForTransactionReceipt({ hash })

    const relayer = await Effect.runPromise(relayerFetchClient(relayerUrl))
    const urlParams = Schema.decodeUnknownSync(QuoteQuery)({
      asset: usdt,
      adapter: zeroAddress,
      register: "1"
    })
    const fee = (await Effect.runPromise(relayer.quote.quote({ urlParams }))).relayerFee

    const deadline = BigInt(Math.floor(Date.now() / 1000) + 3600)
    const bodies = await Promise.all(
      accounts.map((a) =>
        directClaimBody({
          signer: a.owner,
          chainId: chain.deployment.chainId,
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
      )
    )

    // Claims, one at a time; RPC calls counted only while a claim request is open.
    const claimMs: number[] = []
    const claimHashes: Hex[] = []
    proxy.counts.clear()
    for (const body of bodies) {
      proxy.counting = true
      const started = performance.now()
      const res = await fetch(`${relayerUrl}/v1/claim`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body
      })
      const answer = (await res.json()) as { txHash?: Hex }
      claimMs.push(performance.now() - started)
      proxy.counting = false
      if (res.status !== 200 || answer.txHash === undefined)
        throw new Error(`claim refused: ${res.status} ${json(answer)}`)
      claimHashes.push(answer.txHash)
    }
    const perMethod = [...proxy.counts].sort((a, b) => b[1] - a[1])
    const calls = perMethod.reduce((sum, [, n]) => sum + n, 0)

    // The claims are checked on anvil directly so the check does not count.
    const reader = createPublicClient({ transport: viemHttp(rpcUrl) })
    let failed = 0
    for (const hash of claimHashes) {
      const receipt = await reader.waitForTransactionReceipt({ hash, pollingInterval: 50 })
      if (receipt.status !== "success") failed++
    }

    // Baselines through the same proxy: a read, and a pre-signed transfer from a spare account.
    const callData = encodeAbiParameters([{ type: "address" }], [relayerAddress]).slice(2)
    const callMs: number[] = []
    for (let i = 0; i < CLAIMS; i++) {
      const started = performance.now()
      await rpc(proxy.url, "eth_call", [{ to: usdt, data: `0x70a08231${callData}` }, "latest"])
      callMs.push(performance.now() - started)
    }
    const spender = devnetAccount(7)
    const { walletClient: spenderWallet, publicClient: spenderReader } = await devnetClients(rpcUrl, spender)
    const firstNonce = await spenderReader.getTransactionCount({
      address: spender.address,
      blockTag: "pending"
    })
    const gasPrice = (await spenderReader.getGasPrice()) * 2n
    const signed = await Promise.all(
      Array.from({ length: CLAIMS }, (_, i) =>
        spenderWallet.signTransaction({
          to: privateKeyToAccount(generatePrivateKey()).address as Address,
          value: parseEther("0.001"),
          nonce: firstNonce + i,
          gas: 21_000n,
          gasPrice,
          type: "legacy"
        })
      )
    )
    const sendMs: number[] = []
    for (const raw of signed) {
      const started = performance.now()
      await rpc(proxy.url, "eth_sendRawTransaction", [raw])
      sendMs.push(performance.now() - started)
    }

    const row = (series: string, samples: readonly number[], rpcPerOp: string) => {
      const s = stats(samples)
      return {
        series,
        n: s.n,
        "p50 ms": s.p50.toFixed(2),
        "p95 ms": s.p95.toFixed(2),
        "max ms": s.max.toFixed(2),
        "RPC calls/op": rpcPerOp
      }
    }
    console.log(`POST /v1/claim (register + direct), ${CLAIMS} claims one at a time; ${failed} reverted`)
    console.table([
      row("POST /v1/claim -> txHash", claimMs, (calls / CLAIMS).toFixed(1)),
      row("raw eth_call (via proxy)", callMs, "1"),
      row("raw eth_sendRawTransaction (via proxy)", sendMs, "1")
    ])
    console.log("RPC calls per claim, by method:")
    console.table(
      perMethod.map(([method, n]) => ({ method, total: n, "per claim": (n / CLAIMS).toFixed(2) }))
    )
    if (failed > 0) process.exitCode = 1
  } finally {
    await runtime.dispose()
  }
}

main().catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
