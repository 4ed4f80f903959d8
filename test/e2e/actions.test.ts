/**
 * The owner-action endpoints end to end on a private devnet (docs/relayer.md §4 "Action
 * endpoints"): consolidate, shield-templates, rotate-owner and ping, each paid by a fee-only claim
 * that rides in the same multicall. Successes are checked on the chain and in `/v1/accounts`;
 * every refusal is checked for its status and code and for having sent nothing.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { type Address, decodeFunctionData, type Hex, keccak256, zeroAddress } from "viem"
import type { PrivateKeyAccount } from "viem/accounts"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll } from "vitest"
import { feeVaultAbi } from "../../contracts/abi.js"
import { Relayer } from "../../layers/relayer.js"
import { errorCatalog } from "../../schema/errors.js"
import { EMPTY_DATA_HASH, QUOTED, shieldPayload } from "../../schema/ids.js"
import type { FinalizeBindRequest, PingRequest } from "../../schema/relayer.js"
import { BindTransactions } from "../../src/relayer/BindTransactions.js"
import { OwnerActions } from "../../src/relayer/OwnerActions.js"
import {
  E18,
  expectRefusal,
  farDeadline,
  freshOwner,
  type KindOneOwner,
  liveChainLayers,
  RelayerDevnet,
  recordingSender
} from "./support/relayerDevnet.js"

let net: RelayerDevnet
let usdt: Address
let weth: Address
let usdc: Address

beforeAll(async () => {
  net = await RelayerDevnet.start("actions-e2e", {
    // One token a minute: a slow machine cannot refill an id's bucket during the test.
    RATE_LIMIT_ID_PER_MINUTE: "1"
  })
  usdt = net.settlementAsset
  weth = net.token("WETH")
  usdc = net.token("USDC")
}, 180_000)
afterAll(() => net?.dispose())

// ---------------------------------------------------------------------------------------------
// Request builders: valid by default, each field open to a test's override

type Action = "consolidate" | "shield-templates" | "rotate-owner" | "ping"

const quoteOf = (action: Action, asset: Address, extra: Record<string, string> = {}) =>
  net.quote({ action, asset, adapter: zeroAddress, ...extra })

interface FeeOptions {
  readonly amount: bigint
  readonly nonce: bigint
  readonly asset?: Address
  readonly signer?: PrivateKeyAccount
  readonly claim?: Record<string, unknown>
}

/** The `fee` wrapper: a fee-only claim of `amount`, signed by the owner unless told otherwise. */
const feeFor = async (owner: KindOneOwner, options: FeeOptions) => {
  const claim = {
    beneficiaryId: owner.id,
    asset: options.asset ?? usdt,
    amount: options.amount,
    adapter: zeroAddress,
    dataHash: EMPTY_DATA_HASH,
    relayer: net.relayerAddress,
    relayerFee: options.amount,
    nonce: options.nonce,
    deadline: farDeadline(),
    ...options.claim
  }
  return { claim, signature: await net.sign(options.signer ?? owner.signer, "Claim", claim as never) }
}

const pingBody = async (
  owner: KindOneOwner,
  nonce: bigint,
  fee: FeeOptions | undefined,
  register = false
) => {
  const deadline = farDeadline()
  return {
    id: owner.id,
    deadline,
    signature: await net.sign(owner.signer, "Ping", { id: owner.id, nonce, deadline }),
    ...(register ? { register: owner.register } : {}),
    ...(fee === undefined ? {} : { fee: await feeFor(owner, fee) })
  }
}

const templatesFor = (id: Hex, count: number) =>
  Array.from({ length: count }, (_, i) => shieldPayload(id, usdt, BigInt(i + 1) * E18))

const templatesBody = async (
  owner: KindOneOwner,
  nonce: bigint,
  templates: ReadonlyArray<Hex>,
  fee: FeeOptions
) => {
  const deadline = farDeadline()
  const templatesHash = keccak256(`0x${templates.map((t) => keccak256(t).slice(2)).join("")}`)
  return {
    id: owner.id,
    templates,
    deadline,
    signature: await net.sign(owner.signer, "RegisterShieldTemplates", {
      id: owner.id,
      templatesHash,
      nonce,
      deadline
    }),
    fee: await feeFor(owner, fee)
  }
}

const rotateBody = async (owner: KindOneOwner, newOwner: KindOneOwner, nonce: bigint, fee: FeeOptions) => {
  const deadline = farDeadline()
  return {
    id: owner.id,
    newOwner: newOwner.address,
    deadline,
    signature: await net.sign(owner.signer, "RotateOwner", {
      id: owner.id,
      newOwner: newOwner.address,
      nonce,
      deadline
    }),
    fee: await feeFor(owner, fee)
  }
}

const consolidateBody = async (
  owner: KindOneOwner,
  nonce: bigint,
  step: { readonly assetIn: Address; readonly amountIn: bigint; readonly minOut: bigint },
  fee: FeeOptions
) => {
  const deadline = farDeadline()
  const signed = { id: owner.id, ...step, nonce, deadline }
  return {
    id: owner.id,
    consolidate: { ...step, deadline, signature: await net.sign(owner.signer, "Consolidate", signed) },
    fee: await feeFor(owner, fee)
  }
}

/** A registered owner account holding `usdtBalance` of the settlement asset. */
const fundedOwner = async (usdtBalance = 20n * E18) => {
  const owner = freshOwner()
  await net.registerOwner(owner)
  if (usdtBalance > 0n) await net.deposit(owner.id, usdt, usdtBalance)
  return owner
}

// ---------------------------------------------------------------------------------------------

describe("each action succeeds with its fee, and the relayer receives exactly relayerFee", () => {
  it("ping with a registration in the same multicall: nonce advances by two", {
    timeout: 60_000
  }, async () => {
    const owner = freshOwner()
    // A deposit may precede registration.
    await net.deposit(owner.id, usdt, 10n * E18)
    const fee = await quoteOf("ping", usdt, { register: "1" })
    expect(fee).toBeGreaterThan(0n)
    const relayerBefore = await net.tokenBalance(usdt, net.relayerAddress)
    const { blockNumber } = await net.mined(
      await net.post("/v1/ping", await pingBody(owner, 0n, { amount: fee, nonce: 1n }, true))
    )
    expect(await net.tokenBalance(usdt, net.relayerAddress)).toBe(relayerBefore + fee)
    expect(await net.vaultBalance(owner.id, usdt)).toBe(10n * E18 - fee)
    const onChain = await net.vaultAccount(owner.id)
    expect(onChain.owner).toBe(owner.address)
    expect(onChain.nonce).toBe(2n)
    const indexed = await net.indexedAccount(owner.id, blockNumber)
    expect(indexed).toMatchObject({
      owner: owner.address,
      nonce: "2",
      balances: { [usdt]: String(10n * E18 - fee) }
    })
  })

  it("shield-templates: the count appears on chain and in /v1/accounts", { timeout: 60_000 }, async () => {
    const owner = await fundedOwner()
    const fee = await quoteOf("shield-templates", usdt, { templates: "3" })
    // More templates cost more gas, so they cost more.
    expect(fee).toBeGreaterThan(await quoteOf("shield-templates", usdt, { templates: "1" }))
    const relayerBefore = await net.tokenBalance(usdt, net.relayerAddress)
    const { blockNumber } = await net.mined(
      await net.post(
        "/v1/shield-templates",
        await templatesBody(owner, 0n, templatesFor(owner.id, 3), { amount: fee, nonce: 1n })
      )
    )
    expect(await net.tokenBalance(usdt, net.relayerAddress)).toBe(relayerBefore + fee)
    expect((await net.vaultAccount(owner.id)).shieldTemplates).toBe(3n)
    expect(await net.indexedAccount(owner.id, blockNumber)).toMatchObject({ shieldTemplates: 3, nonce: "2" })
  })

  it("rotate-owner: a fee signed by the old owner is refused, by the new owner accepted; unused templates go", {
    timeout: 90_000
  }, async () => {
    const owner = await fundedOwner()
    const templatesFee = await quoteOf("shield-templates", usdt, { templates: "2" })
    await net.mined(
      await net.post(
        "/v1/shield-templates",
        await templatesBody(owner, 0n, templatesFor(owner.id, 2), { amount: templatesFee, nonce: 1n })
      )
    )
    const newOwner = freshOwner()
    const fee = await quoteOf("rotate-owner", usdt)
    // The fee claim runs after the rotation, when only the new owner's signature is valid.
    await expectRefusal(
      net,
      async () =>
        net.post("/v1/rotate-owner", await rotateBody(owner, newOwner, 2n, { amount: fee, nonce: 3n })),
      400,
      "invalid_signature"
    )
    const relayerBefore = await net.tokenBalance(usdt, net.relayerAddress)
    const { blockNumber } = await net.mined(
      await net.post(
        "/v1/rotate-owner",
        await rotateBody(owner, newOwner, 2n, { amount: fee, nonce: 3n, signer: newOwner.signer })
      )
    )
    expect(await net.tokenBalance(usdt, net.relayerAddress)).toBe(relayerBefore + fee)
    const onChain = await net.vaultAccount(owner.id)
    expect(onChain.owner).toBe(newOwner.address)
    expect(onChain.shieldTemplates).toBe(0n)
    expect(await net.indexedAccount(owner.id, blockNumber)).toMatchObject({
      owner: newOwner.address,
      shieldTemplates: 0,
      nonce: "4"
    })
  })

  it("consolidate: the whole WETH balance becomes settlement asset that stays in the vault", {
    timeout: 60_000
  }, async () => {
    const owner = await fundedOwner(0n)
    await net.deposit(owner.id, weth, 2n * E18)
    const fee = await quoteOf("consolidate", usdt)
    // The devnet router pays 3000 USDT per WETH; 1% slippage allowed.
    const step = { assetIn: weth, amountIn: QUOTED | (2n * E18), minOut: (6000n * E18 * 99n) / 100n }
    const relayerBefore = await net.tokenBalance(usdt, net.relayerAddress)
    const { blockNumber } = await net.mined(
      await net.post("/v1/consolidate", await consolidateBody(owner, 0n, step, { amount: fee, nonce: 1n }))
    )
    expect(await net.tokenBalance(usdt, net.relayerAddress)).toBe(relayerBefore + fee)
    expect(await net.vaultBalance(owner.id, weth)).toBe(0n)
    expect(await net.vaultBalance(owner.id, usdt)).toBe(6000n * E18 - fee)
    const indexed = await net.indexedAccount(owner.id, blockNumber)
    expect(indexed).toMatchObject({ nonce: "2", balances: { [usdt]: String(6000n * E18 - fee) } })
    // A spent asset leaves the record.
    expect(indexed?.balances[weth]).toBeUndefined()
  })

  it("a fee paid in another asset the account holds", { timeout: 60_000 }, async () => {
    const owner = await fundedOwner(0n)
    await net.deposit(owner.id, usdc, 50n * 10n ** 6n)
    const fee = await quoteOf("ping", usdc)
    const relayerBefore = await net.tokenBalance(usdc, net.relayerAddress)
    await net.mined(
      await net.post("/v1/ping", await pingBody(owner, 0n, { amount: fee, nonce: 1n, asset: usdc }))
    )
    expect(await net.tokenBalance(usdc, net.relayerAddress)).toBe(relayerBefore + fee)
  })

  it("a consolidation whose fee claim would fail reverts as a whole: nothing is swapped or sent", async () => {
    const owner = await fundedOwner(0n)
    await net.deposit(owner.id, weth, E18)
    // The account holds no USDC, so the fee claim (and with it the multicall) would revert.
    const fee = await quoteOf("consolidate", usdc)
    const step = { assetIn: weth, amountIn: E18, minOut: 2900n * E18 }
    const error = await expectRefusal(
      net,
      async () =>
        net.post(
          "/v1/consolidate",
          await consolidateBody(owner, 0n, step, { amount: fee, nonce: 1n, asset: usdc })
        ),
      422,
      "simulation_failed"
    )
    expect(error).toContain("InsufficientBalance")
    expect(await net.vaultBalance(owner.id, weth)).toBe(E18)
    expect((await net.vaultAccount(owner.id)).nonce).toBe(0n)
  })
})

// ---------------------------------------------------------------------------------------------

describe("refusals: status and code, nothing sent", () => {
  let owner: KindOneOwner
  let pingFee: bigint
  beforeAll(async () => {
    owner = await fundedOwner()
    pingFee = await quoteOf("ping", usdt)
  }, 60_000)

  const refuse = async (path: string, body: unknown, status: number, code: string) =>
    expectRefusal(net, () => net.post(path, body), status, code)
  const validFee = () => ({ amount: pingFee, nonce: 1n })

  it("malformed bodies: bad_request", async () => {
    const body = await pingBody(owner, 0n, validFee())
    await refuse("/v1/ping", { ...body, signature: "0x123" }, 400, "bad_request")
    await refuse("/v1/ping", { ...body, fee: { claim: body.fee!.claim } }, 400, "bad_request")
    await refuse("/v1/ping", "{", 400, "bad_request")
  })

  it("fee claim for another account, a registration of another id or of an existing account: bad_request", async () => {
    const other = freshOwner()
    await refuse(
      "/v1/ping",
      await pingBody(owner, 0n, { ...validFee(), claim: { beneficiaryId: other.id } }),
      400,
      "bad_request"
    )
    await refuse(
      "/v1/ping",
      { ...(await pingBody(owner, 0n, validFee())), register: other.register },
      400,
      "bad_request"
    ) // The account exists: its registration would only make the vault revert.
    const error = await refuse("/v1/ping", await pingBody(owner, 0n, validFee(), true), 400, "bad_request")
    expect(error).toMatch(/already registered/)
  })

  it("no fee, or a fee below the quote: 402 fee_too_low", async () => {
    await refuse("/v1/ping", await pingBody(owner, 0n, undefined), 402, "fee_too_low")
    await refuse(
      "/v1/ping",
      await pingBody(owner, 0n, { amount: pingFee - 1n, nonce: 1n }),
      402,
      "fee_too_low"
    )
    // A registration costs more gas, so the plain ping's fee does not cover a ping with one.
    const unregistered = freshOwner()
    await net.deposit(unregistered.id, usdt, 10n * E18)
    await refuse(
      "/v1/ping",
      await pingBody(unregistered, 0n, { amount: pingFee, nonce: 1n }, true),
      402,
      "fee_too_low"
    )
  })

  it("deadlines too soon: the action's and the fee claim's", async () => {
    const deadline = BigInt(Math.floor(Date.now() / 1000) + 10)
    const body = await pingBody(owner, 0n, validFee())
    await refuse(
      "/v1/ping",
      {
        ...body,
        deadline,
        signature: await net.sign(owner.signer, "Ping", { id: owner.id, nonce: 0n, deadline })
      },
      400,
      "deadline_too_soon"
    )
    await refuse(
      "/v1/ping",
      await pingBody(owner, 0n, { ...validFee(), claim: { deadline } }),
      400,
      "deadline_too_soon"
    )
  })

  it("a fee claim not naming this relayer: relayer_mismatch (the zero address included)", async () => {
    for (const relayer of [zeroAddress, privateKeyToAccount(generatePrivateKey()).address])
      await refuse(
        "/v1/ping",
        await pingBody(owner, 0n, { ...validFee(), claim: { relayer } }),
        400,
        "relayer_mismatch"
      )
  })

  it("a fee claim that pays anything but the fee: invalid_amount, adapter_not_allowed, data_hash_mismatch", async () => {
    await refuse(
      "/v1/ping",
      await pingBody(owner, 0n, { ...validFee(), claim: { amount: pingFee + 1n } }),
      400,
      "invalid_amount"
    )
    await refuse("/v1/ping", await pingBody(owner, 0n, { amount: 0n, nonce: 1n }), 400, "invalid_amount")
    await refuse(
      "/v1/ping",
      await pingBody(owner, 0n, { ...validFee(), claim: { adapter: net.chain.deployment.shieldAdapter } }),
      400,
      "adapter_not_allowed"
    )
    await refuse(
      "/v1/ping",
      await pingBody(owner, 0n, { ...validFee(), claim: { dataHash: keccak256("0x01") } }),
      400,
      "data_hash_mismatch"
    )
  })

  it("signatures: the action's and the fee's must be the owner's", async () => {
    const stranger = freshOwner()
    const body = await pingBody(owner, 0n, validFee())
    await refuse(
      "/v1/ping",
      {
        ...body,
        signature: await net.sign(stranger.signer, "Ping", {
          id: owner.id,
          nonce: 0n,
          deadline: body.deadline
        })
      },
      400,
      "invalid_signature"
    )
    // Signed over a stale nonce: the vault would recover someone else.
    await refuse(
      "/v1/ping",
      {
        ...body,
        signature: await net.sign(owner.signer, "Ping", { id: owner.id, nonce: 5n, deadline: body.deadline })
      },
      400,
      "invalid_signature"
    )
    await refuse(
      "/v1/ping",
      await pingBody(owner, 0n, { ...validFee(), signer: stranger.signer }),
      400,
      "invalid_signature"
    )
  })

  it("a fee claim at the action's own nonce: nonce_mismatch", async () => {
    await refuse("/v1/ping", await pingBody(owner, 0n, { amount: pingFee, nonce: 0n }), 409, "nonce_mismatch")
  })

  it("an unregistered account without a registration: not_found", async () => {
    await refuse("/v1/ping", await pingBody(freshOwner(), 0n, validFee()), 404, "not_found")
  })

  it("a registration with a denied fallback recipient: recipient_denied", async () => {
    const denied = "0x000000000000000000000000000000000000dEaD"
    const plain = freshOwner()
    const { computeId, ownerCommitment } = await import("../../schema/ids.js")
    const register = { ...plain.register, fallbackRecipient: denied, fallbackDelay: 86_400n }
    const fallbackOwner: KindOneOwner = {
      ...plain,
      register: register as KindOneOwner["register"],
      id: computeId(1, ownerCommitment(plain.address, plain.salt), denied, 86_400n)
    }
    const fee = await quoteOf("ping", usdt, { register: "1" })
    await refuse(
      "/v1/ping",
      await pingBody(fallbackOwner, 0n, { amount: fee, nonce: 1n }, true),
      403,
      "recipient_denied"
    )
  })

  it("rotate-owner to the zero address: bad_request", async () => {
    const body = await rotateBody(owner, freshOwner(), 0n, {
      amount: await quoteOf("rotate-owner", usdt),
      nonce: 1n
    })
    await refuse("/v1/rotate-owner", { ...body, newOwner: zeroAddress }, 400, "bad_request")
  })

  it("consolidate: settlement asset in, zero amounts, zero minOut", async () => {
    const fee = { amount: await quoteOf("consolidate", usdt), nonce: 1n }
    await refuse(
      "/v1/consolidate",
      await consolidateBody(owner, 0n, { assetIn: usdt, amountIn: E18, minOut: E18 }, fee),
      400,
      "bad_request"
    )
    await refuse(
      "/v1/consolidate",
      await consolidateBody(owner, 0n, { assetIn: weth, amountIn: 0n, minOut: E18 }, fee),
      400,
      "invalid_amount"
    )
    await refuse(
      "/v1/consolidate",
      await consolidateBody(owner, 0n, { assetIn: weth, amountIn: E18, minOut: 0n }, fee),
      400,
      "invalid_amount"
    )
  })

  it("shield templates: count, size, duplicates and canonical form are invalid_templates", async () => {
    const fee = { amount: await quoteOf("shield-templates", usdt, { templates: "32" }), nonce: 1n }
    const good = templatesFor(owner.id, 2)
    const cases: ReadonlyArray<readonly [string, ReadonlyArray<Hex>]> = [
      ["none", []],
      ["33 templates", templatesFor(owner.id, 33)],
      ["319 bytes", [good[0]!.slice(0, -2) as Hex]],
      ["321 bytes", [`${good[0]!}00` as Hex]],
      ["a duplicate", [good[0]!, good[1]!, good[0]!]],
      ["another account's id", [shieldPayload(freshOwner().id, usdt, E18)]],
      ["another token", [shieldPayload(owner.id, weth, E18)]],
      ["a zero value", [shieldPayload(owner.id, usdt, 0n)]]
    ]
    for (const [, templates] of cases)
      await refuse(
        "/v1/shield-templates",
        await templatesBody(owner, 0n, templates, fee),
        400,
        "invalid_templates"
      )
  })

  it("shield templates: a signature over other templates is invalid_signature", async () => {
    const fee = { amount: await quoteOf("shield-templates", usdt, { templates: "2" }), nonce: 1n }
    const body = await templatesBody(owner, 0n, templatesFor(owner.id, 2), fee)
    await refuse(
      "/v1/shield-templates",
      { ...body, templates: [body.templates[1], body.templates[0]] },
      400,
      "invalid_signature"
    )
  })
})

// ---------------------------------------------------------------------------------------------

describe("metrics", () => {
  it("count owner actions by action and outcome code, and name no account", async () => {
    const res = await fetch(`${net.relayerUrl}/v1/metrics`, { headers: { authorization: "Bearer devnet" } })
    expect(res.status).toBe(200)
    const text = await res.text()
    const count = (action: string, code: string) => {
      const line = text
        .split("\n")
        .find(
          (l) =>
            l.startsWith("relayer_actions_total{") &&
            l.includes(`action="${action}"`) &&
            l.includes(`code="${code}"`)
        )
      return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(" ") + 1))
    }
    // The earlier tests of this file: successes of each action, and refusals.
    for (const action of ["ping", "shield-templates", "rotate-owner", "consolidate"])
      expect(count(action, "ok"), action).toBeGreaterThanOrEqual(1)
    expect(count("ping", "fee_too_low")).toBeGreaterThanOrEqual(3)
    expect(count("shield-templates", "invalid_templates")).toBeGreaterThanOrEqual(8)
    expect(count("consolidate", "simulation_failed")).toBeGreaterThanOrEqual(1)
    // Labels are endpoint names, codes and vault error names: no 32-byte id or 20-byte address.
    expect(text).not.toMatch(/0x[0-9a-fA-F]{40}/)
  })
})

describe("the pipeline's settings on the live chain", () => {
  const sender = recordingSender()
  const { submitted } = sender
  /** The action pipeline against the devnet's vault, with a sender that only records; fees quote 1. */
  const pipeline = (overrides: Record<string, string>) =>
    Relayer.writeServices.pipe(Layer.provide(liveChainLayers(net.env, overrides, sender, 1n)))
  const ping = (body: unknown, overrides: Record<string, string>) =>
    Effect.flatMap(OwnerActions, (actions) => actions.ping(body as unknown as PingRequest)).pipe(
      Effect.provide(pipeline(overrides))
    )
  const codeOf = (error: { readonly _tag: string }) =>
    errorCatalog[error._tag as keyof typeof errorCatalog].code

  it.live("REQUIRE_ACTION_FEE=false: a ping without a fee is sent alone, the operator paying", () =>
    Effect.gen(function* () {
      const owner = yield* Effect.promise(() => fundedOwner())
      const body = yield* Effect.promise(() => pingBody(owner, 0n, undefined))
      submitted.length = 0
      yield* ping(body, { REQUIRE_ACTION_FEE: "false" })
      expect(submitted).toHaveLength(1)
      // A single call goes unwrapped: the ping itself, no fee claim.
      expect(decodeFunctionData({ abi: feeVaultAbi, data: submitted[0]!.data }).functionName).toBe("ping")
    })
  )

  it.live("an estimate above budget x GAS_CAP_BPS is gas_cap_exceeded", () =>
    Effect.gen(function* () {
      const owner = yield* Effect.promise(() => fundedOwner())
      const body = yield* Effect.promise(() => pingBody(owner, 0n, { amount: 1n, nonce: 1n }))
      submitted.length = 0
      // A ping with its fee needs more than 60k gas: a 1x cap refuses it, the default 2x takes it.
      expect(codeOf(yield* Effect.flip(ping(body, { GAS_CAP_BPS: "10000" })))).toBe("gas_cap_exceeded")
      expect(submitted).toHaveLength(0)
      yield* ping(body, {})
      expect(submitted).toHaveLength(1)
      expect(decodeFunctionData({ abi: feeVaultAbi, data: submitted[0]!.data }).functionName).toBe(
        "multicall"
      )
    })
  )

  it.live("the chain not answering: unavailable, for an owner action and a bind", () =>
    Effect.gen(function* () {
      const owner = yield* Effect.promise(() => fundedOwner())
      const body = yield* Effect.promise(() => pingBody(owner, 0n, { amount: 1n, nonce: 1n }))
      const down = { RPC_URL: "http://127.0.0.1:1", RPC_TIMEOUT_MS: "300" }
      submitted.length = 0
      expect(codeOf(yield* Effect.flip(ping(body, down)))).toBe("unavailable")
      const finalize = Effect.flatMap(BindTransactions, (binds) =>
        binds.finalizeBind({ id: owner.id } as FinalizeBindRequest)
      )
      const error = yield* Effect.flip(
        finalize.pipe(
          Effect.provide(
            Relayer.writeServices.pipe(Layer.provide(liveChainLayers(net.env, down, sender, 1n)))
          )
        )
      )
      expect(codeOf(error)).toBe("unavailable")
      expect(submitted).toHaveLength(0)
    })
  )

  it.live("the account's bucket is charged after simulation: rate_limited once it is empty", () =>
    Effect.gen(function* () {
      const owner = yield* Effect.promise(() => fundedOwner())
      const body = yield* Effect.promise(() => pingBody(owner, 0n, { amount: 1n, nonce: 1n }))
      const limited = pipeline({ RATE_LIMIT_ID_BURST: "1", RATE_LIMIT_ID_PER_MINUTE: "1" })
      const twice = Effect.gen(function* () {
        const actions = yield* OwnerActions
        yield* actions.ping(body as unknown as PingRequest)
        return yield* Effect.flip(actions.ping(body as unknown as PingRequest))
      }).pipe(Effect.provide(limited))
      expect(codeOf(yield* twice)).toBe("rate_limited")
    })
  )
})
