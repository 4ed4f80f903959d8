/**
 * The relayer killed with a transaction pending (SIGKILL, no shutdown hook runs) and started again
 * on the same database: the transaction is still tracked, the next claim gets the next nonce, and
 * once mined both carry consecutive nonces from the hot key (no gap, no reuse). The relayer runs
 * as its own Node process, the way an operator runs it; on its embedded database in a directory,
 * and on PostgreSQL too when `DATABASE_URL` is set. And the relayer killed between a claim's checks
 * and its store: the claim's retry after the restart goes through at once, its nonce not held by
 * the reservation the dead process left.
 */
import { join } from "node:path"
import { Effect, Schema } from "effect"
import { type Address, encodeAbiParameters, type Hex, keccak256, zeroAddress } from "viem"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freeLoopbackPort, relayerEnv, writeDevnetFile } from "../../layers/devnet.js"
import { ClaimRequest, QuoteQuery, TxStatusRequest } from "../../schema/relayer.js"
import { relayerFetchClient } from "../../src/client.js"
import { startRpcProxy } from "../chain/rpcProxy.js"
import { postgresSchema } from "../indexer/support/harness.js"
import { rpc } from "../relayer/txsender-support.js"
import { type ServiceProcess, startService } from "../support/process.js"
import { E18, freshAddress, freshOwner, json, VaultDevnet } from "./support/relayerDevnet.js"

// Each test starts the relayer process twice: slow on a busy machine.
const TEST_TIMEOUT = 360_000

// The chain only: the relayer runs as its own process here, so its HTTP helpers are this file's.
let net: VaultDevnet
const running: Array<ServiceProcess> = []

beforeAll(async () => {
  net = await VaultDevnet.start("relayer-restart-e2e")
}, 180_000)
afterAll(async () => {
  for (const service of running) await service.stop()
  await net?.dispose()
}, 60_000)

// ---------------------------------------------------------------------------------------------
// Chain helpers

/** A registered owner (EOA) with `amount` of the settlement asset in the vault. */
const fundedOwner = async (amount: bigint) => {
  const owner = freshOwner()
  await net.registerOwner(owner)
  await net.deposit(owner.id, net.settlementAsset, amount)
  return owner
}

const transactionOf = (hash: Hex) =>
  rpc<{ nonce: Hex; from: Address; blockNumber: Hex | null } | null>(net.rpcUrl, "eth_getTransactionByHash", [
    hash
  ])

const nonceOf = async (tag: "latest" | "pending") =>
  Number(await rpc<Hex>(net.rpcUrl, "eth_getTransactionCount", [net.relayerAddress, tag]))

const until = async <A>(what: string, check: () => Promise<A | undefined>, seconds = 60): Promise<A> => {
  const deadline = Date.now() + seconds * 1000
  while (Date.now() < deadline) {
    const value = await check()
    if (value !== undefined) return value
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`timed out waiting for ${what}`)
}

// ---------------------------------------------------------------------------------------------
// HTTP helpers

/** The typed client of the relayer process at `base`. */
const relayer = (base: string) => Effect.runSync(relayerFetchClient(base))

const quote = async (base: string) => {
  const urlParams = Schema.decodeUnknownSync(QuoteQuery)({ asset: net.settlementAsset, adapter: zeroAddress })
  return (await Effect.runPromise(relayer(base).quote.quote({ urlParams }))).relayerFee
}

const postClaim = async (
  base: string,
  owner: Awaited<ReturnType<typeof fundedOwner>>,
  recipient: Address,
  amount: bigint,
  fee: bigint
): Promise<Hex> => {
  const adapterData = encodeAbiParameters([{ type: "address" }], [recipient])
  const claim = {
    beneficiaryId: owner.id,
    asset: net.settlementAsset,
    amount,
    adapter: zeroAddress,
    dataHash: keccak256(adapterData),
    relayer: net.relayerAddress,
    relayerFee: fee,
    nonce: 0n,
    deadline: BigInt(Math.floor(Date.now() / 1000) + 3600)
  }
  const signature = await net.sign(owner.signer, "Claim", claim)
  const payload = Schema.decodeUnknownSync(ClaimRequest)(JSON.parse(json({ claim, adapterData, signature })))
  return (await Effect.runPromise(relayer(base).claims.claim({ payload }))).txHash
}

const txStatus = (base: string, txHash: Hex) =>
  Effect.runPromise(
    relayer(base).transactions.txStatus({ payload: Schema.decodeSync(TxStatusRequest)({ txHash }) })
  )

const health = async (base: string) => {
  const res = await fetch(`${base}/v1/health`)
  expect(res.status).toBe(200)
  return (await res.json()) as {
    sender: { address: Address; pending: number; nextNonce: string; balance: string }
  }
}

// ---------------------------------------------------------------------------------------------

const kinds = process.env.DATABASE_URL ? (["pglite", "postgresql"] as const) : (["pglite"] as const)

describe.each(kinds)("relayer killed with a transaction pending (%s)", (kind) => {
  it("still tracks it after a restart, and the next claim gets the next nonce", {
    timeout: TEST_TIMEOUT
  }, async () => {
    const { chain, relayerAddress, settlementAsset: usdt } = net
    const storage =
      kind === "postgresql"
        ? await postgresSchema(process.env.DATABASE_URL as string)
        : {
            storage: { kind: "pglite" as const, dataDir: join(chain.dir, "data", `relayer-${Date.now()}`) },
            drop: async () => {}
          }
    try {
      const port = await Effect.runPromise(freeLoopbackPort)
      await Effect.runPromise(
        writeDevnetFile(chain, { relayerUrl: `http://127.0.0.1:${port}`, attestorUrl: "http://127.0.0.1:1" })
      )
      const env = {
        ...relayerEnv(chain, port),
        ...(storage.storage.kind === "postgresql"
          ? { DATABASE_URL: storage.storage.url }
          : { DATA_DIR: storage.storage.dataDir }),
        INDEXER_ENABLED: "false",
        TX_POLL_INTERVAL_MS: "200"
      }
      const first = await fundedOwner(100n * E18)
      const second = await fundedOwner(100n * E18)
      const [recipientA, recipientB] = [freshAddress(), freshAddress()]
      const relayerTokensBefore = await net.tokenBalance(usdt, relayerAddress)

      const before = startService("relayer", env)
      running.push(before)
      const base = await before.url()
      const fee = await quote(base)
      const start = await nonceOf("latest")

      await rpc(net.rpcUrl, "evm_setAutomine", [false])
      const hashA = await postClaim(base, first, recipientA, 40n * E18, fee)
      expect((await txStatus(base, hashA)).status).toBe("pending")
      const pooled = await until("the claim in the pool", () =>
        transactionOf(hashA).then((t) => t ?? undefined)
      )
      expect(Number(pooled.nonce)).toBe(start)
      expect(pooled.blockNumber).toBeNull()

      // No shutdown hook runs: the process is gone mid-flight.
      before.child.kill("SIGKILL")
      expect(await before.exited).toBeNull()

      const after = startService("relayer", env)
      running.push(after)
      expect(await after.url()).toBe(base)
      expect(await txStatus(base, hashA)).toEqual({ txHash: hashA, status: "pending" })
      expect((await health(base)).sender).toMatchObject({
        address: relayerAddress,
        pending: 1,
        nextNonce: String(start + 1)
      })

      const hashB = await postClaim(base, second, recipientB, 30n * E18, fee)
      expect(hashB).not.toBe(hashA)
      await until("the second claim in the pool", () => transactionOf(hashB).then((t) => t ?? undefined))

      await rpc(net.rpcUrl, "evm_mine")
      await rpc(net.rpcUrl, "evm_setAutomine", [true])
      const statusA = await until("the first claim mined", async () => {
        const s = await txStatus(base, hashA)
        return s.status === "pending" ? undefined : s
      })
      const statusB = await until("the second claim mined", async () => {
        const s = await txStatus(base, hashB)
        return s.status === "pending" ? undefined : s
      })
      expect(statusA).toMatchObject({ txHash: hashA, status: "success" })
      expect(statusB).toMatchObject({ txHash: hashB, status: "success" })

      // Consecutive nonces from the hot key, and nothing else sent: no gap, no reuse.
      const [txA, txB] = [await transactionOf(hashA), await transactionOf(hashB)]
      expect(txA?.from.toLowerCase()).toBe(relayerAddress.toLowerCase())
      expect(txB?.from.toLowerCase()).toBe(relayerAddress.toLowerCase())
      expect([Number(txA?.nonce), Number(txB?.nonce)]).toEqual([start, start + 1])
      expect(await nonceOf("latest")).toBe(start + 2)
      expect(await nonceOf("pending")).toBe(start + 2)

      expect(await net.tokenBalance(usdt, recipientA)).toBe(40n * E18 - fee)
      expect(await net.tokenBalance(usdt, recipientB)).toBe(30n * E18 - fee)
      expect(await net.tokenBalance(usdt, relayerAddress)).toBe(relayerTokensBefore + 2n * fee)
      const settled = await until("health to show nothing pending", async () => {
        const h = await health(base)
        return h.sender.pending === 0 ? h : undefined
      })
      expect(settled.sender.nextNonce).toBe(String(start + 2))
      expect(await after.stop()).toBe(0)
    } finally {
      await rpc(net.rpcUrl, "evm_setAutomine", [true])
      await storage.drop()
    }
  })
})

describe.each(kinds)("relayer killed between a claim's checks and its store (%s)", (kind) => {
  it("the claim's retry after the restart is sent, not refused as in flight", {
    timeout: TEST_TIMEOUT
  }, async () => {
    const { chain } = net
    const storage =
      kind === "postgresql"
        ? await postgresSchema(process.env.DATABASE_URL as string)
        : {
            storage: {
              kind: "pglite" as const,
              dataDir: join(chain.dir, "data", `relayer-cut-${Date.now()}`)
            },
            drop: async () => {}
          }
    // The relayer's chain RPC: a simulation through it can be held until the process is killed.
    const proxy = await startRpcProxy(net.rpcUrl)
    try {
      const port = await Effect.runPromise(freeLoopbackPort)
      await Effect.runPromise(
        writeDevnetFile(chain, { relayerUrl: `http://127.0.0.1:${port}`, attestorUrl: "http://127.0.0.1:1" })
      )
      const env = {
        ...relayerEnv(chain, port),
        RPC_URL: proxy.url,
        ...(storage.storage.kind === "postgresql"
          ? { DATABASE_URL: storage.storage.url }
          : { DATA_DIR: storage.storage.dataDir }),
        INDEXER_ENABLED: "false",
        TX_POLL_INTERVAL_MS: "200"
      }
      const owner = await fundedOwner(100n * E18)
      const recipient = freshAddress()

      const before = startService("relayer", env)
      running.push(before)
      const base = await before.url()
      const fee = await quote(base)
      const start = await nonceOf("latest")

      // The claim passes its checks and reserves its nonce; its simulation never answers.
      proxy.setRule(({ method }) =>
        method === "eth_estimateGas" ? { kind: "delay", ms: 120_000 } : { kind: "forward" }
      )
      const cut = postClaim(base, owner, recipient, 40n * E18, fee).catch((error: unknown) => error)
      await until("the claim's simulation", async () =>
        proxy.count("eth_estimateGas") > 0 ? true : undefined
      )
      before.child.kill("SIGKILL")
      expect(await before.exited).toBeNull()
      // The client saw no answer.
      expect(await cut).toBeInstanceOf(Error)

      proxy.reset()
      const after = startService("relayer", env)
      running.push(after)
      expect(await after.url()).toBe(base)
      // Its retry, well inside the two minutes an unsent reservation may hold: sent.
      const hash = await postClaim(base, owner, recipient, 40n * E18, fee)
      const status = await until("the retried claim mined", async () => {
        const s = await txStatus(base, hash)
        return s.status === "pending" ? undefined : s
      })
      expect(status).toMatchObject({ txHash: hash, status: "success" })
      expect(await net.tokenBalance(net.settlementAsset, recipient)).toBe(40n * E18 - fee)
      expect(await nonceOf("latest")).toBe(start + 1)
      expect(await after.stop()).toBe(0)
    } finally {
      await proxy.close()
      await storage.drop()
    }
  })
})
