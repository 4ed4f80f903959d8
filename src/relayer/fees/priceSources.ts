/**
 * Where the fee oracle gets the price of the native coin in an asset. Each source answers with a
 * ratio (asset base units per wei), with `None` when it has nothing for that asset (not
 * configured), or fails when it should have answered and could not; the oracle then falls
 * through to the next source, in docs/relayer.md's order: static price, price feed, DEX quote.
 * A feed too old to price with still bounds the DEX quote that comes after it: one further than
 * `PRICE_MAX_DEVIATION_BPS` from the feed's last answer is not used (a thin pool pushed for the
 * moment the oracle reads it).
 */
import { Clock, Data, Effect, Option } from "effect"
import { type Address, getAddress, isAddress } from "viem"
import { mockAggregatorV3Abi, mockSwapRouterAbi } from "../../../contracts/abi.js"
import type { ChainClientShape } from "../../chain/ChainClient.js"
import { describeChainError } from "../../chain/errors.js"
import type { NativePrice, PriceSourceName, RelayerSettingsShape } from "../../config/relayer.js"

export type { NativePrice, PriceSourceName } from "../../config/relayer.js"

export class PriceSourceFailed extends Data.TaggedError("PriceSourceFailed")<{
  readonly source: PriceSourceName
  readonly reason: string
  readonly cause?: unknown
  /**
   * What the source would have answered, too old to be used on its own (a stale feed): still the
   * bound a later source's answer must keep to (`exceedsDeviation`).
   */
  readonly reference?: NativePrice
}> {
  override get message() {
    return `${this.source} price source failed: ${this.reason}`
  }
}

export interface PriceSource {
  readonly name: PriceSourceName
  readonly price: (asset: Address) => Effect.Effect<Option.Option<NativePrice>, PriceSourceFailed>
}

const NATIVE_UNIT = 10n ** 18n

/** What the sources know about an asset from the deployment file and the static prices. */
export interface AssetInfo {
  readonly decimals: number
  readonly priceFeed: Option.Option<Address>
  /** The feed's own age limit (`priceFeedMaxAgeSeconds` of the deployment file). */
  readonly priceFeedMaxAgeSeconds: Option.Option<number>
}

// ---------------------------------------------------------------------------------------------
// Cross-check

/**
 * Whether `price` is more than `maxBps` basis points away from `reference`:
 * |price - reference| / reference > maxBps / 10_000, exactly, on the ratios.
 */
export const exceedsDeviation = (reference: NativePrice, price: NativePrice, maxBps: number): boolean => {
  const a = price.num * reference.den
  const b = reference.num * price.den
  const difference = a > b ? a - b : b - a
  return difference * 10_000n > BigInt(maxBps) * b
}

/** |price - reference| / reference in basis points, rounded down: for logs. */
export const deviationBps = (reference: NativePrice, price: NativePrice): bigint => {
  const a = price.num * reference.den
  const b = reference.num * price.den
  return ((a > b ? a - b : b - a) * 10_000n) / b
}

// ---------------------------------------------------------------------------------------------
// Static prices

export const staticPriceSource = (prices: ReadonlyMap<Address, NativePrice>): PriceSource => ({
  name: "static",
  price: (asset) => Effect.succeed(Option.fromNullable(prices.get(asset)))
})

// ---------------------------------------------------------------------------------------------
// Chainlink-style feeds

export interface FeedSourceConfig {
  readonly assets: ReadonlyMap<Address, AssetInfo>
  /** Native coin / USD feed. */
  readonly nativeFeed: Option.Option<Address>
  /** The native feed's own age limit (`nativePriceFeedMaxAgeSeconds` of the deployment file). */
  readonly nativeFeedMaxAgeSeconds: Option.Option<number>
  /** `PRICE_FEED_MAX_AGE_SECONDS`: the limit of a feed without one of its own. */
  readonly maxAgeSeconds: number
}

interface FeedAnswer {
  readonly answer: bigint
  readonly decimals: number
  /** Older than the feed's age limit: the reason it is stale, for the failure. */
  readonly stale: Option.Option<string>
}

/**
 * Both feeds quote in the same currency (USD on the devnet and on Chainlink's main feeds), so
 * asset units per wei = (native / asset) x 10^assetDecimals / 10^18, each answer scaled by its
 * own feed's decimals.
 */
export const feedPriceSource = (chain: ChainClientShape, config: FeedSourceConfig): PriceSource => {
  const fail = (reason: string, cause?: unknown) => new PriceSourceFailed({ source: "feed", reason, cause })

  const read = (
    feed: Address,
    label: string,
    maxAgeSeconds: number
  ): Effect.Effect<FeedAnswer, PriceSourceFailed> =>
    Effect.all(
      [
        chain.readContract({ address: feed, abi: mockAggregatorV3Abi, functionName: "latestRoundData" }),
        chain.readContract({ address: feed, abi: mockAggregatorV3Abi, functionName: "decimals" })
      ],
      { concurrency: 2 }
    ).pipe(
      // A chain error by class only: its text can carry the RPC URL, and this reason is logged.
      Effect.mapError((error) => fail(`${label} feed unreadable: ${describeChainError(error)}`, error)),
      Effect.flatMap(([[, answer, , updatedAt], decimals]) =>
        Effect.flatMap(Clock.currentTimeMillis, (nowMs) => {
          if (answer <= 0n) return Effect.fail(fail(`${label} feed answered ${answer}`))
          if (updatedAt === 0n) return Effect.fail(fail(`${label} feed has no complete round`))
          const age = BigInt(Math.floor(nowMs / 1000)) - updatedAt
          const stale =
            age > BigInt(maxAgeSeconds)
              ? Option.some(`${label} feed is stale (updated ${age} s ago, limit ${maxAgeSeconds} s)`)
              : Option.none()
          return Effect.succeed({ answer, decimals, stale })
        })
      )
    )

  return {
    name: "feed",
    price: (asset) => {
      const info = config.assets.get(asset)
      const assetFeed = info === undefined ? Option.none() : info.priceFeed
      if (info === undefined || Option.isNone(assetFeed) || Option.isNone(config.nativeFeed))
        return Effect.succeed(Option.none())
      const ageLimit = (own: Option.Option<number>) => Option.getOrElse(own, () => config.maxAgeSeconds)
      return Effect.all(
        [
          read(config.nativeFeed.value, "native", ageLimit(config.nativeFeedMaxAgeSeconds)),
          read(assetFeed.value, "asset", ageLimit(info.priceFeedMaxAgeSeconds))
        ],
        { concurrency: 2 }
      ).pipe(
        Effect.flatMap(([native, quoted]) => {
          const price: NativePrice = {
            num: native.answer * 10n ** BigInt(quoted.decimals) * 10n ** BigInt(info.decimals),
            den: quoted.answer * 10n ** BigInt(native.decimals) * NATIVE_UNIT
          }
          // Too old to price with, yet the bound a DEX quote must keep to (docs/relayer.md).
          const stale = Option.orElse(native.stale, () => quoted.stale)
          return Option.isSome(stale)
            ? Effect.fail(new PriceSourceFailed({ source: "feed", reason: stale.value, reference: price }))
            : Effect.succeed(Option.some(price))
        })
      )
    }
  }
}

// ---------------------------------------------------------------------------------------------
// DEX quotes

export interface DexSourceConfig {
  readonly router: Option.Option<Address>
  readonly wrappedNative: Option.Option<Address>
  readonly settlementAsset: Address
  readonly assets: ReadonlyMap<Address, AssetInfo>
}

/**
 * Prices through the settlement asset with Uniswap-V2 `getAmountsOut`: one native coin (as the
 * wrapped token) into the settlement asset, and one whole unit of the asset into the settlement
 * asset. Those are the pools the vault's own consolidations swap through, so they exist wherever
 * consolidation works; a direct native/asset pool is not needed.
 */
export const dexPriceSource = (chain: ChainClientShape, config: DexSourceConfig): PriceSource => {
  const fail = (reason: string, cause?: unknown) => new PriceSourceFailed({ source: "dex", reason, cause })

  const amountOut = (router: Address, amountIn: bigint, path: readonly [Address, Address]) =>
    chain
      .readContract({
        address: router,
        abi: mockSwapRouterAbi,
        functionName: "getAmountsOut",
        args: [amountIn, path]
      })
      .pipe(
        Effect.mapError((error) => fail(`getAmountsOut failed: ${describeChainError(error)}`, error)),
        Effect.flatMap((amounts) => {
          const out = amounts[amounts.length - 1]
          return out === undefined || out === 0n
            ? Effect.fail(fail("the router quotes nothing for this pair"))
            : Effect.succeed(out)
        })
      )

  return {
    name: "dex",
    price: (asset) => {
      if (Option.isNone(config.router) || Option.isNone(config.wrappedNative))
        return Effect.succeed(Option.none())
      const router = config.router.value
      const wrapped = config.wrappedNative.value
      const settlement = config.settlementAsset
      if (asset === wrapped) return Effect.succeed(Option.some({ num: 1n, den: 1n }))
      const decimals = asset === settlement ? 0 : config.assets.get(asset)?.decimals
      if (decimals === undefined) return Effect.succeed(Option.none())
      const nativeInSettlement =
        wrapped === settlement
          ? Effect.succeed(NATIVE_UNIT)
          : amountOut(router, NATIVE_UNIT, [wrapped, settlement])
      if (asset === settlement)
        return Effect.map(nativeInSettlement, (out) => Option.some({ num: out, den: NATIVE_UNIT }))
      const unit = 10n ** BigInt(decimals)
      return Effect.all([nativeInSettlement, amountOut(router, unit, [asset, settlement])], {
        concurrency: 2
      }).pipe(
        Effect.map(([nativeOut, unitOut]) =>
          Option.some({ num: nativeOut * unit, den: NATIVE_UNIT * unitOut })
        )
      )
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Assembly from the settings

/** Assets the relayer takes fees in: the settlement asset, the deployment's assets, static prices. */
export const knownAssets = (settings: RelayerSettingsShape): ReadonlyMap<Address, AssetInfo> => {
  const assets = new Map<Address, AssetInfo>()
  if (Option.isSome(settings.deployment)) {
    for (const [key, info] of Object.entries(settings.deployment.value.assets)) {
      // The deployment schema keeps the keys as written; a key that is no address names nothing.
      if (!isAddress(key, { strict: false })) continue
      assets.set(getAddress(key), {
        decimals: info.decimals,
        priceFeed: Option.fromNullable(info.priceFeed),
        priceFeedMaxAgeSeconds: Option.fromNullable(info.priceFeedMaxAgeSeconds)
      })
    }
  }
  return assets
}

/** The enabled sources, in docs/relayer.md's order of preference. */
export const makePriceSources = (
  chain: ChainClientShape,
  settings: RelayerSettingsShape
): ReadonlyArray<PriceSource> => {
  const assets = knownAssets(settings)
  const all: ReadonlyArray<PriceSource> = [
    staticPriceSource(settings.staticPrices),
    feedPriceSource(chain, {
      assets,
      nativeFeed: Option.flatMap(settings.deployment, (d) => Option.fromNullable(d.nativePriceFeed)),
      nativeFeedMaxAgeSeconds: Option.flatMap(settings.deployment, (d) =>
        Option.fromNullable(d.nativePriceFeedMaxAgeSeconds)
      ),
      maxAgeSeconds: settings.priceFeedMaxAgeSeconds
    }),
    dexPriceSource(chain, {
      router: settings.swapRouter,
      wrappedNative: settings.wrappedNative,
      settlementAsset: settings.settlementAsset,
      assets
    })
  ]
  return all.filter((source) => settings.priceSources.has(source.name))
}
