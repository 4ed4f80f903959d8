/**
 * The chain RPC blackholed (it accepts requests and never answers) under the relayer as operators
 * run it: once the chain client's circuit has opened, each claim is refused 503 `unavailable`
 * well before one request's retries could have run out (RPC_TIMEOUT_MS per attempt, three
 * attempts), instead of waiting on every retry's timeout; and once the RPC answers again, the
 * next claim is accepted and mined.
 */
import { Effect } from "effect"
import { zeroAddress } from "viem"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freeLoopbackPort, relayerEnv, writeDevnetFile } from "../../layers/devnet.js"
import { type RpcProxy, startRpcProxy } from "../chain/rpcProxy.js"
import { directClaimBody } from "../support/directClaim.js"
import { type ServiceProcess, startService } from "../support/process.js"
import { type ClaimAnswer, claimWithin } from "./support/claimWithin.js"
import { E18, freshAddress, freshOwner, VaultDevnet } from "./support/relayerDevnet.js"

const TIMEOUT = 240_000
const RPC_TIMEOUT_MS = 3_000
const PROBE_MS = 1_000
/**
 * A generous bound on a refusal with the circuit open: at most one probe's attempt (one
 * RPC_TIMEOUT_MS) and the rest of the claim's work. Without the circuit, a single chain request
 * takes three timeouts and the backoff between them before it fails.
 */
const BOUND_MS = 2.5 * RPC_TIMEOUT_MS

let chain: VaultDevnet
let proxy: RpcProxy
let relayer: ServiceProcess | undefined

beforeAll(async () => {
  chain = await VaultDevnet.start("chain-fail-fast")
  await Effect.runPromise(
    writeDevnetFile(chain.chain, { relayerUrl: "http://127.0.0.1:1", attestorUrl: "http://127.0.0.1:1" })
  )
  proxy = await startRpcProxy(chain.rpcUrl)
}, TIMEOUT)
afterAll(async () => {
  await relayer?.stop()
  await proxy?.close()
  await chain?.dispose()
})

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe("a claim while the chain RPC is blackholed", () => {
  it("is refused 503 at once, and accepted again once the RPC answers", { timeout: TIMEOUT }, async () => {
    const port = await Effect.runPromise(freeLoopbackPort)
    relayer = startService("relayer", {
      ...relayerEnv(chain.chain, port),
      RPC_URL: proxy.url,
      RPC_TIMEOUT_MS: String(RPC_TIMEOUT_MS),
      RPC_CIRCUIT_PROBE_MS: String(PROBE_MS),
      INDEXER_ENABLED: "false",
      GAS_PRICE_REFRESH_MS: "200",
      TX_POLL_INTERVAL_MS: "200",
      DATA_DIR: "memory://"
    })
    const base = await relayer.url()

    const owners = []
    for (let i = 0; i < 5; i++) {
      const owner = freshOwner()
      await chain.registerOwner(owner)
      await chain.deposit(owner.id, chain.settlementAsset, 100n * E18)
      owners.push(owner)
    }
    const quote = await fetch(`${base}/v1/quote?asset=${chain.settlementAsset}&adapter=${zeroAddress}`)
    expect(quote.status).toBe(200)
    const fee = BigInt(((await quote.json()) as { relayerFee: string }).relayerFee)
    const recipient = freshAddress()
    const bodies = await Promise.all(
      owners.map((owner) =>
        directClaimBody({
          signer: owner.signer,
          chainId: chain.chain.deployment.chainId,
          vault: chain.vault,
          id: owner.id,
          asset: chain.settlementAsset,
          amount: 10n * E18,
          recipient,
          relayer: chain.relayerAddress,
          relayerFee: fee,
          nonce: 0n,
          deadline: BigInt(Math.floor(Date.now() / 1000) + 86_400)
        })
      )
    )

    proxy.setRule(() => ({ kind: "hang" }))
    // The first claim meets a closed circuit: it may wait for its requests' timeouts, which open it.
    const first = await claimWithin(base, bodies[0]!, 60_000)
    expect(first).toMatchObject({ status: 503, code: "unavailable" })

    // From then on, each claim is refused within the bound.
    const refused: Array<ClaimAnswer> = []
    for (const body of bodies.slice(1, 4)) {
      refused.push(await claimWithin(base, body, BOUND_MS))
      await sleep(200)
    }
    expect(refused.map((a) => [a.status, a.code])).toEqual(Array(3).fill([503, "unavailable"]))

    // The RPC answers again: once a probe may go out (and one sent into the blackhole has timed
    // out), the next claim is accepted and mined.
    proxy.reset()
    await sleep(RPC_TIMEOUT_MS + PROBE_MS + 500)
    const accepted = await claimWithin(base, bodies[4]!, 60_000)
    expect(accepted.status).toBe(200)
    const deadline = Date.now() + 60_000
    while ((await chain.vaultAccount(owners[4]!.id)).nonce !== 1n && Date.now() < deadline) await sleep(200)
    expect((await chain.vaultAccount(owners[4]!.id)).nonce).toBe(1n)

    const logs = `${relayer.stdout()}\n${relayer.stderr()}`
    expect(logs).toMatch(/circuit is open/)
    expect(logs).not.toContain(proxy.url.replace("http://", ""))
  })
})
