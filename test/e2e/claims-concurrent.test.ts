/**
 * Fifty claims at once against one private devnet relayer: every claim registers its own kind-1
 * account in the same transaction, all are accepted and mined, every recipient is paid, and the
 * hot key's nonces come out contiguous, with no gap and no reuse, however the requests interleave.
 */
import { createPublicClient, type Hex, http, zeroAddress } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { feeVaultAbi, testTokenAbi } from "../../contracts/abi.js"
import { devnetAccount, devnetClients } from "../../contracts/deploy.js"
import { directClaimBody } from "../support/directClaim.js"
import { E18, freshOwner, RelayerDevnet } from "./support/relayerDevnet.js"

const CLAIMS = 50
const AMOUNT = 10n * E18

let net: RelayerDevnet

beforeAll(async () => {
  net = await RelayerDevnet.start("claims-concurrent-e2e", {
    INDEXER_ENABLED: "false",
    // Each request also has its own client address; the raised limits are a second guard.
    RATE_LIMIT_IP_BURST: "1000",
    RATE_LIMIT_IP_PER_MINUTE: "1000"
  })
}, 180_000)
afterAll(() => net?.dispose())

// No cache: the block number is read before and after the burst and must be fresh both times.
const publicClient = () => createPublicClient({ transport: http(net.rpcUrl), cacheTime: 0 })

const untilSettled = async (txHash: Hex) => {
  for (let i = 0; i < 600; i++) {
    const status = await net.txStatus(txHash)
    if (status.status !== "pending") return status.status
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  return "pending"
}

/** A fresh kind-1 account and a fresh recipient for its claim. */
const newAccount = () => ({ ...freshOwner(), recipient: privateKeyToAccount(generatePrivateKey()).address })

/** Funds every id from the admin (#0): one mint, one approval, then one deposit each. */
const fund = async (ids: readonly Hex[], amount: bigint) => {
  const { vault, settlementAsset: usdt } = net
  const admin = devnetAccount(0)
  const { publicClient: reader, walletClient } = await devnetClients(net.rpcUrl, admin)
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
    const { settlementAsset: usdt, relayerAddress } = net
    for (const a of accounts) expect(await net.vaultBalance(a.id, usdt)).toBe(AMOUNT)

    const fee = await net.quote({ asset: usdt, adapter: zeroAddress, register: "1" })
    expect(fee).toBeGreaterThan(0n)
    expect(fee).toBeLessThan(AMOUNT)

    const deadline = BigInt(Math.floor(Date.now() / 1000) + 3600)
    const bodies = await Promise.all(
      accounts.map((a) =>
        directClaimBody({
          signer: a.signer,
          chainId: net.chain.deployment.chainId,
          vault: net.vault,
          id: a.id,
          asset: usdt,
          amount: AMOUNT,
          recipient: a.recipient,
          relayer: relayerAddress,
          relayerFee: fee,
          nonce: 0n,
          deadline,
          register: a.register
        })
      )
    )

    const reader = publicClient()
    const startBlock = await reader.getBlockNumber()
    const startNonce = await reader.getTransactionCount({ address: relayerAddress, blockTag: "latest" })

    const answers = await Promise.all(
      bodies.map(async (body) => {
        const res = await net.post("/v1/claim", body)
        return { status: res.status, body: (await res.json()) as { txHash?: Hex; code?: string } }
      })
    )
    const refused = answers.filter((a) => a.status !== 200 || a.body.txHash === undefined)
    expect(refused).toEqual([])
    const hashes = answers.map((a) => a.body.txHash!)
    expect(new Set(hashes).size).toBe(CLAIMS)

    const statuses = await Promise.all(hashes.map(untilSettled))
    expect(statuses).toEqual(Array(CLAIMS).fill("success"))

    for (const a of accounts) expect(await net.tokenBalance(usdt, a.recipient)).toBe(AMOUNT - fee)

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
