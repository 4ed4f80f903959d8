/**
 * The fee oracle: what a claim or owner action costs, in the asset it pays with
 * (docs/relayer.md §2 QuoteResponse, §4 quote parameters).
 *
 *   relayerFee = ceil(gasBudget x gasPrice x FEE_MARGIN_BPS / 10_000, converted into the asset)
 *
 * - The gas budget comes from the table in `fees/gasBudget.ts`: it depends only on action,
 *   adapter, templates and flags, so the fee depends only on those and the asset.
 * - The gas price is read in the background every `GAS_PRICE_REFRESH_MS` by a fiber of this
 *   layer's scope, never per request; when the last good read is older than
 *   `GAS_PRICE_MAX_AGE_SECONDS`, quoting stops with 503 rather than price with an old figure.
 * - The conversion tries the price sources in order (static price, price feed, DEX quote); a
 *   failing source is counted and skipped, and with none left the quote is 503 `unavailable`.
 *   A feed skipped as stale still bounds the DEX quote after it: one further than
 *   `PRICE_MAX_DEVIATION_BPS` from the feed's last answer is counted, logged and not used.
 * - A quote is cached until its `validUntil`, so every client asking the same question in that
 *   window gets the same answer, and a claim checked against "the current quote" sees it too.
 */

import {
  Cache,
  Clock,
  Context,
  Data,
  Deferred,
  Duration,
  Effect,
  Exit,
  Layer,
  Option,
  Schedule
} from "effect"
import { type Address, isAddress, zeroAddress } from "viem"
import { AdapterNotAllowed, BadRequest, Unavailable } from "../../schema/errors.js"
import { MAX_TEMPLATES } from "../../schema/ids.js"
import type { QuoteAction } from "../../schema/relayer.js"
import { supervised } from "../background/supervised.js"
import { ChainClient } from "../chain/ChainClient.js"
import { type NativePrice, RelayerSettings } from "../config/relayer.js"
import { type ClaimAdapterKind, gasBudgetOf } from "./fees/gasBudget.js"
import {
  recordGasPrice,
  recordGasPriceRefreshFailure,
  recordPriceDeviation,
  recordPriceSourceFailure
} from "./fees/metrics.js"
import {
  deviationBps,
  exceedsDeviation,
  knownAssets,
  makePriceSources,
  type PriceSource
} from "./fees/priceSources.js"

export {
  type BindAction,
  type BindBudgetInput,
  bindGasBudgetOf,
  gasBudgetOf,
  gasTable
} from "./fees/gasBudget.js"

import { describeFailure, safeText } from "../logging.js"

export interface QuoteRequest {
  readonly asset: Address
  readonly adapter: Address
  readonly action: QuoteAction
  /** 1..32, shield-templates only. */
  readonly templates?: number
  readonly consolidate: boolean
  readonly register: boolean
}

export interface Quote {
  /** In base units of the asset. */
  readonly relayerFee: bigint
  /** The request's gas budget. */
  readonly gasEstimate: bigint
  /** Wei per gas. */
  readonly gasPrice: bigint
  /** The asset's price the fee was converted at: what a request's fee is worth in gas. */
  readonly price: NativePrice
  /** Unix seconds. */
  readonly validUntil: number
}

export interface FeeOracleShape {
  /** Validates the adapter rules (AdapterNotAllowed / BadRequest) and prices the request. */
  readonly quote: (
    request: QuoteRequest
  ) => Effect.Effect<Quote, AdapterNotAllowed | BadRequest | Unavailable>
  /** The gas budget alone (no pricing): what the gas cap multiplies. */
  readonly gasBudget: (request: QuoteRequest) => bigint
  /**
   * The latest gas price reading (wei per gas): the price the next quote would be priced at, and
   * what a transaction sent now pays per gas, where a cached quote's may be up to a quote's
   * lifetime old. 503 when it is unknown or older than `GAS_PRICE_MAX_AGE_SECONDS`, as a quote is.
   */
  readonly gasPrice: Effect.Effect<bigint, Unavailable>
  /**
   * Whether `quote` is still the answer to its question: what `quote` would return now. A quote
   * served again from bytes (src/http/cachedAnswers.ts) is checked with it on every request.
   */
  readonly isCurrent: (quote: Quote) => boolean
}

// ---------------------------------------------------------------------------------------------
// Pure parts

/** What a quote depends on, once validated; equal requests share one cached quote. */
class QuoteKey extends Data.Class<{
  readonly asset: Address
  readonly adapter: ClaimAdapterKind
  readonly action: QuoteAction
  /** 0 when the action takes none. */
  readonly templates: number
  readonly consolidate: boolean
  readonly register: boolean
}> {}

/** A question as text, to look its last answer up by. */
const questionText = (key: QuoteKey): string =>
  `${key.asset}|${key.adapter}|${key.action}|${key.templates}|${key.consolidate}|${key.register}`

export interface QuoteRules {
  readonly settlementAsset: Address
  readonly shieldAdapter: Address
  /** Assets fees may be paid in. */
  readonly assets: ReadonlySet<Address>
}

/**
 * The quote rules of docs/relayer.md §4 and docs/protocol.md §7: the zero adapter is direct; the
 * shield adapter takes the settlement asset and claims only; non-claim actions name the zero
 * adapter; `templates` goes with shield-templates alone; a consolidation step goes with a claim
 * of the settlement asset. An asset the relayer has no price for at all is a 400: asking again
 * cannot change the answer.
 */
export const validateQuoteRequest = (
  rules: QuoteRules,
  request: QuoteRequest
): Effect.Effect<QuoteKey, AdapterNotAllowed | BadRequest> => {
  // Callers inside the relayer may hold addresses in any case. Lowercase comparison spares a
  // keccak per address on every request; the known spellings are checksummed already.
  if (!isAddress(request.asset, { strict: false }) || !isAddress(request.adapter, { strict: false }))
    return Effect.fail(new BadRequest({ message: "asset and adapter must be addresses" }))
  const assetLower = request.asset.toLowerCase()
  const adapterLower = request.adapter.toLowerCase()
  const isSettlement = assetLower === rules.settlementAsset.toLowerCase()
  const adapterKind: Option.Option<ClaimAdapterKind> =
    adapterLower === zeroAddress
      ? Option.some("direct")
      : adapterLower === rules.shieldAdapter.toLowerCase()
        ? Option.some("shield")
        : Option.none()
  if (Option.isNone(adapterKind))
    return Effect.fail(
      new AdapterNotAllowed({ message: "adapter is neither the zero address nor the shield adapter" })
    )
  if (adapterKind.value === "shield") {
    if (request.action !== "claim")
      return Effect.fail(
        new AdapterNotAllowed({ message: `adapter must be the zero address for action=${request.action}` })
      )
    if (!isSettlement)
      return Effect.fail(
        new AdapterNotAllowed({ message: "the shield adapter takes the settlement asset only" })
      )
  }
  if (request.action === "shield-templates") {
    const n = request.templates
    if (n === undefined || !Number.isInteger(n) || n < 1 || n > MAX_TEMPLATES)
      return Effect.fail(
        new BadRequest({
          message: `templates: an integer 1..${MAX_TEMPLATES} is required for action=shield-templates`
        })
      )
  } else if (request.templates !== undefined) {
    return Effect.fail(new BadRequest({ message: "templates: only action=shield-templates takes templates" }))
  }
  if (request.consolidate) {
    if (request.action !== "claim")
      return Effect.fail(
        new BadRequest({ message: "consolidate: only action=claim carries a consolidation step" })
      )
    if (!isSettlement)
      return Effect.fail(
        new BadRequest({
          message: "consolidate: a claim with a consolidation step claims the settlement asset"
        })
      )
  }
  let asset: Address | undefined
  for (const known of rules.assets) if (known.toLowerCase() === assetLower) asset = known
  if (asset === undefined)
    return Effect.fail(new BadRequest({ message: "asset: this relayer does not take fees in this asset" }))
  return Effect.succeed(
    new QuoteKey({
      asset,
      adapter: adapterKind.value,
      action: request.action,
      templates: request.templates ?? 0,
      consolidate: request.consolidate,
      register: request.register
    })
  )
}

/** Gas cost with the margin, in the asset, rounded up; never 0 (a fee-only claim needs a fee). */
export const relayerFeeOf = (
  gas: bigint,
  gasPrice: bigint,
  marginBps: number,
  price: NativePrice
): bigint => {
  const numerator = gas * gasPrice * BigInt(marginBps) * price.num
  const denominator = 10_000n * price.den
  const fee = (numerator + denominator - 1n) / denominator
  return fee > 0n ? fee : 1n
}

const budgetInput = (request: QuoteRequest) => ({
  action: request.action,
  adapter: request.adapter.toLowerCase() === zeroAddress ? ("direct" as const) : ("shield" as const),
  templates: request.templates,
  consolidate: request.consolidate,
  register: request.register
})

// ---------------------------------------------------------------------------------------------
// Gas price, refreshed in the background

interface GasPriceReading {
  readonly wei: bigint
  readonly atMs: number
}

/**
 * Reads the gas price now and then every `refreshMs` for as long as the scope lives. A failed read
 * is counted and logged, and the loop goes on; the last good reading stays until it is too old.
 */
const startGasPriceRefresher = (
  gasPrice: Effect.Effect<bigint, { readonly message: string }>,
  refreshMs: number
) =>
  Effect.gen(function* () {
    // Written by this loop alone; read synchronously too (whether a cached quote still holds).
    let latest: GasPriceReading | undefined
    const firstAttempt = yield* Deferred.make<void>()
    const refreshOnce = gasPrice.pipe(
      Effect.flatMap((wei) =>
        Effect.flatMap(Clock.currentTimeMillis, (atMs) => {
          latest = { wei, atMs }
          return recordGasPrice(wei)
        })
      ),
      Effect.catchAllCause((cause) =>
        recordGasPriceRefreshFailure.pipe(
          Effect.zipRight(
            // The description, not the cause: viem's text carries the RPC URL (src/logging.ts).
            Effect.logWarning("gas price refresh failed").pipe(
              Effect.annotateLogs({ job: "gas-price", failure: describeFailure(cause) })
            )
          )
        )
      ),
      Effect.ensuring(Deferred.succeed(firstAttempt, undefined))
    )
    // A failed refresh is logged and tried again on schedule (above); should the loop ever end
    // in a defect of its own, it restarts instead of going stale.
    const loop = Effect.repeat(refreshOnce, Schedule.spaced(Duration.millis(refreshMs)))
    yield* supervised("gas price refresher", loop, { baseDelayMs: 1_000 }).pipe(Effect.forkScoped)
    return { latest: () => latest, firstAttempt }
  })

// ---------------------------------------------------------------------------------------------
// The service

const QUOTE_CACHE_CAPACITY = 4_096
const PRICE_CACHE_CAPACITY = 256

export interface FeeOracleOptions {
  readonly rules: QuoteRules
  readonly sources: ReadonlyArray<PriceSource>
  readonly gasPrice: Effect.Effect<bigint, { readonly message: string }>
  readonly feeMarginBps: number
  readonly quoteTtlSeconds: number
  readonly gasPriceRefreshMs: number
  readonly gasPriceMaxAgeSeconds: number
  readonly gasBudgetBps: number
  /** `PRICE_MAX_DEVIATION_BPS`. */
  readonly maxDeviationBps: number
  /**
   * `GAS_LIMIT_MULTIPLIER_BPS`: a quote is priced again before its time once the gas price has
   * risen past what its fee covers at the gas limit a transaction of its budget is sent with
   * (`outpriced`).
   */
  readonly gasLimitMultiplierBps: number
}

/** The oracle from explicit parts; its gas price refresher lives as long as the scope. */
export const makeFeeOracleWith = (options: FeeOracleOptions) =>
  Effect.gen(function* () {
    const refresher = yield* startGasPriceRefresher(options.gasPrice, options.gasPriceRefreshMs)
    const maxAgeMs = options.gasPriceMaxAgeSeconds * 1000

    const currentGasPrice = Effect.gen(function* () {
      // Right after start-up the first read may still be on its way: wait for it once.
      if (refresher.latest() === undefined) yield* Deferred.await(refresher.firstAttempt)
      const reading = refresher.latest()
      if (reading === undefined)
        return yield* new Unavailable({
          message: "the gas price is not known: the chain RPC is not answering"
        })
      const ageMs = (yield* Clock.currentTimeMillis) - reading.atMs
      if (ageMs > maxAgeMs)
        return yield* new Unavailable({
          message: `the gas price is stale: no good read for ${Math.round(ageMs / 1000)} s`
        })
      return reading.wei
    })

    const priceOf = (asset: Address): Effect.Effect<NativePrice, Unavailable> =>
      Effect.gen(function* () {
        // A stale feed's last answer: the bound of the sources after it (the DEX quote).
        let reference: NativePrice | undefined
        for (const source of options.sources) {
          const answer = yield* Effect.either(source.price(asset))
          if (answer._tag === "Left") {
            yield* recordPriceSourceFailure(source.name)
            yield* Effect.logWarning("price source failed, trying the next one").pipe(
              Effect.annotateLogs({ source: source.name, reason: safeText(answer.left.reason) })
            )
            reference = answer.left.reference ?? reference
            continue
          }
          if (Option.isNone(answer.right)) continue
          const price = answer.right.value
          if (reference !== undefined && exceedsDeviation(reference, price, options.maxDeviationBps)) {
            yield* recordPriceDeviation(source.name)
            // The asset is a token of the deployment, never an account.
            yield* Effect.logWarning("price too far from the price feed's, not used").pipe(
              Effect.annotateLogs({
                source: source.name,
                asset,
                deviationBps: deviationBps(reference, price).toString(),
                maxDeviationBps: options.maxDeviationBps
              })
            )
            continue
          }
          return price
        }
        return yield* new Unavailable({ message: "no price source can price this asset right now" })
      })

    const ttl = Duration.seconds(options.quoteTtlSeconds)
    const onlySuccesses = (exit: Exit.Exit<unknown, unknown>) => (Exit.isSuccess(exit) ? ttl : Duration.zero)

    const prices = yield* Cache.makeWith({
      capacity: PRICE_CACHE_CAPACITY,
      lookup: priceOf,
      timeToLive: onlySuccesses
    })

    const compute = (key: QuoteKey): Effect.Effect<Quote, Unavailable> =>
      Effect.gen(function* () {
        const gasEstimate = gasBudgetOf(key, options.gasBudgetBps)
        const gasPrice = yield* currentGasPrice
        const price = yield* prices.get(key.asset)
        const nowMs = yield* Clock.currentTimeMillis
        return {
          relayerFee: relayerFeeOf(gasEstimate, gasPrice, options.feeMarginBps, price),
          gasEstimate,
          gasPrice,
          price,
          validUntil: Math.floor(nowMs / 1000) + options.quoteTtlSeconds
        }
      })

    const quotes = yield* Cache.makeWith({
      capacity: QUOTE_CACHE_CAPACITY,
      lookup: compute,
      timeToLive: onlySuccesses
    })

    /**
     * The quote each question was last answered with, by the question: what the next ask gets
     * while it is valid, whatever the cache (bounded) has evicted since. The questions are few
     * (assets × actions × the rules' combinations), so this map stays small.
     */
    const answered = new Map<string, Quote>()
    const questionOf = new WeakMap<Quote, string>()
    const clock = yield* Effect.clock
    /**
     * Whether the gas price has risen so far since `quote` was priced that its fee no longer pays
     * for its budget's gas limit (budget x GAS_LIMIT_MULTIPLIER_BPS) at the latest reading: the
     * fee cover (src/relayer/Relay.ts) would refuse a fee of it, so it is priced again instead of
     * being served until `validUntil` (docs/relayer.md §8 "Gas cap and fee margin").
     */
    const limitBps = BigInt(options.gasLimitMultiplierBps)
    const marginBps = BigInt(options.feeMarginBps)
    const outpriced = (quote: Quote): boolean => {
      const wei = refresher.latest()?.wei
      return wei !== undefined && wei * limitBps > quote.gasPrice * marginBps
    }
    const isValid = (quote: Quote) =>
      clock.unsafeCurrentTimeMillis() < quote.validUntil * 1000 && !outpriced(quote)

    /**
     * The cached quote while it is valid; the cache's own clock may outlast `validUntil` by < 1 s,
     * and an outpriced quote is still in the cache.
     */
    const currentQuote = (key: QuoteKey) =>
      Effect.gen(function* () {
        const question = questionText(key)
        const last = answered.get(question)
        if (last !== undefined && isValid(last)) return last
        let cached = yield* quotes.get(key)
        if (!isValid(cached)) {
          yield* quotes.invalidate(key)
          cached = yield* quotes.get(key)
        }
        answered.set(question, cached)
        questionOf.set(cached, question)
        return cached
      })

    return {
      quote: (request) => Effect.flatMap(validateQuoteRequest(options.rules, request), currentQuote),
      gasBudget: (request) => gasBudgetOf(budgetInput(request), options.gasBudgetBps),
      gasPrice: currentGasPrice,
      isCurrent: (quote) => {
        const question = questionOf.get(quote)
        return question !== undefined && answered.get(question) === quote && isValid(quote)
      }
    } satisfies FeeOracleShape
  })

/** The oracle as the relayer runs it: sources, rules and timings from the settings. */
export const makeFeeOracle = Effect.gen(function* () {
  const chain = yield* ChainClient
  const settings = yield* RelayerSettings
  const assets = new Set<Address>([
    settings.settlementAsset,
    ...knownAssets(settings).keys(),
    ...settings.staticPrices.keys()
  ])
  return yield* makeFeeOracleWith({
    rules: { settlementAsset: settings.settlementAsset, shieldAdapter: settings.shieldAdapter, assets },
    sources: makePriceSources(chain, settings),
    gasPrice: chain.gasPrice,
    feeMarginBps: settings.feeMarginBps,
    quoteTtlSeconds: settings.quoteTtlSeconds,
    gasPriceRefreshMs: settings.gasPriceRefreshMs,
    gasPriceMaxAgeSeconds: settings.gasPriceMaxAgeSeconds,
    gasBudgetBps: settings.gasBudgetBps,
    maxDeviationBps: settings.priceMaxDeviationBps,
    gasLimitMultiplierBps: settings.gasLimitMultiplierBps
  })
})

export class FeeOracle extends Context.Tag("FeeOracle")<FeeOracle, FeeOracleShape>() {
  static readonly layer: Layer.Layer<FeeOracle, never, ChainClient | RelayerSettings> = Layer.scoped(
    FeeOracle,
    makeFeeOracle
  )
}
