/**
 * Duplicate writes posted at the same moment: copies of one signed claim, a `relayer = 0x0` claim
 * sent twice, two different claims at one `(id, nonce)`, a paid ping and a claim sharing a nonce,
 * and the same claim to two relayer processes on one PostgreSQL. Exactly one transaction goes out; every other request is refused
 * with 409 `nonce_mismatch` before simulation (or, a copy of the sent request, answered with its
 * hash), and the hot key's nonce advances by one. A
 * reservation whose transaction fails in simulation, or is mined reverted, frees the nonce again.
 *
 * The chain mines nothing while a burst is in flight (automine off), so every copy meets the
 * first one's transaction still pending, however slowly the requests are served.
 */
import { Effect } from "effect"
import { type Address, type Hex, keccak256, zeroAddress } from "viem"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freeLoopbackPort, relayerEnv } from "../../layers/devnet.js"
import { postgresSchema } from "../indexer/support/harness.js"
import { rpc } from "../relayer/txsender-support.js"
import { directClaimBody } from "../support/directClaim.js"
import { type ServiceProcess, startService } from "../support/process.js"
import { E18, freshAddress, freshOwner, RelayerDevnet } from "./support/relayerDevnet.js"

let net: RelayerDevnet
const running: Array<ServiceProcess> = []

beforeAll(async () => {
  net = await RelayerDevnet.start("claims-duplicates-e2e", {
    INDEXER_ENABLED: "false",
    // Each request has its own client address; the raised limits are a second guard.
    RATE_LIMIT_IP_BURST: "1000",
    RATE_LIMIT_IP_PER_MINUTE: "1000"
  })
}, 180_000)
afterAll(async () => {
  for (const service of running) await service.stop()
  await net?.dispose()
}, 60_000)

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const until = async <A>(what: string, check: () => Promise<A | undefined>, seconds = 60): Promise<A> => {
  const deadline = Date.now() + seconds * 1000
  while (Date.now() < deadline) {
    const value = await check()
    if (value !== undefined) return value
    await sleep(100)
  }
  throw new Error(`timed out waiting for ${what}`)
}

const minedNonce = async () =>
  Number(await rpc<Hex>(net.rpcUrl, "eth_getTransactionCount", [net.relayerAddress, "latest"]))

/** A registered owner with 100 of the settlement asset in the vault. */
const fundedOwner = async () => {
  const owner = freshOwner()
  await net.registerOwner(owner)
  await net.deposit(owner.id, net.settlementAsset, 100n * E18)
  return owner
}

type Owner = Awaited<ReturnType<typeof fundedOwner>>

const claimBody = (
  owner: Owner,
  options: {
    readonly recipient?: Address
    readonly amount?: bigint
    readonly relayer?: Address
    readonly fee: bigint
    readonly deadline?: bigint
    readonly register?: unknown
  }
) =>
  directClaimBody({
    signer: owner.signer,
    chainId: net.chain.deployment.chainId,
    vault: net.vault,
    id: owner.id,
    asset: net.settlementAsset,
    amount: options.amount ?? 10n * E18,
    recipient: options.recipient ?? freshAddress(),
    relayer: options.relayer ?? net.relayerAddress,
    relayerFee: options.fee,
    nonce: 0n,
    // Far ahead: one test below moves the chain's clock forward.
    deadline: options.deadline ?? BigInt(Math.floor(Date.now() / 1000) + 30 * 86_400),
    ...(options.register === undefined ? {} : { register: options.register })
  })

interface Answer {
  readonly status: number
  readonly body: { readonly txHash?: Hex; readonly code?: string; readonly error?: string }
}

const answerOf = async (res: Response): Promise<Answer> => ({
  status: res.status,
  body: (await res.json()) as Answer["body"]
})

/**
 * Posts every request at once with mining paused, then mines and waits for the one that was
 * accepted; returns the answers and the hot key's mined nonce before and after.
 */
const burst = async (
  requests: ReadonlyArray<() => Promise<Response>>,
  status: (hash: Hex) => Promise<string>
) => {
  const before = await minedNonce()
  await rpc(net.rpcUrl, "evm_setAutomine", [false])
  let answers: ReadonlyArray<Answer>
  try {
    answers = await Promise.all(requests.map((request) => request().then(answerOf)))
  } finally {
    await rpc(net.rpcUrl, "evm_mine")
    await rpc(net.rpcUrl, "evm_setAutomine", [true])
  }
  const accepted = answers.filter((a) => a.status === 200)
  for (const a of accepted)
    await until("the accepted claim to settle", async () => {
      const s = await status(a.body.txHash!)
      return s === "pending" ? undefined : s
    })
  return { answers, before, after: await minedNonce() }
}

/**
 * One transaction sent. Every answer is 409 `nonce_mismatch` (another request holds the nonce) or
 * 200 with that one transaction's hash: a copy of the very request that arrives once it is stored is
 * answered with its hash (docs/relayer.md §4 "Retries"); `distinct` requests get one 200 only.
 */
const expectOneSent = (result: Awaited<ReturnType<typeof burst>>, copies: number, distinct = false) => {
  const accepted = result.answers.filter((a) => a.status === 200)
  const refused = result.answers.filter((a) => a.status !== 200)
  expect(accepted.length).toBeGreaterThanOrEqual(1)
  if (distinct) expect(accepted).toHaveLength(1)
  expect(new Set(accepted.map((a) => a.body.txHash)).size).toBe(1)
  expect(refused.map((a) => `${a.status} ${a.body.code}`)).toEqual(
    Array(copies - accepted.length).fill("409 nonce_mismatch")
  )
  for (const a of refused) expect(a.body.error).toMatch(/in flight|being processed/)
  expect(result.after).toBe(result.before + 1)
}

const netStatus = async (hash: Hex) => (await net.txStatus(hash)).status

const health = async (base: string) => {
  const res = await fetch(`${base}/v1/health`)
  expect(res.status).toBe(200)
  return (await res.json()) as { sender: { pending: number } }
}

describe("duplicate claims posted concurrently", () => {
  it("six copies of one signed claim: one transaction; each copy 409 nonce_mismatch or its hash", async () => {
    const owner = await fundedOwner()
    const fee = await net.quote({ asset: net.settlementAsset, adapter: zeroAddress })
    const recipient = freshAddress()
    const body = await claimBody(owner, { recipient, fee })
    const result = await burst(
      Array.from({ length: 6 }, () => () => net.post("/v1/claim", body)),
      netStatus
    )
    expectOneSent(result, 6)
    const hash = result.answers.find((a) => a.status === 200)!.body.txHash!
    expect(await netStatus(hash)).toBe("success")
    expect(await net.tokenBalance(net.settlementAsset, recipient)).toBe(10n * E18 - fee)
    expect((await net.vaultAccount(owner.id)).nonce).toBe(1n)
  }, 120_000)

  it("a relayer = 0x0 claim sent twice: one transaction", async () => {
    const owner = await fundedOwner()
    const fee = await net.quote({ asset: net.settlementAsset, adapter: zeroAddress })
    const body = await claimBody(owner, { relayer: zeroAddress, fee })
    const result = await burst(
      [() => net.post("/v1/claim", body), () => net.post("/v1/claim", body)],
      netStatus
    )
    expectOneSent(result, 2)
  }, 120_000)

  it("two different claims at one (id, nonce): one transaction", async () => {
    const owner = await fundedOwner()
    const fee = await net.quote({ asset: net.settlementAsset, adapter: zeroAddress })
    const first = await claimBody(owner, { fee, amount: 10n * E18 })
    const second = await claimBody(owner, { fee, amount: 20n * E18 })
    const result = await burst(
      [() => net.post("/v1/claim", first), () => net.post("/v1/claim", second)],
      netStatus
    )
    expectOneSent(result, 2, true)
  }, 120_000)

  it("a paid ping and a claim of one account at once: they share nonce 0, one transaction", async () => {
    const owner = await fundedOwner()
    const pingFee = await net.quote({ action: "ping", asset: net.settlementAsset, adapter: zeroAddress })
    const claimFee = await net.quote({ asset: net.settlementAsset, adapter: zeroAddress })
    const deadline = BigInt(Math.floor(Date.now() / 1000) + 30 * 86_400)
    const feeClaim = {
      beneficiaryId: owner.id,
      asset: net.settlementAsset,
      amount: pingFee,
      adapter: zeroAddress,
      dataHash: keccak256("0x"),
      relayer: net.relayerAddress,
      relayerFee: pingFee,
      nonce: 1n,
      deadline
    }
    // The ping consumes nonce 0 and its fee claim 1; the claim consumes 0.
    const ping = {
      id: owner.id,
      deadline,
      signature: await net.sign(owner.signer, "Ping", { id: owner.id, nonce: 0n, deadline }),
      fee: { claim: feeClaim, signature: await net.sign(owner.signer, "Claim", feeClaim) }
    }
    const claim = await claimBody(owner, { fee: claimFee })
    const result = await burst(
      [() => net.post("/v1/ping", ping), () => net.post("/v1/claim", claim)],
      netStatus
    )
    expectOneSent(result, 2, true)
  }, 120_000)

  it("a claim that fails simulation leaves its nonce free", async () => {
    const owner = await fundedOwner()
    const fee = await net.quote({ asset: net.settlementAsset, adapter: zeroAddress })
    // More than the account holds: every check passes, the vault reverts.
    const failing = await claimBody(owner, { fee, amount: 200n * E18 })
    const before = await minedNonce()
    const refused = await answerOf(await net.post("/v1/claim", failing))
    expect({ status: refused.status, code: refused.body.code }).toEqual({
      status: 422,
      code: "simulation_failed"
    })
    const retry = await net.mined(await net.post("/v1/claim", await claimBody(owner, { fee })))
    expect(retry.txHash).toMatch(/^0x/)
    expect(await minedNonce()).toBe(before + 1)
  }, 120_000)

  it("a claim mined reverted frees its nonce; while it is pending the nonce stays taken", async () => {
    const owner = await fundedOwner()
    const fee = await net.quote({ asset: net.settlementAsset, adapter: zeroAddress })
    const chainNow = Number((await net.publicClient().getBlock()).timestamp)
    const localNow = Math.floor(Date.now() / 1000)
    // Passes the relayer's headroom check, then expires on chain before the block is mined.
    const shortLived = await claimBody(owner, { fee, deadline: BigInt(Math.max(chainNow, localNow) + 300) })
    const before = await minedNonce()
    await rpc(net.rpcUrl, "evm_setAutomine", [false])
    let hash: Hex
    try {
      const accepted = await answerOf(await net.post("/v1/claim", shortLived))
      expect(accepted.status, JSON.stringify(accepted.body)).toBe(200)
      hash = accepted.body.txHash!
      const later = BigInt(Math.max(chainNow, localNow) + 30 * 86_400)
      const blocked = await answerOf(
        await net.post("/v1/claim", await claimBody(owner, { fee, deadline: later }))
      )
      expect({ status: blocked.status, code: blocked.body.code }).toEqual({
        status: 409,
        code: "nonce_mismatch"
      })
      await rpc(net.rpcUrl, "evm_increaseTime", [3600])
    } finally {
      await rpc(net.rpcUrl, "evm_mine")
      await rpc(net.rpcUrl, "evm_setAutomine", [true])
    }
    expect(
      await until("the claim to settle", async () =>
        ((s) => (s === "pending" ? undefined : s))(await netStatus(hash))
      )
    ).toBe("reverted")
    expect(await minedNonce()).toBe(before + 1)
    // The sender records the outcome on its next round; then the same nonce may go again.
    await until("the sender to settle it", async () =>
      (await health(net.relayerUrl)).sender.pending === 0 ? true : undefined
    )
    const retryDeadline = BigInt(Number((await net.publicClient().getBlock()).timestamp) + 30 * 86_400)
    const retry = await net.mined(
      await net.post("/v1/claim", await claimBody(owner, { fee, deadline: retryDeadline }))
    )
    expect(retry.txHash).not.toBe(hash)
    expect((await net.vaultAccount(owner.id)).nonce).toBe(1n)
  }, 120_000)
})

describe.skipIf(process.env.DATABASE_URL === undefined)("two relayer processes on one PostgreSQL", () => {
  it("the same claim posted to both at once: one transaction", { timeout: 360_000 }, async () => {
    const schema = await postgresSchema(process.env.DATABASE_URL as string)
    try {
      const ports = [await Effect.runPromise(freeLoopbackPort), await Effect.runPromise(freeLoopbackPort)]
      const services = ports.map((port) =>
        startService("relayer", {
          ...relayerEnv(net.chain, port),
          DATABASE_URL: schema.storage.kind === "postgresql" ? schema.storage.url : "",
          INDEXER_ENABLED: "false",
          TX_POLL_INTERVAL_MS: "200",
          RATE_LIMIT_IP_BURST: "1000",
          RATE_LIMIT_IP_PER_MINUTE: "1000"
        })
      )
      running.push(...services)
      const bases = await Promise.all(services.map((s) => s.url()))
      const owner = await fundedOwner()
      const fee = await net.quote({ asset: net.settlementAsset, adapter: zeroAddress })
      const body = await claimBody(owner, { fee })
      const post = (base: string) => () =>
        fetch(`${base}/v1/claim`, { method: "POST", headers: { "content-type": "application/json" }, body })
      const status = async (hash: Hex) => {
        const res = await fetch(`${bases[0]}/v1/tx-status`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ txHash: hash })
        })
        return ((await res.json()) as { status: string }).status
      }
      const result = await burst(
        bases.flatMap((base) => [post(base), post(base), post(base)]),
        status
      )
      expectOneSent(result, 6)
      for (const service of services) expect(await service.stop()).toBe(0)
    } finally {
      await schema.drop()
    }
  })
})
