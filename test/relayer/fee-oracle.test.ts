/**
 * The fee oracle's logic above the chain: quote rules, fee arithmetic, static price parsing,
 * falling through price sources, the quote cache, and the background gas price. The chain is a
 * mock and time is the TestClock.
 */
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Either, Exit, Layer, Metric, Option, TestClock } from "effect"
import { type Address, getAddress, zeroAddress } from "viem"
import { AdapterNotAllowed, BadRequest, Unavailable } from "../../schema/errors.js"
import { type ChainClientShape, ChainUnavailable } from "../../src/chain/ChainClient.js"
import { mockChainClient } from "../../src/chain/MockChainClient.js"
import {
  loadRelayerSettings,
  type NativePrice,
  parseStaticPrices,
  RelayerSettings
} from "../../src/config/relayer.js"
import { formatConfigError } from "../../src/config/settings.js"
import {
  FeeOracle,
  type FeeOracleOptions,
  gasBudgetOf,
  gasTable,
  makeFeeOracleWith,
  type QuoteRequest,
  type QuoteRules,
  relayerFeeOf,
  validateQuoteRequest
} from "../../src/relayer/FeeOracle.js"
import {
  gasPriceRefreshFailures,
  priceDeviations,
  priceSourceFailures
} from "../../src/relayer/fees/metrics.js"
import {
  deviationBps,
  exceedsDeviation,
  type PriceSource,
  PriceSourceFailed
} from "../../src/relayer/fees/priceSources.js"

const USDT = getAddress("0x00000000000000000000000000000000000000a1")
const WETH = getAddress("0x00000000000000000000000000000000000000a2")
const USDC = getAddress("0x00000000000000000000000000000000000000a3")
const OTHER = getAddress("0x00000000000000000000000000000000000000a4")
const SHIELD = getAddress("0x00000000000000000000000000000000000000b1")
const ROUTER = getAddress("0x00000000000000000000000000000000000000c1")
const NATIVE_FEED = getAddress("0x00000000000000000000000000000000000000d0")
const USDT_FEED = getAddress("0x00000000000000000000000000000000000000d1")
const USDC_FEED = getAddress("0x00000000000000000000000000000000000000d3")
const VAULT = getAddress("0x00000000000000000000000000000000000000e1")
const GWEI = 10n ** 9n
const E18 = 10n ** 18n

const rules: QuoteRules = {
  settlementAsset: USDT,
  shieldAdapter: SHIELD,
  assets: new Set([USDT, WETH, USDC])
}

const request = (overrides: Partial<QuoteRequest> = {}): QuoteRequest => ({
  asset: USDT,
  adapter: zeroAddress,
  action: "claim",
  consolidate: false,
  register: false,
  ...overrides
})

/** The error a failed effect ended with. */
const failureOf = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.flip(effect)

const counterValue = (counter: Metric.Metric.Counter<number>) =>
  Effect.map(Metric.value(counter), (s) => s.count)
const sourceFailures = (source: string) => counterValue(Metric.tagged(priceSourceFailures, "source", source))
const deviations = (source: string) => counterValue(Metric.tagged(priceDeviations, "source", source))

// ---------------------------------------------------------------------------------------------

describe("quote rules", () => {
  const refusal = (overrides: Partial<QuoteRequest>) =>
    failureOf(validateQuoteRequest(rules, request(overrides)))

  it.effect("accepts the zero adapter for every action and the shield adapter for settlement claims", () =>
    Effect.gen(function* () {
      for (const action of ["claim", "consolidate", "rotate-owner", "ping"] as const)
        expect((yield* validateQuoteRequest(rules, request({ action }))).adapter).toBe("direct")
      const templates = yield* validateQuoteRequest(
        rules,
        request({ action: "shield-templates", templates: 32 })
      )
      expect(templates.templates).toBe(32)
      const shield = yield* validateQuoteRequest(
        rules,
        request({ adapter: SHIELD, consolidate: true, register: true })
      )
      expect(shield).toMatchObject({ adapter: "shield", consolidate: true, register: true })
    })
  )

  it.effect("takes addresses in any case", () =>
    Effect.gen(function* () {
      const lower = (a: Address) => a.toLowerCase() as Address
      const direct = yield* validateQuoteRequest(rules, request({ asset: lower(USDC) }))
      expect(direct.asset).toBe(USDC)
      const shield = yield* validateQuoteRequest(
        rules,
        request({ asset: lower(USDT), adapter: lower(SHIELD) })
      )
      expect(shield.adapter).toBe("shield")
    })
  )

  it.effect("refuses an unknown adapter", () =>
    Effect.gen(function* () {
      const error = yield* refusal({ adapter: OTHER })
      expect(error).toBeInstanceOf(AdapterNotAllowed)
    })
  )

  it.effect("refuses the shield adapter with another asset than the settlement asset", () =>
    Effect.gen(function* () {
      expect(yield* refusal({ adapter: SHIELD, asset: WETH })).toBeInstanceOf(AdapterNotAllowed)
    })
  )

  it.effect("refuses a non-zero adapter on every non-claim action", () =>
    Effect.gen(function* () {
      for (const action of ["consolidate", "rotate-owner", "ping"] as const)
        expect(yield* refusal({ adapter: SHIELD, action })).toBeInstanceOf(AdapterNotAllowed)
      expect(yield* refusal({ adapter: SHIELD, action: "shield-templates", templates: 1 })).toBeInstanceOf(
        AdapterNotAllowed
      )
    })
  )

  it.effect("wants templates 1..32 with shield-templates and nowhere else", () =>
    Effect.gen(function* () {
      for (const templates of [undefined, 0, 33, 1.5]) {
        const overrides: Partial<QuoteRequest> =
          templates === undefined ? { action: "shield-templates" } : { action: "shield-templates", templates }
        expect(yield* refusal(overrides)).toBeInstanceOf(BadRequest)
      }
      expect(yield* refusal({ action: "ping", templates: 3 })).toBeInstanceOf(BadRequest)
    })
  )

  it.effect("takes consolidate=1 only on a claim of the settlement asset", () =>
    Effect.gen(function* () {
      expect(yield* refusal({ action: "ping", consolidate: true })).toBeInstanceOf(BadRequest)
      expect(yield* refusal({ action: "consolidate", consolidate: true })).toBeInstanceOf(BadRequest)
      expect(yield* refusal({ asset: WETH, consolidate: true })).toBeInstanceOf(BadRequest)
    })
  )

  it.effect("refuses an asset the relayer has no price for at all", () =>
    Effect.gen(function* () {
      const error = yield* refusal({ asset: OTHER })
      expect(error).toBeInstanceOf(BadRequest)
      expect(error.message).toMatch(/asset/)
    })
  )
})

describe("fee arithmetic", () => {
  it("multiplies gas, gas price and margin, converts, and rounds up", () => {
    // 100_000 gas at 2 gwei with 1.3x: 2.6e14 wei; at 3000 units of an 18-decimal token per ETH.
    const perEth: NativePrice = { num: 3000n * E18, den: E18 }
    expect(relayerFeeOf(100_000n, 2n * GWEI, 13_000, perEth)).toBe(780_000_000_000_000_000n)
    // A 6-decimal token: 0.78 units = 780_000 base units, and one wei more of cost rounds up.
    const sixDecimals: NativePrice = { num: 3000n * 10n ** 6n, den: E18 }
    expect(relayerFeeOf(100_000n, 2n * GWEI, 13_000, sixDecimals)).toBe(780_000n)
    expect(relayerFeeOf(100_001n, 2n * GWEI, 13_000, sixDecimals)).toBe(780_008n)
  })

  it("never quotes zero, since a fee-only claim needs a fee", () => {
    expect(relayerFeeOf(100_000n, 0n, 13_000, { num: 1n, den: E18 })).toBe(1n)
    expect(relayerFeeOf(1n, 1n, 10_000, { num: 1n, den: E18 })).toBe(1n)
  })

  it("takes its gas budget from the table, scaled by GAS_BUDGET_BPS", () => {
    const base = { consolidate: false, register: false } as const
    expect(gasBudgetOf({ ...base, action: "claim", adapter: "direct" })).toBe(gasTable.claimDirect)
    expect(gasBudgetOf({ ...base, action: "claim", adapter: "shield", register: true })).toBe(
      gasTable.claimShield + gasTable.register + gasTable.claimMulticall
    )
    expect(gasBudgetOf({ ...base, action: "shield-templates", adapter: "direct", templates: 32 })).toBe(
      gasTable.shieldTemplatesWithFeeBase + 32n * gasTable.shieldTemplatesPerTemplate
    )
    expect(gasBudgetOf({ ...base, action: "ping", adapter: "direct" }, 15_000)).toBe(
      (gasTable.pingWithFee * 3n) / 2n
    )
  })
})

describe("price deviation", () => {
  it("compares the ratios exactly, in either direction", () => {
    const feed = perEth(3000n)
    expect(exceedsDeviation(feed, perEth(3150n), 500)).toBe(false)
    expect(exceedsDeviation(feed, perEth(2850n), 500)).toBe(false)
    expect(exceedsDeviation(feed, { num: 3150n * E18 + 1n, den: E18 }, 500)).toBe(true)
    expect(exceedsDeviation(feed, perEth(2849n), 500)).toBe(true)
    // Decimals on one side only: 3000 USDC (6) per ETH is the same price.
    expect(exceedsDeviation(perEth(3000n, 6), { num: 3000n * 10n ** 6n * 10n, den: E18 * 10n }, 0)).toBe(
      false
    )
    expect(deviationBps(feed, perEth(2000n))).toBe(3333n)
  })
})

describe("STATIC_PRICES", () => {
  it("reads whole units per native coin, with decimals from the deployment or after a colon", () => {
    const deployment = Option.some({
      assets: { [USDT.toLowerCase()]: { symbol: "USDT", decimals: 18 } }
    } as never)
    const parsed = parseStaticPrices(` ${USDT}=3000 , ${USDC}=2500.5:6,`, deployment)
    expect(Either.isRight(parsed)).toBe(true)
    if (Either.isLeft(parsed)) return
    expect(parsed.right.get(USDT)).toEqual({ num: 3000n * E18, den: E18 })
    expect(parsed.right.get(USDC)).toEqual({ num: 25_005n * 10n ** 6n, den: 10n * E18 })
  })

  it.each([
    ["no decimals for an asset outside the deployment", `${USDC}=1`, /decimals/],
    ["a zero price", `${USDC}=0:6`, /above zero/],
    ["a duplicate", `${USDC}=1:6,${USDC}=2:6`, /twice/],
    ["a price that is no number", `${USDC}=abc`, /asset=price/],
    ["a negative price", `${USDC}=-1:6`, /asset=price/]
  ])("refuses %s", (_, text, message) => {
    const parsed = parseStaticPrices(text, Option.none())
    expect(Either.isLeft(parsed) && parsed.left).toMatch(message)
  })

  it("refuses a mixed-case address with a wrong checksum", () => {
    const wrong = "0x52908400098527886E0F7030069857D2E4169EE7".replace("E7", "e7")
    const parsed = parseStaticPrices(`${wrong}=1:6`, Option.none())
    expect(Either.isLeft(parsed) && parsed.left).toMatch(/checksum/)
  })
})

describe("fee settings", () => {
  const load = (env: Record<string, string>) =>
    Effect.runSync(
      Effect.either(
        Effect.withConfigProvider(
          loadRelayerSettings,
          ConfigProvider.fromMap(
            new Map(
              Object.entries({
                RPC_URL: "http://127.0.0.1:1",
                FEE_VAULT: VAULT,
                SETTLEMENT_ASSET: USDT,
                SHIELD_ADAPTER: SHIELD,
                RELAYER_PRIVATE_KEY: `0x${"11".repeat(32)}`,
                ...env
              })
            )
          )
        )
      )
    )

  it("defaults: every source, three hours for feeds, a 5% DEX bound, 5 s refresh, 60 s gas price age, the table as is", () => {
    const settings = load({})
    expect(Either.isRight(settings)).toBe(true)
    if (Either.isLeft(settings)) return
    expect([...settings.right.priceSources]).toEqual(["static", "feed", "dex"])
    expect(settings.right).toMatchObject({
      priceFeedMaxAgeSeconds: 10_800,
      priceMaxDeviationBps: 500,
      gasPriceRefreshMs: 5_000,
      gasPriceMaxAgeSeconds: 60,
      gasBudgetBps: 10_000,
      swapRouter: Option.none(),
      wrappedNative: Option.none()
    })
    expect(settings.right.staticPrices.size).toBe(0)
  })

  it.each([
    ["STATIC_PRICES", "0x1234=1"],
    ["STATIC_PRICES", `${USDC}=2`],
    ["PRICE_SOURCES", "feed,chainlink"],
    ["PRICE_SOURCES", " , "],
    ["GAS_BUDGET_BPS", "0"],
    ["WRAPPED_NATIVE", "weth"],
    ["SWAP_ROUTER", "0x12"],
    ["GAS_PRICE_REFRESH_MS", "0"],
    ["PRICE_MAX_DEVIATION_BPS", "-1"],
    ["PRICE_FEED_MAX_AGE_SECONDS", "0"]
  ])("refuses %s=%j at start-up, naming the setting", (name, value) => {
    const settings = load({ [name]: value })
    expect(Either.isLeft(settings) && formatConfigError(settings.left)).toMatch(new RegExp(`^${name}: `))
  })
})

// ---------------------------------------------------------------------------------------------
// The oracle with stub sources and a stub gas price

interface Harness {
  readonly gasReads: { count: number }
  readonly sourceCalls: Record<string, number>
  setGasPrice(price: bigint | "down"): void
}

const harness = (
  sources: ReadonlyArray<{
    readonly name: PriceSource["name"]
    readonly answer: (asset: Address) => PriceAnswer
  }>,
  overrides: Partial<FeeOracleOptions> = {}
) => {
  const state: Harness = {
    gasReads: { count: 0 },
    sourceCalls: {},
    setGasPrice(price) {
      current = price
    }
  }
  let current: bigint | "down" = 2n * GWEI
  const gasPrice = Effect.suspend(() => {
    state.gasReads.count += 1
    return current === "down"
      ? Effect.fail(
          new ChainUnavailable({ operation: "eth_gasPrice", reason: "down", attempts: 3, cause: null })
        )
      : Effect.succeed(current)
  })
  const priceSources: PriceSource[] = sources.map((s) => ({
    name: s.name,
    price: (asset) =>
      Effect.suspend(() => {
        state.sourceCalls[s.name] = (state.sourceCalls[s.name] ?? 0) + 1
        const answer = s.answer(asset)
        return answer === "fail"
          ? Effect.fail(new PriceSourceFailed({ source: s.name, reason: "stubbed failure" }))
          : Effect.succeed(answer === "none" ? Option.none() : Option.some(answer))
      })
  }))
  const oracle = makeFeeOracleWith({
    rules,
    sources: priceSources,
    gasPrice,
    feeMarginBps: 13_000,
    quoteTtlSeconds: 60,
    gasPriceRefreshMs: 5_000,
    gasPriceMaxAgeSeconds: 60,
    gasBudgetBps: 10_000,
    maxDeviationBps: 500,
    gasLimitMultiplierBps: 12_000,
    ...overrides
  })
  return { state, oracle }
}

type PriceAnswer = NativePrice | "none" | "fail"

const perEth = (units: bigint, decimals = 18): NativePrice => ({
  num: units * 10n ** BigInt(decimals),
  den: E18
})

describe("fee oracle", () => {
  it.scoped("prices with the first source that answers and stamps validUntil = now + TTL", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(1_700_000_000_500)
      const { oracle } = harness([
        { name: "static", answer: () => "none" },
        { name: "feed", answer: () => perEth(3000n) }
      ])
      const o = yield* oracle
      const quote = yield* o.quote(request())
      expect(quote).toEqual({
        relayerFee: relayerFeeOf(gasTable.claimDirect, 2n * GWEI, 13_000, perEth(3000n)),
        gasEstimate: gasTable.claimDirect,
        gasPrice: 2n * GWEI,
        price: perEth(3000n),
        validUntil: 1_700_000_060
      })
      expect(o.gasBudget(request({ action: "shield-templates", templates: 2 }))).toBe(
        gasTable.shieldTemplatesWithFeeBase + 2n * gasTable.shieldTemplatesPerTemplate
      )
    })
  )

  it.scoped("falls through a failing source, counting the failure under its name", () =>
    Effect.gen(function* () {
      const { oracle, state } = harness([
        { name: "static", answer: () => "none" },
        { name: "feed", answer: () => "fail" },
        { name: "dex", answer: () => perEth(2000n) }
      ])
      const o = yield* oracle
      const [feedBefore, staticBefore] = [yield* sourceFailures("feed"), yield* sourceFailures("static")]
      const quote = yield* o.quote(request({ action: "ping" }))
      expect(quote.relayerFee).toBe(relayerFeeOf(gasTable.pingWithFee, 2n * GWEI, 13_000, perEth(2000n)))
      expect(yield* sourceFailures("feed")).toBe(feedBefore + 1)
      // A source with nothing for the asset is skipped, not counted as failing.
      expect(yield* sourceFailures("static")).toBe(staticBefore)
      expect(state.sourceCalls).toEqual({ static: 1, feed: 1, dex: 1 })
    })
  )

  it.scoped("answers 503 unavailable when no source can price the asset", () =>
    Effect.gen(function* () {
      const { oracle } = harness([
        { name: "feed", answer: () => "fail" },
        { name: "dex", answer: () => "none" }
      ])
      const error = yield* failureOf((yield* oracle).quote(request()))
      expect(error).toBeInstanceOf(Unavailable)
    })
  )

  it.scoped("does not price a refused request", () =>
    Effect.gen(function* () {
      const { oracle, state } = harness([{ name: "feed", answer: () => perEth(3000n) }])
      const o = yield* oracle
      expect(yield* failureOf(o.quote(request({ adapter: OTHER })))).toBeInstanceOf(AdapterNotAllowed)
      expect(yield* failureOf(o.quote(request({ asset: OTHER })))).toBeInstanceOf(BadRequest)
      expect(state.sourceCalls).toEqual({})
    })
  )

  it.scoped("serves one cached quote per question until validUntil, then prices again", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(1_700_000_000_000)
      let usdPerEth = 3000n
      const { oracle, state } = harness([{ name: "feed", answer: () => perEth(usdPerEth) }])
      const o = yield* oracle
      const first = yield* o.quote(request())
      usdPerEth = 4000n
      yield* TestClock.adjust("59 seconds")
      expect(yield* o.quote(request())).toEqual(first)
      // Another question for the same asset shares the price, not the quote.
      const register = yield* o.quote(request({ register: true }))
      expect(register.gasEstimate).toBeGreaterThan(first.gasEstimate)
      expect(state.sourceCalls.feed).toBe(1)
      // Past validUntil (and the price's own lifetime of one TTL) both are fetched again.
      yield* TestClock.adjust("2 seconds")
      const next = yield* o.quote(request())
      expect(next.validUntil).toBe(first.validUntil + 61)
      expect(state.sourceCalls.feed).toBe(2)
      expect(next.relayerFee).toBe(relayerFeeOf(gasTable.claimDirect, 2n * GWEI, 13_000, perEth(4000n)))
    })
  )

  it.scoped("says whether a quote is still the answer to its question (what a replayed answer checks)", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(1_700_000_000_000)
      const { oracle } = harness([{ name: "feed", answer: () => perEth(3000n) }])
      const o = yield* oracle
      const first = yield* o.quote(request())
      expect(o.isCurrent(first)).toBe(true)
      // The same figures in another object were never this oracle's answer.
      expect(o.isCurrent({ ...first })).toBe(false)
      const ping = yield* o.quote(request({ action: "ping" }))
      expect([o.isCurrent(first), o.isCurrent(ping)]).toEqual([true, true])
      yield* TestClock.adjust("59 seconds")
      expect(o.isCurrent(first)).toBe(true)
      // Past validUntil it is no answer any more, before anyone asks again and after.
      yield* TestClock.adjust("2 seconds")
      expect(o.isCurrent(first)).toBe(false)
      const next = yield* o.quote(request())
      expect(next).not.toBe(first)
      expect([o.isCurrent(first), o.isCurrent(next)]).toEqual([false, true])
    })
  )

  it.scoped("reads the gas price in the background, not per request", () =>
    Effect.gen(function* () {
      const { oracle, state } = harness([{ name: "static", answer: () => perEth(3000n) }])
      const o = yield* oracle
      for (const action of ["claim", "ping", "rotate-owner", "consolidate"] as const)
        yield* o.quote(request({ action }))
      expect(state.gasReads.count).toBe(1)
      // A rise the cached quotes' fees still cover (below 1.3 / 1.2).
      state.setGasPrice(21n * (GWEI / 10n))
      yield* TestClock.adjust("5 seconds")
      expect(state.gasReads.count).toBe(2)
      // Cached quotes keep their price; a new question sees the new one.
      expect((yield* o.quote(request())).gasPrice).toBe(2n * GWEI)
      expect((yield* o.quote(request({ register: true }))).gasPrice).toBe(21n * (GWEI / 10n))
    })
  )

  it.scoped(
    "gives its latest gas price reading: a cached quote's may be older; stale is 503 as a quote is",
    () =>
      Effect.gen(function* () {
        const { oracle, state } = harness([{ name: "static", answer: () => perEth(3000n) }])
        const o = yield* oracle
        expect(yield* o.gasPrice).toBe(2n * GWEI)
        const quote = yield* o.quote(request())
        // A rise the cached quote's fee still covers (below 1.3 / 1.2).
        state.setGasPrice(21n * (GWEI / 10n))
        yield* TestClock.adjust("5 seconds")
        // The price the next quote is priced at, while the cached one keeps its own.
        expect(yield* o.gasPrice).toBe(21n * (GWEI / 10n))
        expect(yield* o.quote(request())).toEqual(quote)
        expect((yield* o.quote(request({ action: "ping" }))).gasPrice).toBe(21n * (GWEI / 10n))
        state.setGasPrice("down")
        yield* TestClock.adjust("65 seconds")
        const error = yield* failureOf(o.gasPrice)
        expect(error).toBeInstanceOf(Unavailable)
        expect(error.message).toMatch(/stale/)
      })
  )

  it.scoped("stops quoting with 503 once the gas price has failed to refresh for too long", () =>
    Effect.gen(function* () {
      const { oracle, state } = harness([{ name: "static", answer: () => perEth(3000n) }])
      const o = yield* oracle
      yield* o.quote(request())
      const failuresBefore = yield* counterValue(gasPriceRefreshFailures)
      state.setGasPrice("down")
      yield* TestClock.adjust("60 seconds")
      // Still within the maximum age: the last good price serves.
      expect((yield* o.quote(request({ action: "ping" }))).gasPrice).toBe(2n * GWEI)
      expect(yield* counterValue(gasPriceRefreshFailures)).toBeGreaterThan(failuresBefore)
      yield* TestClock.adjust("5 seconds")
      const error = yield* failureOf(o.quote(request({ action: "rotate-owner" })))
      expect(error).toBeInstanceOf(Unavailable)
      expect(error.message).toMatch(/stale/)
      // Recovery: the next good read makes quotes possible again.
      state.setGasPrice(3n * GWEI)
      yield* TestClock.adjust("5 seconds")
      expect((yield* o.quote(request({ action: "rotate-owner" }))).gasPrice).toBe(3n * GWEI)
    })
  )

  it.scoped("answers 503 at once when the gas price could never be read", () =>
    Effect.gen(function* () {
      const { oracle, state } = harness([{ name: "static", answer: () => perEth(3000n) }])
      state.setGasPrice("down")
      const error = yield* failureOf((yield* oracle).quote(request()))
      expect(error).toBeInstanceOf(Unavailable)
      expect(error.message).toMatch(/not answering/)
    })
  )
})

// ---------------------------------------------------------------------------------------------
// The real sources over a mocked chain, wired from settings as the relayer wires them

/** The deployment file; `feedAges` gives the feeds age limits of their own. */
const writeDeploymentFile = (feedAges?: { readonly native: number; readonly usdt: number }) => {
  const dir = mkdtempSync(join(tmpdir(), "fee-oracle-"))
  const file = join(dir, "deployment.json")
  writeFileSync(
    file,
    JSON.stringify({
      chainId: 31337,
      vault: VAULT,
      settlementAsset: USDT,
      shieldAdapter: SHIELD,
      swapRouter: ROUTER,
      startBlock: 1,
      quotedFullBalance: true,
      assets: {
        [USDT]: {
          symbol: "USDT",
          decimals: 18,
          priceFeed: USDT_FEED,
          ...(feedAges === undefined ? {} : { priceFeedMaxAgeSeconds: feedAges.usdt })
        },
        [WETH]: { symbol: "WETH", decimals: 18 },
        [USDC.toLowerCase()]: { symbol: "USDC", decimals: 6, priceFeed: USDC_FEED }
      },
      nativePriceFeed: NATIVE_FEED,
      ...(feedAges === undefined ? {} : { nativePriceFeedMaxAgeSeconds: feedAges.native })
    })
  )
  return file
}

const deploymentFile = writeDeploymentFile()

const NOW_S = 1_700_000_000n

interface ChainState {
  feeds: Record<Address, { answer: bigint; decimals: number; updatedAt: bigint }>
  /** Router rates into USDT: base units out per whole unit in. */
  rates: Record<Address, bigint>
  reads: string[]
}

const chainState = (): ChainState => ({
  feeds: {
    [NATIVE_FEED]: { answer: 3000n * 10n ** 8n, decimals: 8, updatedAt: NOW_S - 10n },
    [USDT_FEED]: { answer: 10n ** 8n, decimals: 8, updatedAt: NOW_S - 10n },
    [USDC_FEED]: { answer: 10n ** 8n, decimals: 8, updatedAt: NOW_S - 10n }
  },
  rates: { [WETH]: 2500n * E18, [USDC]: E18 },
  reads: []
})

const mockChain = (state: ChainState): ChainClientShape["readContract"] =>
  ((req: { address: Address; functionName: string; args?: readonly unknown[] }) => {
    state.reads.push(`${req.functionName}@${req.address}`)
    if (req.functionName === "latestRoundData" || req.functionName === "decimals") {
      const feed = state.feeds[req.address]
      if (feed === undefined) return Effect.dieMessage(`no feed at ${req.address}`)
      return Effect.succeed(
        req.functionName === "decimals"
          ? feed.decimals
          : [1n, feed.answer, feed.updatedAt, feed.updatedAt, 1n]
      )
    }
    if (req.functionName === "getAmountsOut" && req.address === ROUTER) {
      const [amountIn, path] = req.args as [bigint, readonly Address[]]
      const rate = state.rates[path[0]!]
      if (rate === undefined || path[1] !== USDT)
        return Effect.fail(
          new ChainUnavailable({
            operation: "eth_call(getAmountsOut)",
            reason: "no pool",
            attempts: 1,
            cause: null
          })
        )
      const unit = path[0] === USDC ? 10n ** 6n : E18
      return Effect.succeed([amountIn, (amountIn * rate) / unit])
    }
    return Effect.dieMessage(`unexpected read ${req.functionName}`)
  }) as unknown as ChainClientShape["readContract"]

const withOracle = (env: Record<string, string>, state: ChainState) => {
  const settings = Layer.effect(RelayerSettings, loadRelayerSettings).pipe(
    Layer.provide(
      Layer.setConfigProvider(
        ConfigProvider.fromMap(
          new Map(
            Object.entries({
              RPC_URL: "http://127.0.0.1:1",
              DEPLOYMENT_FILE: deploymentFile,
              RELAYER_PRIVATE_KEY: `0x${"11".repeat(32)}`,
              ...env
            })
          )
        )
      )
    )
  )
  const chain = mockChainClient({ gasPrice: Effect.succeed(GWEI), readContract: mockChain(state) })
  const oracle = FeeOracle.layer.pipe(Layer.provide(Layer.merge(settings, chain)))
  // The clock is set before the oracle starts: moving it later would replay every refresh tick.
  return <A, E>(program: Effect.Effect<A, E, FeeOracle>) =>
    Effect.zipRight(TestClock.setTime(Number(NOW_S) * 1000), Effect.provide(program, oracle))
}

const quoteAt = (req: QuoteRequest) => Effect.flatMap(FeeOracle, (o) => o.quote(req))

describe("price sources over the chain", () => {
  it.effect("feeds: native/USD over asset/USD, scaled by each feed's and the asset's decimals", () => {
    const state = chainState()
    return Effect.gen(function* () {
      const usdt = yield* quoteAt(request())
      expect(usdt.relayerFee).toBe(relayerFeeOf(gasTable.claimDirect, GWEI, 13_000, perEth(3000n)))
      // USDC's feed has 8 decimals like the others, its token 6.
      state.feeds[USDC_FEED] = { answer: 2n * 10n ** 7n, decimals: 7, updatedAt: NOW_S }
      const usdc = yield* quoteAt(request({ asset: USDC, action: "ping" }))
      expect(usdc.relayerFee).toBe(relayerFeeOf(gasTable.pingWithFee, GWEI, 13_000, perEth(1500n, 6)))
    }).pipe(withOracle({}, state))
  })

  it.effect("a stale feed falls through to the DEX quote", () => {
    const state = chainState()
    state.feeds[NATIVE_FEED]!.updatedAt = NOW_S - 3_601n
    state.rates[WETH] = 2900n * E18
    return Effect.gen(function* () {
      const before = yield* sourceFailures("feed")
      const quote = yield* quoteAt(request())
      // WETH -> USDT at 2900: the DEX's price, not the feeds' 3000 (and within 5% of it).
      expect(quote.relayerFee).toBe(relayerFeeOf(gasTable.claimDirect, GWEI, 13_000, perEth(2900n)))
      expect(yield* sourceFailures("feed")).toBe(before + 1)
    }).pipe(withOracle({ PRICE_FEED_MAX_AGE_SECONDS: "3600", WRAPPED_NATIVE: WETH }, state))
  })

  it.effect(
    "feeds are stale after three hours by default, or after the limit the deployment file gives each",
    () => {
      const state = chainState()
      // Five hours old: a stablecoin feed with a daily heartbeat, and a native feed given 6 hours.
      state.feeds[NATIVE_FEED]!.updatedAt = NOW_S - 18_000n
      state.feeds[USDT_FEED]!.updatedAt = NOW_S - 18_000n
      const byDefault = Effect.gen(function* () {
        const before = yield* sourceFailures("feed")
        yield* Effect.exit(quoteAt(request()))
        expect(yield* sourceFailures("feed")).toBe(before + 1)
      }).pipe(withOracle({}, state))
      const ownLimits = Effect.gen(function* () {
        const quote = yield* quoteAt(request())
        expect(quote.relayerFee).toBe(relayerFeeOf(gasTable.claimDirect, GWEI, 13_000, perEth(3000n)))
      }).pipe(withOracle({ DEPLOYMENT_FILE: writeDeploymentFile({ native: 21_600, usdt: 90_000 }) }, state))
      // One limit too short is enough to make the feed price stale.
      const oneShort = Effect.gen(function* () {
        const before = yield* sourceFailures("feed")
        yield* Effect.exit(quoteAt(request()))
        expect(yield* sourceFailures("feed")).toBe(before + 1)
      }).pipe(withOracle({ DEPLOYMENT_FILE: writeDeploymentFile({ native: 21_600, usdt: 3_600 }) }, state))
      return Effect.all([byDefault, ownLimits, oneShort], { discard: true })
    }
  )

  it.effect(
    "a DEX quote further than PRICE_MAX_DEVIATION_BPS from the stale feed is not used, and counted",
    () => {
      const state = chainState()
      state.feeds[NATIVE_FEED]!.updatedAt = NOW_S - 20_000n
      // A thin pool pushed down: 1 ETH buys 2000 USDT where the feeds said 3000.
      state.rates[WETH] = 2000n * E18
      return Effect.gen(function* () {
        const before = yield* deviations("dex")
        expect(yield* failureOf(quoteAt(request()))).toBeInstanceOf(Unavailable)
        expect(yield* deviations("dex")).toBe(before + 1)
      }).pipe(withOracle({ WRAPPED_NATIVE: WETH }, state))
    }
  )

  it.effect("PRICE_MAX_DEVIATION_BPS sets the bound: 10% takes a pool 6.7% off", () => {
    const state = chainState()
    state.feeds[NATIVE_FEED]!.updatedAt = NOW_S - 20_000n
    state.rates[WETH] = 2800n * E18
    return Effect.gen(function* () {
      const quote = yield* quoteAt(request())
      expect(quote.relayerFee).toBe(relayerFeeOf(gasTable.claimDirect, GWEI, 13_000, perEth(2800n)))
    }).pipe(withOracle({ WRAPPED_NATIVE: WETH, PRICE_MAX_DEVIATION_BPS: "1000" }, state))
  })

  it.effect("a feed answering zero or not at all counts as failed", () => {
    const state = chainState()
    state.feeds[USDT_FEED]!.answer = 0n
    return Effect.gen(function* () {
      expect(yield* failureOf(quoteAt(request()))).toBeInstanceOf(Unavailable)
    }).pipe(withOracle({}, state))
  })

  it.effect("DEX: prices an asset through the settlement asset, both legs quoted by the router", () => {
    const state = chainState()
    state.rates[USDC] = 2n * E18 // 1 USDC buys 2 USDT: the native coin is worth 1250 USDC
    return Effect.gen(function* () {
      const quote = yield* quoteAt(request({ asset: USDC }))
      expect(quote.relayerFee).toBe(relayerFeeOf(gasTable.claimDirect, GWEI, 13_000, perEth(1250n, 6)))
      const weth = yield* quoteAt(request({ asset: WETH }))
      expect(weth.relayerFee).toBe(relayerFeeOf(gasTable.claimDirect, GWEI, 13_000, { num: 1n, den: 1n }))
      // PRICE_SOURCES without "feed": the feeds are never read.
      expect(state.reads.some((r) => r.startsWith("latestRoundData"))).toBe(false)
    }).pipe(withOracle({ PRICE_SOURCES: "dex", WRAPPED_NATIVE: WETH }, state))
  })

  it.effect("a static price wins over feeds and DEX, which are then not read", () => {
    const state = chainState()
    return Effect.gen(function* () {
      const quote = yield* quoteAt(request())
      expect(quote.relayerFee).toBe(relayerFeeOf(gasTable.claimDirect, GWEI, 13_000, perEth(1000n)))
      expect(state.reads).toEqual([])
      // An asset only a static price knows is accepted.
      const other = yield* quoteAt(request({ asset: OTHER }))
      expect(other.relayerFee).toBe(relayerFeeOf(gasTable.claimDirect, GWEI, 13_000, perEth(5n, 0)))
    }).pipe(withOracle({ STATIC_PRICES: `${USDT}=1000,${OTHER}=5:0`, WRAPPED_NATIVE: WETH }, state))
  })

  it.effect("without WRAPPED_NATIVE the DEX source stays out, and a failed feed leaves nothing", () => {
    const state = chainState()
    state.feeds[USDT_FEED]!.updatedAt = 0n
    return Effect.gen(function* () {
      const exit = yield* Effect.exit(quoteAt(request()))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(state.reads.some((r) => r.startsWith("getAmountsOut"))).toBe(false)
    }).pipe(withOracle({}, state))
  })
})
