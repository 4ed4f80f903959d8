/**
 * The fee cover (docs/relayer.md §8 "Gas cap and fee margin"): a paid request's gas limit times the
 * gas price a transaction sent now pays, converted at its quote's price, must be covered by its fee,
 * else 402 `fee_too_low` naming the fee that would do and nothing sent. The gas price is the fee
 * oracle's latest reading, not the quote's: a quote is cached for its lifetime, priced at the
 * reading of its time. Claims run with the real fee oracle over a gas price the test sets; owner
 * actions with the stub oracle of claimSupport.ts. Time is the TestClock (now = 0).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, TestClock } from "effect"
import { decodeFunctionData, keccak256 } from "viem"
import { feeVaultAbi } from "../../contracts/abi.js"
import { vaultTypes } from "../../schema/eip712.js"
import { errorCatalog } from "../../schema/errors.js"
import { ZeroAddress } from "../../schema/primitives.js"
import type { Claim, PingRequest } from "../../schema/relayer.js"
import type { NativePrice } from "../../src/config/relayer.js"
import {
  FeeOracle,
  gasTable,
  makeFeeOracleWith,
  type QuoteRequest,
  relayerFeeOf
} from "../../src/relayer/FeeOracle.js"
import { feeCovering } from "../../src/relayer/fees/cover.js"
import { staticPriceSource } from "../../src/relayer/fees/priceSources.js"
import { OwnerActions } from "../../src/relayer/OwnerActions.js"
import {
  claimRequest,
  claimsLayer,
  DEADLINE,
  domain,
  E18,
  ID,
  makeWorld,
  owner,
  RELAYER,
  registerIn,
  SHIELD,
  submit,
  TX_HASH,
  USDT,
  type World
} from "./claimSupport.js"

const GWEI = 10n ** 9n

describe("feeCovering", () => {
  it("is the gas limit times the gas price, converted at the price and rounded up, without the margin", () => {
    const one: NativePrice = { num: 1n, den: 1n }
    expect(feeCovering(180_000n, 2n * GWEI, one)).toBe(360_000n * GWEI)
    // 3000 units of a 6-decimal asset per ether: 180k gas at 2 gwei is 0.00036 ether, 1.08 units.
    const sixDecimals: NativePrice = { num: 3000n * 10n ** 6n, den: E18 }
    expect(feeCovering(180_000n, 2n * GWEI, sixDecimals)).toBe(1_080_000n)
    // A fraction of a base unit is rounded up, never down: 7 wei at 1/3 of a unit per wei is 2.33.
    expect(feeCovering(7n, 1n, { num: 1n, den: 3n })).toBe(3n)
    expect(feeCovering(6n, 1n, { num: 1n, den: 3n })).toBe(2n)
    expect(feeCovering(1n, 1n, { num: 1n, den: 10n ** 18n })).toBe(1n)
    expect(feeCovering(0n, 2n * GWEI, one)).toBe(0n)
  })
})

/** Refused with `code`, and nothing reached the sender. */
const refusedWith = <E extends { readonly _tag: keyof typeof errorCatalog; readonly message: string }, R>(
  world: World,
  attempt: Effect.Effect<unknown, E, R>,
  code: string
) =>
  Effect.gen(function* () {
    const error = yield* Effect.flip(attempt)
    expect(errorCatalog[error._tag].code, error.message).toBe(code)
    expect(world.submitted).toHaveLength(0)
    return error.message
  })

const neededIn = (message: string) => BigInt(/needs at least (\d+)$/.exec(message)?.[1] ?? "-1")

describe("a claim's fee cover", () => {
  // One unit of the asset per wei keeps the figures readable.
  const ONE: NativePrice = { num: 1n, den: 1n }
  const P = 2n * GWEI
  const direct: QuoteRequest = {
    asset: USDT,
    adapter: ZeroAddress,
    action: "claim",
    consolidate: false,
    register: false
  }

  /**
   * The relayer's fee oracle, reading its gas price from `reading` every 5 s (none while it is
   * "down"), for at most 60 s; quotes live `quoteTtlSeconds`.
   */
  const liveOracle = (reading: { wei: bigint | "down" }, quoteTtlSeconds = 60) =>
    Layer.scoped(
      FeeOracle,
      makeFeeOracleWith({
        rules: { settlementAsset: USDT, shieldAdapter: SHIELD, assets: new Set([USDT]) },
        sources: [staticPriceSource(new Map([[USDT, ONE]]))],
        gasPrice: Effect.suspend(() =>
          reading.wei === "down" ? Effect.fail({ message: "down" }) : Effect.succeed(reading.wei)
        ),
        feeMarginBps: 13_000,
        quoteTtlSeconds,
        gasPriceRefreshMs: 5_000,
        gasPriceMaxAgeSeconds: 60,
        gasBudgetBps: 10_000,
        maxDeviationBps: 500,
        gasLimitMultiplierBps: 12_000
      })
    )

  it.effect(
    "is checked at the gas price read now: a quote cached when gas was cheaper does not let the claim through",
    () =>
      Effect.gen(function* () {
        const world = makeWorld()
        registerIn(world, ID, { balances: { [USDT]: 1000n * E18 } })
        // Estimated 5 % over its budget: a 1.2x gas limit of 189k, well under the 2x cap, that a
        // fee of the quote (150k x 1.3 = 195k gas) pays for at P but not at 1.05 P.
        const estimate = (gasTable.claimDirect * 105n) / 100n
        world.estimate = () => Effect.succeed(estimate)
        const gasLimit = (estimate * 12n) / 10n
        const risen = (P * 105n) / 100n
        const reading: { wei: bigint | "down" } = { wei: P }
        yield* Effect.gen(function* () {
          const oracle = yield* FeeOracle
          // The wallet asks for the quote while gas costs P: 150k x 1.3 x P.
          const quote = yield* oracle.quote(direct)
          expect(quote.gasPrice).toBe(P)
          expect(quote.relayerFee).toBe(relayerFeeOf(gasTable.claimDirect, P, 13_000, ONE))
          // Within the quote's lifetime the gas price rises 5 %, less than the quote's fee leaves
          // over its budget's gas limit (1.3 / 1.2): the quote in force is still the one priced
          // at P, so a fee of it passes the quote rule.
          reading.wei = risen
          yield* TestClock.adjust("5 seconds")
          expect(yield* oracle.gasPrice).toBe(risen)
          expect(yield* oracle.quote(direct)).toEqual(quote)
          // It pays for this claim's gas limit at P, not at 1.05 P: refused, naming the fee at 1.05 P.
          expect(quote.relayerFee).toBeGreaterThanOrEqual(gasLimit * P)
          expect(quote.relayerFee).toBeLessThan(gasLimit * risen)
          const message = yield* refusedWith(
            world,
            submit(yield* Effect.promise(() => claimRequest({ relayerFee: quote.relayerFee }))),
            "fee_too_low"
          )
          expect(message).toMatch(
            new RegExp(`^claim\\.relayerFee does not pay for this transaction's gas limit of ${gasLimit} `)
          )
          const needed = neededIn(message)
          expect(needed).toBe(feeCovering(gasLimit, risen, ONE))
          // Paying that fee, it goes.
          expect(yield* submit(yield* Effect.promise(() => claimRequest({ relayerFee: needed })))).toEqual({
            txHash: TX_HASH
          })
          expect(world.submitted).toHaveLength(1)
          expect(world.submitted[0]?.gas).toBe(gasLimit)
        }).pipe(Effect.provide(claimsLayer(world, {}, { oracle: liveOracle(reading) })))
      })
  )

  it.effect(
    "a gas price risen past what a quote's fee pays for at its budget's gas limit prices the quote again, before its time",
    () =>
      Effect.gen(function* () {
        const world = makeWorld()
        registerIn(world, ID, { balances: { [USDT]: 1000n * E18 } })
        world.estimate = () => Effect.succeed(gasTable.claimDirect)
        const reading: { wei: bigint | "down" } = { wei: P }
        yield* Effect.gen(function* () {
          const oracle = yield* FeeOracle
          const quote = yield* oracle.quote(direct)
          expect(oracle.isCurrent(quote)).toBe(true)
          // Gas doubles 5 s into a 60 s quote: a fee of it no longer pays for 1.2x its budget.
          reading.wei = 2n * P
          yield* TestClock.adjust("5 seconds")
          expect(oracle.isCurrent(quote)).toBe(false)
          const again = yield* oracle.quote(direct)
          expect(again.gasPrice).toBe(2n * P)
          expect(again.relayerFee).toBe(relayerFeeOf(gasTable.claimDirect, 2n * P, 13_000, ONE))
          // A wallet that asks again after a refusal is told the fee that now goes through.
          const message = yield* refusedWith(
            world,
            submit(yield* Effect.promise(() => claimRequest({ relayerFee: quote.relayerFee }))),
            "fee_too_low"
          )
          expect(message).toMatch(/below the current quote/)
          expect(
            yield* submit(yield* Effect.promise(() => claimRequest({ relayerFee: again.relayerFee })))
          ).toEqual({
            txHash: TX_HASH
          })
          // A rise the fee still covers keeps the quote: 8 % more is below 1.3 / 1.2.
          reading.wei = (2n * P * 108n) / 100n
          yield* TestClock.adjust("5 seconds")
          expect(yield* oracle.quote(direct)).toEqual(again)
        }).pipe(Effect.provide(claimsLayer(world, {}, { oracle: liveOracle(reading) })))
      })
  )

  it.effect("no gas price reading for longer than GAS_PRICE_MAX_AGE_SECONDS: 503, nothing sent", () =>
    Effect.gen(function* () {
      const world = makeWorld()
      registerIn(world, ID, { balances: { [USDT]: 1000n * E18 } })
      const reading: { wei: bigint | "down" } = { wei: P }
      yield* Effect.gen(function* () {
        const oracle = yield* FeeOracle
        const quote = yield* oracle.quote(direct)
        reading.wei = "down"
        yield* TestClock.adjust("65 seconds")
        // The quote is still in force (a lifetime of 120 s here), its price no fallback: the
        // relayer cannot see what gas costs now.
        expect(yield* oracle.quote(direct)).toEqual(quote)
        const message = yield* refusedWith(
          world,
          submit(yield* Effect.promise(() => claimRequest({ relayerFee: quote.relayerFee * 10n }))),
          "unavailable"
        )
        expect(message).toMatch(/gas price is stale/)
      }).pipe(Effect.provide(claimsLayer(world, {}, { oracle: liveOracle(reading, 120) })))
    })
  )
})

describe("a paid owner action's fee cover (REQUIRE_ACTION_FEE)", () => {
  /** A ping at the account's nonce 0 with a fee-only claim of `fee` at nonce 1, both signed by the owner. */
  const paidPing = (fee: bigint) =>
    Effect.promise(async (): Promise<PingRequest> => {
      const claim = {
        beneficiaryId: ID,
        asset: USDT,
        amount: fee,
        adapter: ZeroAddress,
        dataHash: keccak256("0x"),
        relayer: RELAYER,
        relayerFee: fee,
        nonce: 1n,
        deadline: DEADLINE
      } as Claim
      const [signature, feeSignature] = await Promise.all([
        owner.signTypedData({
          domain,
          types: vaultTypes,
          primaryType: "Ping",
          message: { id: ID, nonce: 0n, deadline: DEADLINE }
        }),
        owner.signTypedData({
          domain,
          types: vaultTypes,
          primaryType: "Claim",
          message: claim
        })
      ])
      return {
        id: ID,
        deadline: DEADLINE,
        signature,
        fee: { claim, signature: feeSignature }
      } as PingRequest
    })

  const ping = (request: PingRequest) => Effect.flatMap(OwnerActions, (actions) => actions.ping(request))

  const world = () => {
    const w = makeWorld()
    registerIn(w, ID, { balances: { [USDT]: 1000n * E18 } })
    // A quote of 200k units; the stub's estimate of 150k gives a 180k gas limit.
    w.fee = 200_000n
    return w
  }

  it.effect("a fee that pays the quote but not the gas limit at the current gas price: fee_too_low", () =>
    Effect.gen(function* () {
      const refused = world()
      refused.gasPrice = 2n
      const message = yield* refusedWith(
        refused,
        ping(yield* paidPing(200_000n)).pipe(Effect.provide(claimsLayer(refused))),
        "fee_too_low"
      )
      expect(message).toBe(
        "fee.claim.relayerFee does not pay for this transaction's gas limit of 180000 at the current gas price: it needs at least 360000"
      )

      // Paying that, the ping and its fee claim go out together.
      const paid = world()
      paid.gasPrice = 2n
      expect(yield* ping(yield* paidPing(360_000n)).pipe(Effect.provide(claimsLayer(paid)))).toEqual({
        txHash: TX_HASH
      })
      const sent = decodeFunctionData({ abi: feeVaultAbi, data: paid.submitted[0]!.data })
      expect(sent.functionName).toBe("multicall")
      expect(
        (sent.args[0] as ReadonlyArray<`0x${string}`>).map(
          (call) => decodeFunctionData({ abi: feeVaultAbi, data: call }).functionName
        )
      ).toEqual(["ping", "claim"])
    })
  )

  it.effect("with REQUIRE_ACTION_FEE=false the operator pays: the fee is not checked", () =>
    Effect.gen(function* () {
      const unchecked = world()
      unchecked.gasPrice = 2n
      yield* ping(yield* paidPing(200_000n)).pipe(
        Effect.provide(claimsLayer(unchecked, { REQUIRE_ACTION_FEE: "false" }))
      )
      expect(unchecked.submitted).toHaveLength(1)
    })
  )
})
