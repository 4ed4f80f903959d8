/**
 * `POST /v1/tx-status` end to end: the relayer runs in this process against anvil with its
 * embedded database on disk, transactions go out through its `TxSender` (the hot key's only
 * owner), and their status is read over HTTP. A stuck transaction is replaced and both hashes
 * follow the mined one; a restart keeps tracking what was pending and continues the nonces.
 */
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Layer, ManagedRuntime } from "effect"
import type { Address, Hex } from "viem"
import { keccak256, toHex } from "viem"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { withSettings } from "../../layers/devnet.js"
import { Relayer } from "../../layers/relayer.js"
import { type AnvilInstance, spawnAnvil } from "../../src/chain/anvil.js"
import { RelayerSettings } from "../../src/config/relayer.js"
import { serverUrl } from "../../src/http/server.js"
import { type TxRequest, TxSender } from "../../src/txsender/TxSender.js"
import { poolOf, rpc, testKey } from "../relayer/txsender-support.js"

const METRICS_TOKEN = "tx-status-test"
const hotKey = testKey(1)
const dir = mkdtempSync(join(tmpdir(), "tx-status-"))
const deploymentFile = join(dir, "deployment.json")
writeFileSync(
  deploymentFile,
  JSON.stringify({
    chainId: 31337,
    vault: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
    settlementAsset: "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512",
    shieldAdapter: "0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0",
    swapRouter: "0xCf7Ed3AccA5a467e9e704C703E8D87F634fB0Fc9",
    startBlock: 0,
    quotedFullBalance: true,
    assets: {}
  })
)

/** The relayer with its services exposed, so the test can hand transactions to its sender. */
const relayer = Relayer.server.pipe(
  Layer.provideMerge(Relayer.services),
  Layer.provideMerge(RelayerSettings.layer)
)

let anvil: AnvilInstance
let port: number

const start = () =>
  ManagedRuntime.make(
    withSettings(relayer, {
      RPC_URL: anvil.rpcUrl,
      DEPLOYMENT_FILE: deploymentFile,
      RELAYER_PRIVATE_KEY: hotKey.privateKey,
      METRICS_TOKEN,
      DATA_DIR: join(dir, "data"),
      INDEXER_ENABLED: "false",
      TX_REPLACE_AFTER_SECONDS: "1",
      TX_MAX_REPLACEMENTS: "1",
      TX_POLL_INTERVAL_MS: "100",
      HOST: "127.0.0.1",
      // Any free port, read back once bound: a port picked beforehand can be taken meanwhile.
      PORT: "0"
    })
  )

let running: ReturnType<typeof start>

/** Starts the relayer and learns the port it is bound to. */
const startRelayer = async () => {
  running = start()
  await running.runtime()
  port = Number(new URL(await running.runPromise(serverUrl)).port)
}

const submit = (request: TxRequest) =>
  running.runPromise(Effect.flatMap(TxSender, (sender) => sender.submit(request)))

const txStatus = async (txHash: Hex) => {
  const response = await fetch(`http://127.0.0.1:${port}/v1/tx-status`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ txHash })
  })
  return { status: response.status, body: (await response.json()) as Record<string, unknown> }
}

const until = async <A>(probe: () => Promise<A | undefined>, seconds = 20): Promise<A> => {
  const deadline = Date.now() + seconds * 1000
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error("condition not reached in time")
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

const settled = (txHash: Hex) =>
  until(async () => {
    const { body } = await txStatus(txHash)
    return body.status === "pending" ? undefined : body
  })

const pool = () => Effect.runPromise(poolOf(anvil.rpcUrl, hotKey.address))
const nonceOf = async (hash: Hex) =>
  Number((await rpc<{ nonce: Hex } | null>(anvil.rpcUrl, "eth_getTransactionByHash", [hash]))?.nonce)

const SINK: Address = "0x00000000000000000000000000000000000051a4"
const transfer = (value: bigint): TxRequest => ({ to: SINK, data: "0x", value, gas: 21_000n })

beforeAll(async () => {
  anvil = await spawnAnvil()
  await startRelayer()
}, 120_000)

afterAll(async () => {
  await running?.dispose()
  await anvil?.stop()
})

describe("POST /v1/tx-status", () => {
  it("answers unknown for a hash this relayer never sent, and 400 for a malformed one", async () => {
    const random = keccak256(toHex("never sent"))
    expect(await txStatus(random)).toEqual({ status: 200, body: { txHash: random, status: "unknown" } })
    const malformed = await txStatus("0x1234")
    expect(malformed.status).toBe(400)
    expect(malformed.body.code).toBe("bad_request")
  })

  it("a stuck transaction is replaced; after mining both hashes report the mined outcome", async () => {
    await rpc(anvil.rpcUrl, "evm_setAutomine", [false])
    try {
      const original = await submit(transfer(1n))
      expect((await txStatus(original)).body).toEqual({ txHash: original, status: "pending" })
      const nonce = await nonceOf(original)
      const replacement = await until(async () => {
        const tx = (await pool())[String(nonce)]
        return tx !== undefined && tx.hash !== original ? tx.hash : undefined
      })
      await rpc(anvil.rpcUrl, "evm_mine")
      const a = await settled(original)
      const b = await settled(replacement)
      expect(a).toMatchObject({ txHash: original, status: "success" })
      expect(b).toEqual({ txHash: replacement, status: "success", blockNumber: a.blockNumber })

      const metrics = await fetch(`http://127.0.0.1:${port}/v1/metrics`, {
        headers: { authorization: `Bearer ${METRICS_TOKEN}` }
      }).then((r) => r.text())
      expect(metrics).toMatch(/^relayer_tx_replacements_total\{service="relayer",kind="bump"\} [1-9]/m)
      expect(metrics).toMatch(/^relayer_tx_sends_total\{service="relayer",outcome="accepted"\} [1-9]/m)
      expect(metrics).toMatch(/^relayer_hot_key_balance_wei\{service="relayer"\} [1-9]\d*$/m)
      expect(metrics).toMatch(/^relayer_tx_pending\{service="relayer"\} \d+$/m)
      // Classes and kinds only: no hash or address in any series.
      expect(metrics).not.toMatch(/0x[0-9a-f]{40}/i)
    } finally {
      await rpc(anvil.rpcUrl, "evm_setAutomine", [true])
    }
  })

  it("after a restart a pending transaction is still tracked and the next one takes the next nonce", async () => {
    await rpc(anvil.rpcUrl, "evm_setAutomine", [false])
    try {
      const first = await submit(transfer(2n))
      const nonce = await nonceOf(first)
      await running.dispose()
      await startRelayer()
      expect((await txStatus(first)).body).toEqual({ txHash: first, status: "pending" })
      const second = await submit(transfer(3n))
      expect(await nonceOf(second)).toBe(nonce + 1)
      await rpc(anvil.rpcUrl, "evm_mine")
      expect(await settled(first)).toMatchObject({ status: "success" })
      expect(await settled(second)).toMatchObject({ status: "success" })
      const count = await rpc<Hex>(anvil.rpcUrl, "eth_getTransactionCount", [hotKey.address, "latest"])
      expect(Number(count)).toBe(nonce + 2)
    } finally {
      await rpc(anvil.rpcUrl, "evm_setAutomine", [true])
    }
  }, 120_000)
})
