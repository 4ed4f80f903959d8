/**
 * POST /v1/claim's rules 1-5 above the chain: every refusal with its code and nothing submitted,
 * and the transaction each accepted shape produces. Accounts, the quote, simulation and the
 * sender are stubs (claimSupport.ts); time is the TestClock (now = 0).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Metric } from "effect"
import { decodeFunctionData, type Hex, keccak256, toHex } from "viem"
import { feeVaultAbi } from "../../contracts/abi.js"
import { errorCatalog } from "../../schema/errors.js"
import { FULL, QUOTED } from "../../schema/ids.js"
import type { Bytes32, Signature } from "../../schema/primitives.js"
import type { ClaimRequest, ConsolidateStep } from "../../schema/relayer.js"
import { ChainReverted, ChainUnavailable } from "../../src/chain/ChainClient.js"
import { simulationFailures } from "../../src/relayer/metrics.js"
import { HotKeyUnderfunded } from "../../src/txsender/TxSender.js"
import {
  addr,
  claimRequest,
  claimsLayer,
  DEADLINE,
  DENIED,
  E18,
  GAS_BUDGET,
  GAS_ESTIMATE,
  ID,
  idOf,
  makeWorld,
  OWNER,
  QUOTED_FEE,
  RECIPIENT,
  RELAYER,
  recipientData,
  registerIn,
  registration,
  SHIELD,
  shieldData,
  signConsolidate,
  stranger,
  submit,
  TX_HASH,
  USDT,
  VAULT,
  WALLET,
  WALLET_ID,
  WETH,
  type World
} from "./claimSupport.js"

const run = (world: World, request: ClaimRequest, env: Record<string, string> = {}) =>
  submit(request).pipe(Effect.provide(claimsLayer(world, env)))

/** Refused with `code`, and nothing reached the sender. */
const refused = (world: World, request: ClaimRequest, code: string, env: Record<string, string> = {}) =>
  Effect.gen(function* () {
    const error = yield* Effect.flip(run(world, request, env))
    expect(errorCatalog[error._tag].code).toBe(code)
    expect(world.submitted).toHaveLength(0)
    return error
  })

const registered = () => {
  const world = makeWorld()
  registerIn(world, ID, { balances: { [USDT]: 1000n * E18, [WETH]: 10n * E18 } })
  return world
}

const request = (...args: Parameters<typeof claimRequest>) => Effect.promise(() => claimRequest(...args))

/** The vault calls a submitted transaction makes, in order. */
const callsOf = (data: Hex): ReadonlyArray<string> => {
  const outer = decodeFunctionData({ abi: feeVaultAbi, data })
  if (outer.functionName !== "multicall") return [outer.functionName]
  return outer.args[0].map((inner) => decodeFunctionData({ abi: feeVaultAbi, data: inner }).functionName)
}

const consolidation = (
  nonce: bigint,
  fields: Partial<Omit<ConsolidateStep, "signature">> = {},
  signer = undefined as Parameters<typeof signConsolidate>[3]
) =>
  Effect.promise(async () => {
    const step = {
      assetIn: WETH,
      amountIn: QUOTED | (10n * E18),
      minOut: 20_000n * E18,
      deadline: DEADLINE,
      ...fields
    }
    return { ...step, signature: await signConsolidate(ID, step, nonce, signer) } satisfies ConsolidateStep
  })

describe("accepted claims", () => {
  it.effect("direct: the claim alone, unwrapped, gas limit = estimate x 1.2, from the vault's hot key", () =>
    Effect.gen(function* () {
      const world = registered()
      const result = yield* run(world, yield* request())
      expect(result.txHash).toBe(TX_HASH)
      expect(world.submitted).toHaveLength(1)
      const [tx] = world.submitted
      expect(tx?.to).toBe(VAULT)
      expect(tx?.gas).toBe((GAS_ESTIMATE * 12n) / 10n)
      expect(callsOf(tx!.data)).toEqual(["claim"])
      expect(world.quoted).toEqual([
        {
          asset: USDT,
          adapter: addr("0x0000000000000000000000000000000000000000"),
          action: "claim",
          consolidate: false,
          register: false
        }
      ])
    })
  )

  it.effect("with a kind-1 registration: [registerOwner, claim], signed by register.owner", () =>
    Effect.gen(function* () {
      const world = makeWorld()
      yield* run(world, yield* request({}, { register: registration() }))
      expect(callsOf(world.submitted[0]!.data)).toEqual(["registerOwner", "claim"])
      expect(world.quoted[0]).toMatchObject({ register: true, consolidate: false })
    })
  )

  it.effect(
    "with a consolidation in the quoted full-balance form: [consolidate, claim], nonces n and n + 1",
    () =>
      Effect.gen(function* () {
        const world = makeWorld()
        registerIn(world, ID, { nonce: 3n, balances: { [USDT]: 5n * E18 } })
        const consolidate = yield* consolidation(3n)
        yield* run(world, yield* request({ nonce: 4n, amount: 20_005n * E18 }, { consolidate }))
        expect(callsOf(world.submitted[0]!.data)).toEqual(["consolidate", "claim"])
        expect(world.quoted[0]).toMatchObject({ consolidate: true, register: false })
      })
  )

  it.effect("registration, consolidation and claim together, in that order", () =>
    Effect.gen(function* () {
      const world = makeWorld()
      const consolidate = yield* consolidation(0n)
      yield* run(
        world,
        yield* request({ nonce: 1n, amount: 100n * E18 }, { consolidate, register: registration() })
      )
      expect(callsOf(world.submitted[0]!.data)).toEqual(["registerOwner", "consolidate", "claim"])
    })
  )

  it.effect("FULL: the whole balance with a fixed fee, checked only as fee <= existing + minOut", () =>
    Effect.gen(function* () {
      const world = makeWorld()
      registerIn(world, ID, { nonce: 0n, balances: { [USDT]: 0n } })
      const consolidate = yield* consolidation(0n, { amountIn: FULL, minOut: QUOTED_FEE })
      yield* run(world, yield* request({ nonce: 1n, amount: FULL }, { consolidate }))
      expect(world.submitted).toHaveLength(1)
    })
  )

  it.effect("FULL without consolidation goes to simulation, which knows the balance", () =>
    Effect.gen(function* () {
      const world = registered()
      yield* run(world, yield* request({ amount: FULL }))
      expect(world.submitted).toHaveLength(1)
    })
  )

  it.effect("shield adapter with the canonical payload of this account", () =>
    Effect.gen(function* () {
      const world = registered()
      yield* run(world, yield* request({ adapter: SHIELD }, { adapterData: shieldData() }))
      expect(world.submitted).toHaveLength(1)
    })
  )

  it.effect("relayer = 0x0: anyone may submit, this relayer does", () =>
    Effect.gen(function* () {
      const world = registered()
      yield* run(world, yield* request({ relayer: addr("0x0000000000000000000000000000000000000000") }))
      expect(world.submitted).toHaveLength(1)
    })
  )

  it.effect("an ERC-1271 owner's signature is left to the simulation", () =>
    Effect.gen(function* () {
      const world = makeWorld()
      registerIn(world, WALLET_ID, { owner: WALLET })
      const signature = `0x${"ab".repeat(100)}` as Signature
      yield* run(world, yield* request({ beneficiaryId: WALLET_ID }, { signature }))
      expect(world.submitted).toHaveLength(1)
    })
  )

  it.effect("a fee-only claim (amount = fee, empty data) through /v1/claim", () =>
    Effect.gen(function* () {
      const world = registered()
      yield* run(world, yield* request({ amount: QUOTED_FEE }, { adapterData: "0x" }))
      expect(world.submitted).toHaveLength(1)
      // The vault refuses a recipient when nothing goes to one.
      yield* refused(makeWorld(), yield* request({ amount: QUOTED_FEE }), "adapter_not_allowed")
    })
  )

  it.effect("a fee within QUOTE_TOLERANCE_BPS of the quote", () =>
    Effect.gen(function* () {
      const world = registered()
      // 1% tolerance: 99% of the quote passes.
      yield* run(world, yield* request({ relayerFee: (QUOTED_FEE * 99n) / 100n }), {
        QUOTE_TOLERANCE_BPS: "100"
      })
      expect(world.submitted).toHaveLength(1)
    })
  )
})

describe("rule 1: the request on its face", () => {
  it.effect("deadline closer than MIN_DEADLINE_SECONDS: deadline_too_soon", () =>
    Effect.gen(function* () {
      const world = registered()
      yield* refused(world, yield* request({ deadline: 119n }), "deadline_too_soon")
      yield* refused(world, yield* request({ deadline: 30n }), "deadline_too_soon", {
        MIN_DEADLINE_SECONDS: "60"
      })
      // Exactly the minimum is enough.
      yield* run(world, yield* request({ deadline: 120n }))
    })
  )

  it.effect("the consolidation's deadline needs the same headroom", () =>
    Effect.gen(function* () {
      const world = registered()
      const consolidate = yield* consolidation(0n, { deadline: 100n })
      yield* refused(world, yield* request({ nonce: 1n }, { consolidate }), "deadline_too_soon")
    })
  )

  it.effect("relayer = 0x0 under OPEN_CLAIMS=refuse: bad_request saying to name this relayer", () =>
    Effect.gen(function* () {
      const open = yield* request({ relayer: addr("0x0000000000000000000000000000000000000000") })
      const error = yield* refused(registered(), open, "bad_request", { OPEN_CLAIMS: "refuse" })
      expect(error.message).toContain(`name this relayer, ${RELAYER}`)
      // private-only (with a send RPC) and accept relay it.
      for (const mode of ["private-only", "accept"]) {
        const world = registered()
        yield* run(world, open, { OPEN_CLAIMS: mode, SEND_RPC_URL: "http://127.0.0.1:1" })
        expect(world.submitted).toHaveLength(1)
      }
    })
  )

  it.effect("another relayer named: relayer_mismatch", () =>
    Effect.gen(function* () {
      yield* refused(registered(), yield* request({ relayer: addr(stranger.address) }), "relayer_mismatch")
    })
  )

  it.effect("zero amount or a fee above the amount: invalid_amount", () =>
    Effect.gen(function* () {
      yield* refused(registered(), yield* request({ amount: 0n, relayerFee: 0n }), "invalid_amount")
      yield* refused(registered(), yield* request({ amount: 1n, relayerFee: 2n }), "invalid_amount")
    })
  )

  it.effect("adapterData that does not hash to dataHash: data_hash_mismatch", () =>
    Effect.gen(function* () {
      const req = yield* request()
      const tampered = { ...req, adapterData: recipientData(DENIED) as ClaimRequest["adapterData"] }
      yield* refused(registered(), tampered, "data_hash_mismatch")
    })
  )

  it.effect("unknown adapter, shield of another asset, bad payloads: adapter_not_allowed", () =>
    Effect.gen(function* () {
      const other = addr("0x00000000000000000000000000000000000000b2")
      yield* refused(registered(), yield* request({ adapter: other }), "adapter_not_allowed")
      yield* refused(
        registered(),
        yield* request({ adapter: SHIELD, asset: WETH }, { adapterData: shieldData() }),
        "adapter_not_allowed"
      )
      // A payload made for another account.
      yield* refused(
        registered(),
        yield* request({ adapter: SHIELD }, { adapterData: shieldData(WALLET_ID) }),
        "adapter_not_allowed"
      )
      // Zero note value.
      yield* refused(
        registered(),
        yield* request({ adapter: SHIELD }, { adapterData: shieldData(ID, 0n) }),
        "adapter_not_allowed"
      )
      // Direct: not one address word, the zero address, or a dirty high part.
      for (const adapterData of [
        "0x1234",
        recipientData(addr("0x0000000000000000000000000000000000000000")),
        `0x${"ff".repeat(12)}${RECIPIENT.slice(2).toLowerCase()}`,
        "0x"
      ] as const)
        yield* refused(
          registered(),
          yield* request({}, { adapterData: adapterData as Hex }),
          "adapter_not_allowed"
        )
    })
  )

  it.effect("a registration of another id: bad_request", () =>
    Effect.gen(function* () {
      yield* refused(
        makeWorld(),
        yield* request({}, { register: { ...registration(), salt: keccak256(toHex("other")) as Bytes32 } }),
        "bad_request"
      )
    })
  )

  it.effect("consolidation amounts and assets", () =>
    Effect.gen(function* () {
      const zeroIn = yield* consolidation(0n, { amountIn: 0n })
      yield* refused(registered(), yield* request({ nonce: 1n }, { consolidate: zeroIn }), "invalid_amount")
      const zeroOut = yield* consolidation(0n, { minOut: 0n })
      yield* refused(registered(), yield* request({ nonce: 1n }, { consolidate: zeroOut }), "invalid_amount")
      const settlementIn = yield* consolidation(0n, { assetIn: USDT })
      yield* refused(
        registered(),
        yield* request({ nonce: 1n }, { consolidate: settlementIn }),
        "bad_request"
      )
      // The claim after a consolidation is of the settlement asset.
      const step = yield* consolidation(0n)
      yield* refused(
        registered(),
        yield* request({ nonce: 1n, asset: WETH, amount: 1n * E18, relayerFee: 0n }, { consolidate: step }),
        "invalid_amount"
      )
    })
  )

  it.effect("the quoted full-balance form on a deployment that reads it literally: invalid_amount", () =>
    Effect.gen(function* () {
      const world = registered()
      const quoted = yield* consolidation(0n)
      const path = yield* Effect.promise(async () => {
        const { mkdtemp, writeFile } = await import("node:fs/promises")
        const { tmpdir } = await import("node:os")
        const { join } = await import("node:path")
        const dir = await mkdtemp(join(tmpdir(), "claim-deployment-"))
        const file = join(dir, "deployment.json")
        await writeFile(
          file,
          JSON.stringify({
            chainId: 31337,
            vault: VAULT,
            settlementAsset: USDT,
            shieldAdapter: SHIELD,
            swapRouter: addr("0x00000000000000000000000000000000000000c1"),
            startBlock: 1,
            quotedFullBalance: false,
            assets: {},
            nativePriceFeed: addr("0x00000000000000000000000000000000000000d0")
          })
        )
        return file
      })
      yield* refused(world, yield* request({ nonce: 1n }, { consolidate: quoted }), "invalid_amount", {
        DEPLOYMENT_FILE: path
      })
      // FULL (absolute minOut) is still accepted there.
      const full = yield* consolidation(0n, { amountIn: FULL })
      yield* run(world, yield* request({ nonce: 1n }, { consolidate: full }), { DEPLOYMENT_FILE: path })
    })
  )
})

describe("rule 2: deny list", () => {
  it.effect("a denied direct recipient: recipient_denied", () =>
    Effect.gen(function* () {
      yield* refused(
        registered(),
        yield* request({}, { adapterData: recipientData(DENIED) }),
        "recipient_denied"
      )
    })
  )

  it.effect("a registration whose fallback recipient is denied: recipient_denied", () =>
    Effect.gen(function* () {
      const register = { ...registration(), fallbackRecipient: DENIED, fallbackDelay: 86_400n }
      yield* refused(
        makeWorld(),
        yield* request({ beneficiaryId: idOf(register) }, { register }),
        "recipient_denied"
      )
    })
  )
})

describe("rule 3: signatures, owner, nonces", () => {
  it.effect("signed by someone else: invalid_signature", () =>
    Effect.gen(function* () {
      yield* refused(registered(), yield* request({}, { signer: stranger }), "invalid_signature")
      // Registering: register.owner is the one who must sign.
      yield* refused(
        makeWorld(),
        yield* request({}, { register: registration(), signer: stranger }),
        "invalid_signature"
      )
    })
  )

  it.effect("signatures the vault's ECDSA refuses: wrong length, high s, bad v", () =>
    Effect.gen(function* () {
      const good = (yield* request()).signature
      const n = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n
      const s = BigInt(`0x${good.slice(66, 130)}`)
      const v = Number.parseInt(good.slice(130), 16)
      const malleable = `${good.slice(0, 66)}${(n - s).toString(16).padStart(64, "0")}${(v === 27 ? 28 : 27).toString(16)}`
      for (const signature of [good.slice(0, 130), malleable, `${good.slice(0, 130)}01`])
        yield* refused(registered(), yield* request({}, { signature: signature as Hex }), "invalid_signature")
    })
  )

  it.effect("an unregistered id without register: not_found", () =>
    Effect.gen(function* () {
      yield* refused(makeWorld(), yield* request(), "not_found")
      // The owner is judged before the signature.
      yield* refused(makeWorld(), yield* request({}, { signer: stranger }), "not_found")
      const malformed = (yield* request()).signature.slice(0, 130) as Hex
      yield* refused(makeWorld(), yield* request({}, { signature: malformed }), "not_found")
    })
  )

  it.effect("register for an account that is already registered: bad_request", () =>
    Effect.gen(function* () {
      yield* refused(registered(), yield* request({}, { register: registration() }), "bad_request")
    })
  )

  it.effect("a handle account without an owner: invalid_signature", () =>
    Effect.gen(function* () {
      const world = makeWorld()
      registerIn(world, ID, { kind: 2, owner: addr("0x0000000000000000000000000000000000000000") })
      yield* refused(world, yield* request(), "invalid_signature")
      const handle = {
        kind: 2 as const,
        handleCommitment: keccak256(toHex("handle")) as Bytes32,
        fallbackRecipient: addr("0x0000000000000000000000000000000000000000"),
        fallbackDelay: 0n
      }
      const handleId = keccak256(
        `0x${"02".padStart(64, "0")}${handle.handleCommitment.slice(2)}${"0".repeat(128)}`
      ) as Bytes32
      yield* refused(
        makeWorld(),
        yield* request({ beneficiaryId: handleId }, { register: handle }),
        "invalid_signature"
      )
    })
  )

  it.effect("a nonce other than nonces(id): nonce_mismatch", () =>
    Effect.gen(function* () {
      const world = makeWorld()
      registerIn(world, ID, { nonce: 2n })
      yield* refused(world, yield* request({ nonce: 1n }), "nonce_mismatch")
      yield* refused(world, yield* request({ nonce: 3n }), "nonce_mismatch")
    })
  )

  it.effect("with a consolidation the claim carries nonces(id) + 1: nonce_mismatch otherwise", () =>
    Effect.gen(function* () {
      const world = registered()
      const consolidate = yield* consolidation(0n)
      yield* refused(world, yield* request({ nonce: 0n }, { consolidate }), "nonce_mismatch")
    })
  )

  it.effect("a consolidation not signed by the owner over nonces(id): invalid_signature", () =>
    Effect.gen(function* () {
      const byStranger = yield* consolidation(0n, {}, stranger)
      yield* refused(
        registered(),
        yield* request({ nonce: 1n }, { consolidate: byStranger }),
        "invalid_signature"
      )
      const wrongNonce = yield* consolidation(1n)
      yield* refused(
        registered(),
        yield* request({ nonce: 1n }, { consolidate: wrongNonce }),
        "invalid_signature"
      )
    })
  )

  it.effect("amount above existing + minOut after a consolidation: invalid_amount", () =>
    Effect.gen(function* () {
      const world = makeWorld()
      registerIn(world, ID, { balances: { [USDT]: 5n * E18 } })
      const consolidate = yield* consolidation(0n, { minOut: 10n * E18 })
      yield* refused(
        world,
        yield* request({ nonce: 1n, amount: 15n * E18 + 1n }, { consolidate }),
        "invalid_amount"
      )
      yield* run(world, yield* request({ nonce: 1n, amount: 15n * E18 }, { consolidate }))
    })
  )

  it.effect("FULL after a consolidation: only the fee must fit in existing + minOut", () =>
    Effect.gen(function* () {
      const world = makeWorld()
      registerIn(world, ID, { balances: { [USDT]: 0n } })
      const consolidate = yield* consolidation(0n, { minOut: QUOTED_FEE - 1n })
      yield* refused(world, yield* request({ nonce: 1n, amount: FULL }, { consolidate }), "invalid_amount")
    })
  )
})

describe("rule 4: fee", () => {
  it.effect("below the current quote: fee_too_low, with the quote's flags", () =>
    Effect.gen(function* () {
      const world = registered()
      yield* refused(world, yield* request({ relayerFee: QUOTED_FEE - 1n }), "fee_too_low")
      yield* refused(world, yield* request({ relayerFee: (QUOTED_FEE * 98n) / 100n }), "fee_too_low", {
        QUOTE_TOLERANCE_BPS: "100"
      })
      expect(world.quoted[0]).toMatchObject({ action: "claim", asset: USDT })
    })
  )
})

describe("rule 5: simulation, gas cap, sending", () => {
  it.effect("a reverting simulation: simulation_failed with the decoded error, counted", () =>
    Effect.gen(function* () {
      const world = registered()
      const failures = Metric.tagged(
        Metric.tagged(simulationFailures, "action", "claim"),
        "error",
        "InsufficientBalance"
      )
      const before = (yield* Metric.value(failures)).count
      let from: string | undefined
      world.simulate = (call) => {
        from = call.from
        return Effect.fail(
          new ChainReverted({
            operation: "eth_call",
            data: "0x",
            errorName: "InsufficientBalance",
            args: [1n, 2n],
            description: "InsufficientBalance(1, 2)"
          })
        )
      }
      const error = yield* refused(world, yield* request(), "simulation_failed")
      expect(error.message).toContain("InsufficientBalance(1, 2)")
      // Simulated as the hot key, which the vault sees as msg.sender.
      expect(from).toBe(RELAYER)
      expect((yield* Metric.value(failures)).count).toBe(before + 1)
    })
  )

  it.effect("a revert at estimation is a simulation failure too", () =>
    Effect.gen(function* () {
      const world = registered()
      world.estimate = () =>
        Effect.fail(
          new ChainReverted({ operation: "eth_estimateGas", data: "0x", description: "InvalidSignature()" })
        )
      yield* refused(world, yield* request(), "simulation_failed")
    })
  )

  it.effect("an estimate above budget x GAS_CAP_BPS: gas_cap_exceeded", () =>
    Effect.gen(function* () {
      const world = registered()
      world.estimate = () => Effect.succeed(GAS_BUDGET * 2n + 1n)
      yield* refused(world, yield* request(), "gas_cap_exceeded")
      world.estimate = () => Effect.succeed(GAS_BUDGET * 2n)
      yield* run(world, yield* request())
      expect(world.submitted[0]?.gas).toBe((GAS_BUDGET * 2n * 12n) / 10n)
    })
  )

  it.effect("the chain not answering: unavailable", () =>
    Effect.gen(function* () {
      const world = registered()
      world.simulate = () =>
        Effect.fail(
          new ChainUnavailable({ operation: "eth_call", reason: "down", attempts: 3, cause: undefined })
        )
      yield* refused(world, yield* request(), "unavailable")
    })
  )

  it.effect("the sender failing: unavailable", () =>
    Effect.gen(function* () {
      const world = registered()
      world.submit = () => Effect.fail(new HotKeyUnderfunded())
      const error = yield* Effect.flip(run(world, yield* request()))
      expect(errorCatalog[error._tag].code).toBe("unavailable")
    })
  )
})

describe("per-id rate limit", () => {
  it.effect("charged only after a successful simulation: 6 sends, then 429 with the wait", () =>
    Effect.gen(function* () {
      const world = registered()
      const layer = claimsLayer(world)
      yield* Effect.gen(function* () {
        // Refusals before sending do not charge the bucket.
        world.simulate = () =>
          Effect.fail(
            new ChainReverted({ operation: "eth_call", data: "0x", description: "InvalidNonce(0, 0)" })
          )
        for (let i = 0; i < 10; i++) yield* Effect.flip(submit(yield* request()))
        world.simulate = () => Effect.succeed("0x")
        for (let i = 0; i < 6; i++) yield* submit(yield* request())
        const error = yield* Effect.flip(submit(yield* request()))
        expect(error._tag).toBe("RateLimited")
        if (error._tag === "RateLimited") expect(error.retryAfterSeconds).toBeCloseTo(10, 0)
        expect(world.submitted).toHaveLength(6)
        // Another account has its own bucket.
        registerIn(world, WALLET_ID, { owner: OWNER })
        yield* submit(yield* request({ beneficiaryId: WALLET_ID }))
      }).pipe(Effect.provide(layer))
    })
  )
})
