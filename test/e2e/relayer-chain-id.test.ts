/**
 * The relayer without `CHAIN_ID` (and without a deployment file that names it) reads the chain id
 * from its RPC on first use, not while it starts: behind an RPC proxy that is down it starts and
 * answers (503 `unavailable` where the chain id or the chain is needed); once the RPC answers, its
 * config names the chain and a signed claim is checked and relayed.
 */

import { Effect, Exit, Layer, Scope } from "effect"
import { encodeAbiParameters, type Hex, keccak256, zeroAddress } from "viem"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freeLoopbackPort, relayerEnv, withSettings } from "../../layers/devnet.js"
import { Relayer } from "../../layers/relayer.js"
import { type RpcProxy, startRpcProxy } from "../chain/rpcProxy.js"
import { E18, freshAddress, freshOwner, json, VaultDevnet } from "./support/relayerDevnet.js"

const TIMEOUT = 180_000

let net: VaultDevnet
let proxy: RpcProxy
let scope: Scope.CloseableScope | undefined

beforeAll(async () => {
  net = await VaultDevnet.start("relayer-chain-id")
  proxy = await startRpcProxy(net.rpcUrl)
}, TIMEOUT)
afterAll(async () => {
  if (scope !== undefined) await Effect.runPromise(Scope.close(scope, Exit.void))
  await proxy?.close()
  await net?.dispose()
})

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const get = async (url: string) => {
  const res = await fetch(url)
  return { status: res.status, body: (await res.json()) as Record<string, unknown> }
}

describe("relayer without CHAIN_ID", () => {
  it("starts with its RPC down and checks signatures once the RPC answers", {
    timeout: TIMEOUT
  }, async () => {
    proxy.setRule(() => ({ kind: "destroy" }))
    const port = await Effect.runPromise(freeLoopbackPort)
    const { DEPLOYMENT_FILE: _, ...devnetEnv } = relayerEnv(net.chain, port)
    const deployment = net.chain.deployment
    const env: Record<string, string> = {
      ...devnetEnv,
      RPC_URL: proxy.url,
      RPC_TIMEOUT_MS: "2000",
      FEE_VAULT: deployment.vault,
      SETTLEMENT_ASSET: deployment.settlementAsset,
      SHIELD_ADAPTER: deployment.shieldAdapter,
      ...(deployment.swapRouter === undefined ? {} : { SWAP_ROUTER: deployment.swapRouter }),
      GAS_PRICE_REFRESH_MS: "200",
      TX_POLL_INTERVAL_MS: "100",
      INDEXER_POLL_INTERVAL_MS: "100"
    }
    const started = await Effect.runPromise(Scope.make())
    scope = started
    await Effect.runPromise(
      Layer.buildWithScope(withSettings(Relayer.layer, env), started).pipe(Effect.timeout("60 seconds"))
    )
    const base = `http://127.0.0.1:${port}`

    // Up, and honest that the chain is not answering.
    const health = await get(`${base}/v1/health`)
    expect(health.status).toBe(503)
    expect(health.body.code).toBe("unavailable")
    expect((await get(`${base}/v1/config`)).status).toBe(503)

    proxy.reset()
    // The chain client's circuit opened while the RPC was down: it lets a probe through after
    // RPC_CIRCUIT_PROBE_MS (2 s by default), and the first answer closes it.
    let config = await get(`${base}/v1/config`)
    for (let i = 0; i < 100 && config.status === 503; i++) {
      await sleep(100)
      config = await get(`${base}/v1/config`)
    }
    expect(config.status).toBe(200)
    expect(config.body.chainId).toBe(deployment.chainId)

    // A claim signed over the chain's domain: the signature check needs the chain id.
    const owner = freshOwner()
    await net.registerOwner(owner)
    await net.deposit(owner.id, net.settlementAsset, 50n * E18)
    // The gas price refresher, failing while the RPC was down, answers after its next try.
    let quoted = await get(`${base}/v1/quote?asset=${net.settlementAsset}&adapter=${zeroAddress}`)
    for (let i = 0; i < 300 && quoted.status === 503; i++) {
      await sleep(100)
      quoted = await get(`${base}/v1/quote?asset=${net.settlementAsset}&adapter=${zeroAddress}`)
    }
    expect(quoted.status, json(quoted.body)).toBe(200)
    const recipient = freshAddress()
    const adapterData = encodeAbiParameters([{ type: "address" }], [recipient])
    const claim = {
      beneficiaryId: owner.id,
      asset: net.settlementAsset,
      amount: 20n * E18,
      adapter: zeroAddress,
      dataHash: keccak256(adapterData),
      relayer: net.relayerAddress,
      relayerFee: BigInt(quoted.body.relayerFee as string),
      nonce: 0n,
      deadline: BigInt(Math.floor(Date.now() / 1000) + 3600)
    }
    const signature = await net.sign(owner.signer, "Claim", claim)
    // A signature by someone else is refused as such, not as the chain being away.
    const forged = await net.sign(freshOwner().signer, "Claim", claim)
    const refused = await fetch(`${base}/v1/claim`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: json({ claim, adapterData, signature: forged })
    })
    expect(((await refused.json()) as { code?: string }).code).toBe("invalid_signature")

    const accepted = await fetch(`${base}/v1/claim`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: json({ claim, adapterData, signature })
    })
    const body = (await accepted.json()) as { txHash?: Hex }
    expect(accepted.status).toBe(200)
    for (let i = 0; i < 200; i++) {
      if ((await net.tokenBalance(net.settlementAsset, recipient)) > 0n) break
      await sleep(50)
    }
    expect(await net.tokenBalance(net.settlementAsset, recipient)).toBe(claim.amount - claim.relayerFee)
    expect(body.txHash).toMatch(/^0x[0-9a-f]{64}$/)
  })
})
