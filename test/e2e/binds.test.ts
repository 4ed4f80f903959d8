/**
 * The bind endpoints end to end on a private devnet (docs/relayer.md §3 bind rows and §4,
 * docs/protocol.md §3-5 and §7): POST /v1/propose-bind, /v1/finalize-bind and /v1/cancel-bind over
 * HTTP against anvil and the reference vault, each success read back from the chain and from
 * /v1/accounts, each refusal checked for its status, its code and that nothing was sent.
 *
 * The devnet starts with one attestor (#2) and threshold 1; a second attestor and threshold 2 are
 * added first, so that the relayer's deduplication, attestor filtering and sorting by signer
 * decide whether a proposal reaches the threshold and passes the vault's strictly-ascending check.
 *
 * An unpaid bind call that passes simulation and reverts on chain puts its account on a revert
 * cooldown (docs/relayer.md §8 "Revert cooldowns"): the next bind call is refused with 429. Bind
 * calls that succeed are counted against the day's budget of their account and owner
 * (docs/relayer.md §8 "Unpaid bind budget", `BIND_BUDGET_PER_DAY`, 4 here): an owner's
 * propose → cancel loop, each call of which succeeds, stops costing the hot key once it is spent,
 * on PostgreSQL in a second relayer process sharing the database too.
 *
 * Every test works on handle accounts of its own. Setup that is not under test (registering,
 * proposing, finalizing) goes straight to the vault from mnemonic account #3, so each test only
 * depends on the endpoint it exercises.
 */

import { Effect } from "effect"
import { type Address, decodeFunctionData, type Hex, keccak256, parseGwei, zeroAddress } from "viem"
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { feeVaultAbi } from "../../contracts/abi.js"
import { devnetAccount, devnetClients } from "../../contracts/deploy.js"
import { devnetKeys, freeLoopbackPort, relayerEnv } from "../../layers/devnet.js"
import { computeId } from "../../schema/ids.js"
import { postgresSchema } from "../indexer/support/harness.js"
import { rpc } from "../relayer/txsender-support.js"
import { type ServiceProcess, startService } from "../support/process.js"
import {
  expectRefusal,
  farDeadline,
  freshAddress,
  freshOwner,
  json,
  RelayerDevnet
} from "./support/relayerDevnet.js"

/** `bindDelay` of the devnet vault (docs/protocol.md §9). */
const BIND_DELAY = 3600

/** Mnemonic account that sends the setup transactions (free for tests, docs/protocol.md §9). */
const SETUP = 3

let net: RelayerDevnet

/** `BIND_BUDGET_PER_DAY` of this file's relayer. */
const BIND_BUDGET = 4
const RELAYER_ENV = {
  BIND_BUDGET_PER_DAY: String(BIND_BUDGET),
  // The per-id limit stays out of the way of the budget's loops.
  RATE_LIMIT_ID_BURST: "100",
  RATE_LIMIT_ID_PER_MINUTE: "100"
}
const usePostgres = process.env.DATABASE_URL !== undefined
let schema: Awaited<ReturnType<typeof postgresSchema>> | undefined
const running: Array<ServiceProcess> = []

const attestorA = privateKeyToAccount(devnetKeys.attestor)
const attestorB = privateKeyToAccount(generatePrivateKey())
/** Both attestors, ascending by address: the order the vault demands. */
const attestors = [attestorA, attestorB].sort((a, b) =>
  a.address.toLowerCase() < b.address.toLowerCase() ? -1 : 1
) as [PrivateKeyAccount, PrivateKeyAccount]

const freshKey = () => privateKeyToAccount(generatePrivateKey())

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

beforeAll(async () => {
  schema = usePostgres ? await postgresSchema(process.env.DATABASE_URL as string) : undefined
  const database =
    schema?.storage.kind === "postgresql"
      ? { DATABASE_URL: schema.storage.url }
      : ({} as Record<string, string>)
  net = await RelayerDevnet.start("binds-e2e", { ...RELAYER_ENV, ...database })
  // Admin (#0) adds a second attestor and requires both.
  await net.vaultWrite(0, "setAttestor", [attestorB.address, true])
  await net.vaultWrite(0, "setAttestorThreshold", [2n])
}, 180_000)
afterAll(async () => {
  for (const service of running) await service.stop()
  await net?.dispose()
  await schema?.drop()
}, 60_000)

// ---------------------------------------------------------------------------------------------
// Helpers

interface Handle {
  readonly id: Hex
  /** The kind-2 registration payload of the account. */
  readonly register: {
    readonly kind: 2
    readonly handleCommitment: Hex
    readonly fallbackRecipient: Address
    readonly fallbackDelay: bigint
  }
}

/** A handle account nobody has registered yet (any random bytes32 is a commitment). */
const freshHandle = (fallback?: { recipient: Address; delay: bigint }): Handle => {
  const register = {
    kind: 2 as const,
    handleCommitment: keccak256(generatePrivateKey()),
    fallbackRecipient: fallback?.recipient ?? zeroAddress,
    fallbackDelay: fallback?.delay ?? 0n
  }
  return {
    id: computeId(2, register.handleCommitment, register.fallbackRecipient, register.fallbackDelay),
    register
  }
}

/** `BindOwner` signatures by `signers`, in their order. */
const attest = (
  signers: ReadonlyArray<PrivateKeyAccount>,
  message: { id: Hex; newOwner: Address; bindNonce: bigint; deadline: bigint }
): Promise<Array<Hex>> => Promise.all(signers.map((signer) => net.sign(signer, "BindOwner", message)))

interface ProposeOptions {
  /** A fresh key's address unless given. */
  readonly newOwner?: Address
  /** Who attests: both attestors unless given. */
  readonly signers?: ReadonlyArray<PrivateKeyAccount>
  /** The bind nonce the attestations are over: 0 unless given. */
  readonly bindNonce?: bigint
  readonly deadline?: bigint
  /** Sent along only when given. */
  readonly register?: Handle["register"]
}

/** A POST /v1/propose-bind body for account `id`, attested over `BindOwner` as `options` say. */
const proposeBody = async (id: Hex, options: ProposeOptions = {}) => {
  const newOwner = options.newOwner ?? freshKey().address
  const deadline = options.deadline ?? farDeadline()
  const signatures = await attest(options.signers ?? attestors, {
    id,
    newOwner,
    bindNonce: options.bindNonce ?? 0n,
    deadline
  })
  return { id, newOwner, deadline, signatures, ...(options.register ? { register: options.register } : {}) }
}

/** A POST /v1/cancel-bind body for account `id`, `signer` signing `CancelBind` over `bindNonce`. */
const cancelBody = async (
  signer: PrivateKeyAccount,
  id: Hex,
  bindNonce: bigint,
  deadline = farDeadline()
) => ({
  id,
  deadline,
  signature: await net.sign(signer, "CancelBind", { id, bindNonce, deadline })
})

// Setup straight on the vault, not through the relayer.

const registerOnChain = (handle: Handle) =>
  net.vaultWrite(SETUP, "registerHandle", [
    handle.register.handleCommitment,
    handle.register.fallbackRecipient,
    handle.register.fallbackDelay
  ])

/** Proposes `newOwner` with both attestors at the account's current bindNonce. */
const proposeOnChain = async (id: Hex, newOwner: Address) => {
  const deadline = farDeadline()
  const { bindNonce } = await net.vaultAccount(id)
  const signatures = await attest(attestors, { id, newOwner, bindNonce, deadline })
  await net.vaultWrite(SETUP, "proposeBind", [id, newOwner, deadline, signatures])
}

/** A registered handle account with a pending bind to a fresh key (owner still zero). */
const pendingHandle = async () => {
  const handle = freshHandle()
  const pendingOwner = freshKey()
  await registerOnChain(handle)
  await proposeOnChain(handle.id, pendingOwner.address)
  return { ...handle, pendingOwner }
}

/** A handle account bound to `owner`, a fresh key unless given (bindNonce 1, nothing pending). */
const boundHandle = async (owner = freshKey()) => {
  const handle = freshHandle()
  await registerOnChain(handle)
  await proposeOnChain(handle.id, owner.address)
  await net.timeTravel(BIND_DELAY + 1)
  await net.vaultWrite(SETUP, "finalizeBind", [handle.id])
  expect((await net.vaultAccount(handle.id)).owner).toBe(owner.address)
  return { ...handle, owner }
}

/** The vault calls of a relayed transaction (a lone call or the calls of its multicall). */
const sentCalls = async (txHash: Hex) => {
  const tx = await net.publicClient().getTransaction({ hash: txHash })
  const outer = decodeFunctionData({ abi: feeVaultAbi, data: tx.input })
  const calls: ReadonlyArray<Hex> = outer.functionName === "multicall" ? outer.args[0] : [tx.input]
  return calls.map((data) => decodeFunctionData({ abi: feeVaultAbi, data }))
}

// ---------------------------------------------------------------------------------------------

describe("bind lifecycle", () => {
  it("propose-bind registers a handle account and proposes with the valid signatures only", async () => {
    const handle = freshHandle({ recipient: freshAddress(), delay: 30n * 86_400n })
    const newOwner = freshKey().address
    const deadline = farDeadline()
    const message = { id: handle.id, newOwner, bindNonce: 0n, deadline }
    const [low, high] = await attest(attestors, message)
    const [stranger] = await attest([freshKey()], message)
    // 65 bytes with v = 27 and a low s: well-formed, recovers to nobody in particular.
    const garbage: Hex = `0x${"11".repeat(64)}1b`
    // Descending, duplicated, mixed with a non-attestor and garbage: the relayer must clean it up.
    const signatures = [high, stranger, low, high, garbage, low]

    const { txHash, blockNumber } = await net.mined(
      await net.post("/v1/propose-bind", {
        id: handle.id,
        newOwner,
        deadline,
        signatures,
        register: handle.register
      })
    )

    // Sent as [register, proposeBind] with the two attestors once each, ascending.
    const calls = await sentCalls(txHash)
    expect(calls.map((c) => c.functionName)).toEqual(["registerHandle", "proposeBind"])
    expect(calls[1]?.args?.[3]).toEqual([low, high])

    const onChain = await net.vaultAccount(handle.id)
    expect(onChain).toMatchObject({ kind: 2, owner: zeroAddress, pendingOwner: newOwner, bindNonce: 1n })
    expect(onChain.pendingReadyAt).toBeGreaterThan(0n)

    const indexed = await net.indexedAccount(handle.id, blockNumber)
    expect(indexed).toMatchObject({
      kind: 2,
      owner: zeroAddress,
      pendingOwner: newOwner,
      pendingReadyAt: onChain.pendingReadyAt.toString(),
      bindNonce: "1"
    })
  })

  it("finalize-bind is refused before the timelock and succeeds after it", async () => {
    const { id, pendingOwner } = await pendingHandle()

    // Right after the proposal: ready only one bindDelay later in chain time.
    await expectRefusal(net, () => net.post("/v1/finalize-bind", { id }), 409, "bind_state")

    await net.timeTravel(BIND_DELAY + 1)
    const { blockNumber } = await net.mined(await net.post("/v1/finalize-bind", { id }))

    const onChain = await net.vaultAccount(id)
    expect(onChain).toMatchObject({
      owner: pendingOwner.address,
      pendingOwner: zeroAddress,
      pendingReadyAt: 0n,
      bindNonce: 1n // finalizing does not consume the bind nonce
    })
    const indexed = await net.indexedAccount(id, blockNumber)
    expect(indexed).toMatchObject({
      owner: pendingOwner.address,
      pendingOwner: null,
      pendingReadyAt: null,
      bindNonce: "1"
    })
  })

  it("the bound owner cancels a later proposal; propose and cancel each consume the bind nonce", async () => {
    const { id, owner } = await boundHandle()
    const next = freshKey().address
    const deadline = farDeadline()

    const proposed = await net.mined(
      await net.post("/v1/propose-bind", await proposeBody(id, { newOwner: next, bindNonce: 1n, deadline }))
    )
    expect(await net.vaultAccount(id)).toMatchObject({
      owner: owner.address,
      pendingOwner: next,
      bindNonce: 2n
    })
    expect(await net.indexedAccount(id, proposed.blockNumber)).toMatchObject({
      owner: owner.address,
      pendingOwner: next,
      bindNonce: "2"
    })

    // The owner signs CancelBind over the current bindNonce (2, as /v1/accounts shows it).
    const cancelled = await net.mined(
      await net.post("/v1/cancel-bind", await cancelBody(owner, id, 2n, deadline))
    )
    expect(await net.vaultAccount(id)).toMatchObject({
      owner: owner.address,
      pendingOwner: zeroAddress,
      pendingReadyAt: 0n,
      bindNonce: 3n
    })
    expect(await net.indexedAccount(id, cancelled.blockNumber)).toMatchObject({
      owner: owner.address,
      pendingOwner: null,
      pendingReadyAt: null,
      bindNonce: "3"
    })
  })
})

describe("bind refusals", () => {
  describe("propose-bind", () => {
    it("one valid attestor signature (even repeated) is below threshold 2", async () => {
      const handle = freshHandle()
      // Signing is deterministic: the same attestor twice gives the same signature twice.
      await expectRefusal(
        net,
        async () =>
          net.post(
            "/v1/propose-bind",
            await proposeBody(handle.id, { signers: [attestorA, attestorA], register: handle.register })
          ),
        400,
        "insufficient_attestations"
      )
    })

    it("signatures of non-attestors do not count", async () => {
      const handle = freshHandle()
      await registerOnChain(handle)
      await expectRefusal(
        net,
        async () =>
          net.post("/v1/propose-bind", await proposeBody(handle.id, { signers: [freshKey(), freshKey()] })),
        400,
        "insufficient_attestations"
      )
    })

    it("attestations over a stale bindNonce do not count", async () => {
      // Bound once: bindNonce is 1, so signatures over 0 are for a message the vault no longer takes.
      const { id } = await boundHandle()
      await expectRefusal(
        net,
        async () => net.post("/v1/propose-bind", await proposeBody(id, { bindNonce: 0n })),
        400,
        "insufficient_attestations"
      )
    })

    it("a bind already pending is refused", async () => {
      const { id } = await pendingHandle()
      await expectRefusal(
        net,
        async () => net.post("/v1/propose-bind", await proposeBody(id, { bindNonce: 1n })),
        409,
        "bind_state"
      )
    })

    it("an unregistered account without register is not found", async () => {
      const { id } = freshHandle()
      await expectRefusal(
        net,
        async () => net.post("/v1/propose-bind", await proposeBody(id)),
        404,
        "not_found"
      )
    })

    it("a registration whose fallback recipient is on the deny list is refused", async () => {
      const handle = freshHandle({ recipient: "0x000000000000000000000000000000000000dEaD", delay: 86_400n })
      await expectRefusal(
        net,
        async () => net.post("/v1/propose-bind", await proposeBody(handle.id, { register: handle.register })),
        403,
        "recipient_denied"
      )
    })

    it("a kind-1 account cannot be bound", async () => {
      const owner = freshOwner()
      await net.registerOwner(owner, SETUP)
      const error = await expectRefusal(
        net,
        async () => net.post("/v1/propose-bind", await proposeBody(owner.id)),
        400,
        "bad_request"
      )
      expect(error).toMatch(/kind 2/)
    })

    it("register for an account already registered is refused", async () => {
      const handle = freshHandle()
      await registerOnChain(handle)
      const error = await expectRefusal(
        net,
        async () => net.post("/v1/propose-bind", await proposeBody(handle.id, { register: handle.register })),
        400,
        "bad_request"
      )
      expect(error).toMatch(/already registered/)
    })

    it("the zero address cannot become the owner", async () => {
      const handle = freshHandle()
      await registerOnChain(handle)
      // Validly attested, so only the zero owner is wrong.
      const error = await expectRefusal(
        net,
        async () => net.post("/v1/propose-bind", await proposeBody(handle.id, { newOwner: zeroAddress })),
        400,
        "bad_request"
      )
      expect(error).toMatch(/zero address/)
    })

    it("a deadline 10 s ahead is too soon", async () => {
      const handle = freshHandle()
      const deadline = BigInt(Math.floor(Date.now() / 1000) + 10)
      await expectRefusal(
        net,
        async () =>
          net.post("/v1/propose-bind", await proposeBody(handle.id, { deadline, register: handle.register })),
        400,
        "deadline_too_soon"
      )
    })

    it("a malformed body (no signatures) is refused", async () => {
      const handle = freshHandle()
      const error = await expectRefusal(
        net,
        async () =>
          net.post(
            "/v1/propose-bind",
            await proposeBody(handle.id, { signers: [], register: handle.register })
          ),
        400,
        "bad_request"
      )
      expect(error).toMatch(/signatures/)
    })
  })

  describe("cancel-bind", () => {
    it("without a pending bind is refused", async () => {
      // The owner's signature is valid: only the state is wrong.
      const { id, owner } = await boundHandle()
      await expectRefusal(
        net,
        async () => net.post("/v1/cancel-bind", await cancelBody(owner, id, 1n)),
        409,
        "bind_state"
      )
    })

    it("a stranger's signature is refused", async () => {
      const { id } = await boundHandle()
      await proposeOnChain(id, freshKey().address)
      await expectRefusal(
        net,
        async () => net.post("/v1/cancel-bind", await cancelBody(freshKey(), id, 2n)),
        400,
        "invalid_signature"
      )
    })

    it("an unregistered account is not found", async () => {
      const { id } = freshHandle()
      await expectRefusal(
        net,
        async () => net.post("/v1/cancel-bind", await cancelBody(freshKey(), id, 0n)),
        404,
        "not_found"
      )
    })

    it("a handle account with no owner yet has nobody who can cancel", async () => {
      // Not even the pending owner: it is not the owner until the bind finalizes.
      const { id, pendingOwner } = await pendingHandle()
      await expectRefusal(
        net,
        async () => net.post("/v1/cancel-bind", await cancelBody(pendingOwner, id, 1n)),
        400,
        "invalid_signature"
      )
    })
  })

  describe("finalize-bind", () => {
    it("without a pending bind is refused", async () => {
      const handle = freshHandle()
      await registerOnChain(handle)
      await expectRefusal(net, () => net.post("/v1/finalize-bind", { id: handle.id }), 409, "bind_state")
    })

    it("an unregistered account is not found", async () => {
      await expectRefusal(
        net,
        () => net.post("/v1/finalize-bind", { id: freshHandle().id }),
        404,
        "not_found"
      )
    })
  })
})

describe("an unpaid bind call that reverts on chain", () => {
  it("puts the account on a revert cooldown: its next bind call is refused with 429", async () => {
    const handle = freshHandle()
    await registerOnChain(handle)
    const { walletClient } = await devnetClients(net.rpcUrl, devnetAccount(0))
    await rpc(net.rpcUrl, "evm_setAutomine", [false])
    let hash: Hex
    try {
      const sent = await net.post("/v1/propose-bind", await proposeBody(handle.id))
      const body = (await sent.json()) as { txHash?: Hex }
      expect(sent.status, JSON.stringify(body)).toBe(200)
      hash = body.txHash as Hex
      // The admin raises the threshold in the same block, ahead of it: the proposal reverts.
      await walletClient.writeContract({
        address: net.vault,
        abi: feeVaultAbi,
        functionName: "setAttestorThreshold",
        args: [3n],
        maxPriorityFeePerGas: parseGwei("50"),
        maxFeePerGas: parseGwei("500")
      } as never)
    } finally {
      await rpc(net.rpcUrl, "evm_mine")
      await rpc(net.rpcUrl, "evm_setAutomine", [true])
    }
    await net.vaultWrite(0, "setAttestorThreshold", [2n])
    for (let i = 0; i < 200 && (await net.txStatus(hash)).status === "pending"; i++) await sleep(50)
    expect((await net.txStatus(hash)).status).toBe("reverted")

    // A valid proposal again, once the sender has recorded the revert: refused, nothing sent.
    let status = 0
    for (let i = 0; i < 200 && status !== 429; i++) {
      const res = await net.post("/v1/propose-bind", await proposeBody(handle.id))
      status = res.status
      if (status === 200) throw new Error("the proposal was relayed during the cooldown")
      if (status !== 429) await sleep(50)
    }
    await expectRefusal(
      net,
      async () => net.post("/v1/propose-bind", await proposeBody(handle.id)),
      429,
      "rate_limited"
    )
  }, 120_000)
})

describe("the day's budget of unpaid bind transactions", () => {
  const hotKeyBalance = () => net.publicClient().getBalance({ address: net.relayerAddress })

  /** What the hot key has sent and spent so far: unchanged means nothing more went out. */
  const hotKeySpend = async () => ({ nonce: await net.relayerNonce(), balance: await hotKeyBalance() })

  /** A refusal for the day's budget: 429 `rate_limited`, Retry-After the rest of the day, nothing sent. */
  const expectBudgetSpent = async (request: () => Promise<Response>, key: "account" | "account's owner") => {
    const before = await hotKeySpend()
    const res = await request()
    const body = (await res.json()) as { code?: string; error?: string }
    expect({ status: res.status, code: body.code }, JSON.stringify(body)).toEqual({
      status: 429,
      code: "rate_limited"
    })
    expect(body.error).toMatch(new RegExp(`^this ${key} has had the ${BIND_BUDGET} unpaid bind transactions`))
    // Not the per-id bucket's few seconds: the rest of the day's window.
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(86_400 - 600)
    expect(Number(res.headers.get("retry-after"))).toBeLessThanOrEqual(86_400)
    expect(await hotKeySpend()).toEqual(before)
  }

  /** One cycle of the loop at `bindNonce`: a proposal (a new attestor session's) and the owner's cancel. */
  const cycle = async (id: Hex, owner: PrivateKeyAccount, bindNonce: bigint) => {
    await net.mined(await net.post("/v1/propose-bind", await proposeBody(id, { bindNonce })))
    await net.mined(await net.post("/v1/cancel-bind", await cancelBody(owner, id, bindNonce + 1n)))
  }

  /** The account the loop test spent, for the second process's test. */
  let spent: { readonly id: Hex; readonly owner: PrivateKeyAccount } | undefined

  it("an owner's propose → cancel loop stops at the account's budget: then 429 and nothing is sent", async () => {
    // Bound to key K and finalized; each loop then proposes K2 and cancels it with K.
    const { id, owner } = await boundHandle()
    const start = await hotKeySpend()
    await cycle(id, owner, 1n)
    await cycle(id, owner, 3n)
    // Four transactions, each paid by the hot key and by nobody else.
    const afterLoop = await hotKeySpend()
    expect(afterLoop.nonce - start.nonce).toBe(BIND_BUDGET)
    expect(afterLoop.balance).toBeLessThan(start.balance)
    expect(await net.vaultAccount(id)).toMatchObject({
      owner: owner.address,
      pendingOwner: zeroAddress,
      bindNonce: 5n
    })

    // The next proposals of the loop: refused, however often sent.
    for (let i = 0; i < 3; i++)
      await expectBudgetSpent(
        async () => net.post("/v1/propose-bind", await proposeBody(id, { bindNonce: 5n })),
        "account"
      )
    // A bind proposed elsewhere, at the proposer's cost: the relayer sends no cancel of it today.
    await proposeOnChain(id, freshKey().address)
    await expectBudgetSpent(
      async () => net.post("/v1/cancel-bind", await cancelBody(owner, id, 6n)),
      "account"
    )
    // Finalize is not budgeted (one per proposal): it still goes.
    await net.timeTravel(BIND_DELAY + 1)
    await net.mined(await net.post("/v1/finalize-bind", { id }))
    expect((await net.vaultAccount(id)).pendingOwner).toBe(zeroAddress)
    spent = { id, owner }
  }, 120_000)

  it("an owner's budget spans its accounts: another account of the same owner is refused too", async () => {
    const owner = freshKey()
    const first = await boundHandle(owner)
    const second = await boundHandle(owner)
    await cycle(first.id, owner, 1n)
    await cycle(second.id, owner, 1n)
    // Neither account has spent its own budget; their owner has.
    const before = await hotKeySpend()
    await expectBudgetSpent(
      async () => net.post("/v1/propose-bind", await proposeBody(second.id, { bindNonce: 3n })),
      "account's owner"
    )
    await expectBudgetSpent(
      async () => net.post("/v1/propose-bind", await proposeBody(first.id, { bindNonce: 3n })),
      "account's owner"
    )
    expect(await hotKeySpend()).toEqual(before)
    // An account of another owner is served as ever.
    const other = await boundHandle()
    await cycle(other.id, other.owner, 1n)
  }, 120_000)

  it.skipIf(!usePostgres)(
    "a second relayer process sharing the PostgreSQL database refuses the spent account too",
    async () => {
      if (spent === undefined || schema?.storage.kind !== "postgresql")
        throw new Error("the loop test did not spend an account's budget")
      const { id } = spent
      const port = await Effect.runPromise(freeLoopbackPort)
      const service = startService("relayer", {
        ...relayerEnv(net.chain, port),
        ...RELAYER_ENV,
        INDEXER_ENABLED: "false",
        DATABASE_URL: schema.storage.url
      })
      running.push(service)
      const base = await service.url()
      const { bindNonce } = await net.vaultAccount(id)
      await expectBudgetSpent(
        async () =>
          fetch(`${base}/v1/propose-bind`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: json(await proposeBody(id, { bindNonce }))
          }),
        "account"
      )
      expect(await service.stop()).toBe(0)
    },
    120_000
  )
})
