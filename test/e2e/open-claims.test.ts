/**
 * Open claims (`claim.relayer = 0x0`, docs/relayer.md §8 "Open claims"):
 *
 * - without a private send RPC, a bot copies one from the mempool and gets it mined first: the
 *   relayer's copy reverts, `relayer_claims_frontrun_total` counts it, and the account is not put
 *   on a revert cooldown (its next claim is relayed);
 * - with `OPEN_CLAIMS=private-only`, the claim reaches the chain through `SEND_RPC_URL` alone: a
 *   recording proxy in front of each RPC sees `eth_sendRawTransaction` on the send RPC and never
 *   on `RPC_URL`.
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Exit, Layer, Metric, Scope } from "effect"
import { type Hex, parseGwei, toHex, zeroAddress } from "viem"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { devnetAccount, devnetClients } from "../../contracts/deploy.js"
import { freeLoopbackPort, relayerEnv, withSettings } from "../../layers/devnet.js"
import { Relayer } from "../../layers/relayer.js"
import { claimsFrontrun } from "../../src/relayer/metrics.js"
import { type RpcProxy, startRpcProxy } from "../chain/rpcProxy.js"
import { rpc } from "../relayer/txsender-support.js"
import { directClaimBody } from "../support/directClaim.js"
import { E18, freshAddress, freshOwner, json, RelayerDevnet } from "./support/relayerDevnet.js"

let net: RelayerDevnet
const closers: Array<() => Promise<void>> = []

beforeAll(async () => {
  net = await RelayerDevnet.start("open-claims-e2e", {
    INDEXER_ENABLED: "false",
    RATE_LIMIT_IP_BURST: "1000",
    RATE_LIMIT_IP_PER_MINUTE: "1000"
  })
}, 180_000)
afterAll(async () => {
  for (const close of closers.reverse()) await close()
  await net?.dispose()
}, 60_000)

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const fundedOwner = async () => {
  const owner = freshOwner()
  await net.registerOwner(owner)
  await net.deposit(owner.id, net.settlementAsset, 100n * E18)
  return owner
}

const openClaim = (owner: Awaited<ReturnType<typeof fundedOwner>>, nonce: bigint, fee: bigint) =>
  directClaimBody({
    signer: owner.signer,
    chainId: net.chain.deployment.chainId,
    vault: net.vault,
    id: owner.id,
    asset: net.settlementAsset,
    amount: 10n * E18,
    recipient: freshAddress(),
    relayer: zeroAddress,
    relayerFee: fee,
    nonce,
    deadline: BigInt(Math.floor(Date.now() / 1000) + 30 * 86_400)
  })

const frontrunCount = () =>
  Effect.runPromise(Effect.map(Metric.value(claimsFrontrun), (state) => state.count))

/** The status of `hash` on the chain once it is mined. */
const receiptStatus = async (hash: Hex) => {
  for (let i = 0; i < 200; i++) {
    const receipt = await rpc<{ status: Hex } | null>(net.rpcUrl, "eth_getTransactionReceipt", [hash])
    if (receipt !== null) return receipt.status === "0x1" ? "success" : "reverted"
    await sleep(50)
  }
  throw new Error("not mined")
}

describe("an open claim", () => {
  it("copied from the mempool and mined first: counted as front-run, not against the account", async () => {
    const owner = await fundedOwner()
    const fee = await net.quote({ asset: net.settlementAsset, adapter: zeroAddress })
    const before = await frontrunCount()
    const bot = devnetAccount(7)
    const botBalance = await net.tokenBalance(net.settlementAsset, bot.address)
    await rpc(net.rpcUrl, "evm_setAutomine", [false])
    let ours: Hex
    let theirs: Hex
    try {
      const res = await net.post("/v1/claim", await openClaim(owner, 0n, fee))
      const body = (await res.json()) as { txHash?: Hex }
      expect(res.status, json(body)).toBe(200)
      ours = body.txHash as Hex
      // The bot reads the pending transaction and sends its calldata with a higher tip.
      const pending = await rpc<{ input: Hex }>(net.rpcUrl, "eth_getTransactionByHash", [ours])
      const { walletClient } = await devnetClients(net.rpcUrl, bot)
      theirs = await walletClient.sendTransaction({
        to: net.vault,
        data: pending.input,
        gas: 500_000n,
        maxPriorityFeePerGas: parseGwei("50"),
        maxFeePerGas: parseGwei("500")
      } as never)
    } finally {
      await rpc(net.rpcUrl, "evm_mine")
      await rpc(net.rpcUrl, "evm_setAutomine", [true])
    }
    expect(await receiptStatus(theirs)).toBe("success")
    expect(await receiptStatus(ours)).toBe("reverted")
    expect(await net.tokenBalance(net.settlementAsset, bot.address)).toBe(botBalance + fee)

    for (let i = 0; i < 200 && (await frontrunCount()) === before; i++) await sleep(50)
    expect(await frontrunCount()).toBe(before + 1)
    // Not the account's doing: its next claim is relayed.
    await net.mined(await net.post("/v1/claim", await openClaim(owner, 1n, fee)))
    expect((await net.vaultAccount(owner.id)).nonce).toBe(2n)
  }, 120_000)

  it("under OPEN_CLAIMS=private-only goes out through SEND_RPC_URL alone", async () => {
    const reads: RpcProxy = await startRpcProxy(net.rpcUrl)
    const sends: RpcProxy = await startRpcProxy(net.rpcUrl)
    closers.push(reads.close, sends.close)
    const port = await Effect.runPromise(freeLoopbackPort)
    // A relayer of its own, with another hot key (#6), reading through one proxy and sending through the other.
    const hotKey = toHex(devnetAccount(6).getHdKey().privateKey as Uint8Array)
    const scope = await Effect.runPromise(Scope.make())
    closers.push(() => Effect.runPromise(Scope.close(scope, Exit.void)))
    await Effect.runPromise(
      Layer.buildWithScope(
        withSettings(Relayer.layer, {
          ...relayerEnv(net.chain, port),
          RPC_URL: reads.url,
          SEND_RPC_URL: sends.url,
          OPEN_CLAIMS: "private-only",
          RELAYER_PRIVATE_KEY: hotKey,
          DATA_DIR: mkdtempSync(join(tmpdir(), "open-claims-private-")),
          INDEXER_ENABLED: "false",
          TX_POLL_INTERVAL_MS: "100"
        }),
        scope
      )
    )
    const owner = await fundedOwner()
    const fee = await net.quote({ asset: net.settlementAsset, adapter: zeroAddress })
    reads.reset()
    sends.reset()
    const res = await fetch(`http://127.0.0.1:${port}/v1/claim`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: await openClaim(owner, 0n, fee)
    })
    const body = (await res.json()) as { txHash?: Hex }
    expect(res.status, json(body)).toBe(200)
    expect(await receiptStatus(body.txHash as Hex)).toBe("success")
    expect(sends.count("eth_sendRawTransaction")).toBeGreaterThanOrEqual(1)
    expect(reads.count("eth_sendRawTransaction")).toBe(0)
    // Reads did go through RPC_URL: the proxy in front of it was in use.
    expect(reads.count("eth_estimateGas")).toBeGreaterThanOrEqual(1)
  }, 180_000)
})
