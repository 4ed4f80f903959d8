/**
 * Fifty claims at once against one private devnet relayer: every claim registers its own kind-1
 * account in the same transaction, all are accepted and mined, every recipient is paid, and the
 * hot key's nonces come out contiguous, with no gap and no reuse, however the requests interleave.
 */
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Context, Effect, Layer, ManagedRuntime } from "effect"
import {
  type Address,
  createPublicClient,
  encodeAbiParameters,
  type Hex,
  http,
  keccak256,
  toHex,
  zeroAddress
} from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
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
import { vaultDomain, vaultTypes } from "../../schema/eip712.js"
import { computeId, ownerCommitment } from "../../schema/ids.js"

const E18 = 10n ** 18n
const CLAIMS = 50
const AMOUNT = 10n * E18

class ConcurrentDevnet extends Context.Tag("ConcurrentDevnet")<
  ConcurrentDevnet,
  { readonly chain: DevnetChain; readonly relayerUrl: string }
>() {}

const devnet = Layer.scoped(
  ConcurrentDevnet,
  Effect.gen(function* () {
    const chain = yield* devnetChain({ dir: join(tmpdir(), `claims-concurrent-e2e-${process.pid}`) })
    const port = yield* freeLoopbackPort
    const relayerUrl = `http://127.0.0.1:${port}`
    yield* writeDevnetFile(chain, { relayerUrl, attestorUrl: "http://127.0.0.1:1" })
    const env = {
      ...relayerEnv(chain, port),
      INDEXER_ENABLED: "false",
      TRUST_PROXY: "1",
      // Each request also has its own client address; the raised limits are a second guard.
      RATE_LIMIT_IP_BURST: "1000",
      RATE_LIMIT_IP_PER_MINUTE: "1000",
      TX_POLL_INTERVAL_MS: "100"
    }
    yield* Layer.buildWithScope(withSettings(RelayerLive, env), yield* Effect.scope)
    return { chain, relayerUrl }
  })
)

const runtime = ManagedRuntime.make(devnet)
let chain: DevnetChain
let relayerUrl = ""
let rpcUrl = ""
let vault: Address
let usdt: Address
const relayerAddress = privateKeyToAccount(devnetKeys.relayer).address

beforeAll(async () => {
  ;({ chain, relayerUrl } = await runtime.runPromise(ConcurrentDevnet))
  rpcUrl = chain.anvil.rpcUrl
  vault = chain.deployment.vault
  usdt = chain.deployment.settlementAsset
}, 180_000)
afterAll(() => runtime.dispose())

// No cache: the block number is read before and after the burst and must be fresh both times.
const publicClient = () => createPublicClient({ transport: http(rpcUrl), cacheTime: 0 })

let clients = 0
const nextClient = () => {
  clients++
  return `10.${(clients >> 16) & 255}.${(clients >> 8) & 255}.${clients & 255}`
}

const json = (value: unknown) => JSON.stringify(value, (_, v) => (typeof v === "bigint" ? v.toString() : v))

const txStatus = async (txHash: Hex) => {
  const res = await fetch(`${relayerUrl}/v1/tx-status`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-forwarded-for": nextClient() },
    body: json({ txHash })
  })
  return (await res.json()) as { status: string; blockNumber?: number }
}

const untilSettled = async (txHash: Hex) => {
  for (let i = 0; i < 600; i++) {
    const status = await txStatus(txHash)
    if (status.status !== "pending") return status.status
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  return "pending"
}

interface Account {
  readonly owner: ReturnType<typeof privateKeyToAccount>
  readonly salt: Hex
  readonly id: Hex
  readonly recipient: Address
}

const newAccount = (): Account => {
  const owner = privateKeyToAccount(generatePrivateKey())
  const salt = keccak256(toHex(owner.address))
  return {
    owner,
    salt,
    id: computeId(1, ownerCommitment(owner.address, salt), zeroAddress, 0n),
    recipient: privateKeyToAccount(generatePrivateKey()).address
  }
}

/** Funds every id from the admin (#0): one mint, one approval, then one deposit each. */
const fund = async (ids: readonly Hex[], amount: bigint) => {
  const admin = devnetAccount(0)
  const { publicClient: reader, walletClient } = await devnetClients(rpcUrl, admin)
  let nonce = await reader.getTransactionCount({ address: admin.address, blockTag: "pending" })
  const hashes: Hex[] = []
  // Explicit nonces let the sends go out back to back without waiting for each receipt.
  const write = async (request: Record<string, unknown>) =>
    hashes.push(await walletClient.writeContract({ ...request, nonce: nonce++ } as never))
  await write({
    address: usdt,
    abi: testTokenAbi,
    functionName: "mint",
    args: [admin.address, amount * BigInt(ids.length)]
  })
  await write({
    address: usdt,
    abi: testTokenAbi,
    functionName: "approve",
    args: [vault, amount * BigInt(ids.length)]
  })
  for (const id of ids)
    await write({ address: vault, abi: feeVaultAbi, functionName: "deposit", args: [id, usdt, amount] })
  for (const hash of hashes) {
    const receipt = await reader.waitForTransactionReceipt({ hash })
    if (receipt.status !== "success") throw new Error(`funding transaction reverted: ${hash}`)
  }
}

describe("concurrent claims", () => {
  it(`${CLAIMS} claims with registration at once: all mined, all paid, hot-key nonces contiguous`, async () => {
    const accounts = Array.from({ length: CLAIMS }, newAccount)
    await fund(
      accounts.map((a) => a.id),
      AMOUNT
    )
    for (const a of accounts)
      expect(
        await publicClient().readContract({
          address: vault,
          abi: feeVaultAbi,
          functionName: "balanceOf",
          args: [a.id, usdt]
        })
      ).toBe(AMOUNT)

    const query = new URLSearchParams({ asset: usdt, adapter: zeroAddress, register: "1" })
    const quoted = await fetch(`${relayerUrl}/v1/quote?${query}`, {
      headers: { "x-forwarded-for": nextClient() }
    })
    expect(quoted.status).toBe(200)
    const fee = BigInt(((await quoted.json()) as { relayerFee: string }).relayerFee)
    expect(fee).toBeGreaterThan(0n)
    expect(fee).toBeLessThan(AMOUNT)

    const deadline = BigInt(Math.floor(Date.now() / 1000) + 3600)
    const bodies = await Promise.all(
      accounts.map(async (a) => {
        const adapterData = encodeAbiParameters([{ type: "address" }], [a.recipient])
        const claim = {
          beneficiaryId: a.id,
          asset: usdt,
          amount: AMOUNT,
          adapter: zeroAddress,
          dataHash: keccak256(adapterData),
          relayer: relayerAddress,
          relayerFee: fee,
          nonce: 0n,
          deadline
        }
        const signature = await a.owner.signTypedData({
          domain: vaultDomain(chain.deployment.chainId, vault),
          types: vaultTypes,
          primaryType: "Claim",
          message: claim
        })
        const register = {
          kind: 1,
          owner: a.owner.address,
          salt: a.salt,
          fallbackRecipient: zeroAddress,
          fallbackDelay: 0n
        }
        return json({ claim, adapterData, signature, register })
      })
    )

    const reader = publicClient()
    const startBlock = await reader.getBlockNumber()
    const startNonce = await reader.getTransactionCount({ address: relayerAddress, blockTag: "latest" })

    const answers = await Promise.all(
      bodies.map(async (body) => {
        const res = await fetch(`${relayerUrl}/v1/claim`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-forwarded-for": nextClient() },
          body
        })
        return { status: res.status, body: (await res.json()) as { txHash?: Hex; code?: string } }
      })
    )
    const refused = answers.filter((a) => a.status !== 200 || a.body.txHash === undefined)
    expect(refused).toEqual([])
    const hashes = answers.map((a) => a.body.txHash!)
    expect(new Set(hashes).size).toBe(CLAIMS)

    const statuses = await Promise.all(hashes.map(untilSettled))
    expect(statuses).toEqual(Array(CLAIMS).fill("success"))

    for (const a of accounts) {
      expect(
        await reader.readContract({
          address: usdt,
          abi: testTokenAbi,
          functionName: "balanceOf",
          args: [a.recipient]
        })
      ).toBe(AMOUNT - fee)
    }

    // The hot key's mined transactions over the window, whichever hash (original or a
    // replacement) made it in: their nonces must be exactly start..start+49.
    const endBlock = await reader.getBlockNumber()
    const nonces: number[] = []
    for (let block = startBlock + 1n; block <= endBlock; block++) {
      const { transactions } = await reader.getBlock({ blockNumber: block, includeTransactions: true })
      for (const tx of transactions)
        if (tx.from.toLowerCase() === relayerAddress.toLowerCase()) nonces.push(tx.nonce)
    }
    nonces.sort((a, b) => a - b)
    expect(nonces).toEqual(Array.from({ length: CLAIMS }, (_, i) => startNonce + i))
    expect(await reader.getTransactionCount({ address: relayerAddress, blockTag: "latest" })).toBe(
      startNonce + CLAIMS
    )
    // Each returned hash is itself on chain from the hot key (no replacement needed on anvil).
    const sent = await Promise.all(hashes.map((hash) => reader.getTransaction({ hash })))
    expect(new Set(sent.map((tx) => tx.nonce)).size).toBe(CLAIMS)
  }, 300_000)
})
