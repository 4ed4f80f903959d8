/**
 * Every relayer setting (docs/relayer.md §8 and docs/protocol.md §8), read once at start-up.
 */
import { Config, ConfigError, Context, Effect, Either, Layer, Option } from "effect"
import { type Address, getAddress, isAddress } from "viem"
import type { Deployment } from "../../schema/deployment.js"
import type { Signer } from "../keys/Signer.js"
import {
  address,
  addressOr,
  allSettings,
  bps,
  type IndexerTuningSettings,
  indexerTuningSettings,
  nonNegativeInt,
  oneOf,
  optionalDeployment,
  positiveInt,
  type ServiceSettings,
  serviceSettings,
  type TxSenderSettings,
  txSenderSettings,
  url
} from "./settings.js"
import { signerSetting } from "./signer.js"

export interface RelayerSettingsShape extends ServiceSettings, IndexerTuningSettings, TxSenderSettings {
  /** Private RPC for broadcasts; reads always go to `rpcUrl`. */
  readonly sendRpcUrl: Option.Option<URL>
  readonly deployment: Option.Option<Deployment>
  readonly vault: Address
  readonly settlementAsset: Address
  readonly shieldAdapter: Address
  readonly indexerStartBlock: number
  readonly indexerEnabled: boolean
  readonly quotedFullBalance: boolean
  /** Signs every transaction the relayer sends (`RELAYER_SIGNER` and its backend's settings). */
  readonly hotKey: Signer
  readonly rateLimitIpBurst: number
  readonly rateLimitIpPerMinute: number
  /** `GET /v1/accounts` costs a token per this many bytes of the body it sends (docs/relayer.md §8). */
  readonly rateLimitIpBytesPerToken: number
  readonly rateLimitIdBurst: number
  readonly rateLimitIdPerMinute: number
  readonly gasCapBps: number
  readonly gasLimitMultiplierBps: number
  readonly minDeadlineSeconds: number
  readonly feeMarginBps: number
  readonly quoteToleranceBps: number
  readonly quoteTtlSeconds: number
  readonly requireActionFee: boolean
  readonly denyListFile: Option.Option<string>
  /** `STATIC_PRICES`: fixed prices, tried before any feed or DEX. */
  readonly staticPrices: ReadonlyMap<Address, NativePrice>
  /** `PRICE_SOURCES`: which price sources are used; always tried static, then feed, then DEX. */
  readonly priceSources: ReadonlySet<PriceSourceName>
  /**
   * A feed answer older than this is stale and skipped, unless the deployment file gives the feed
   * a limit of its own (`priceFeedMaxAgeSeconds`, `nativePriceFeedMaxAgeSeconds`).
   */
  readonly priceFeedMaxAgeSeconds: number
  /** A DEX price further than this from the feed's (stale) answer is not used. */
  readonly priceMaxDeviationBps: number
  /** Router the DEX source quotes through (`SWAP_ROUTER`, else the deployment file's `swapRouter`). */
  readonly swapRouter: Option.Option<Address>
  /** The wrapped native coin on the router; without it the DEX source cannot price gas. */
  readonly wrappedNative: Option.Option<Address>
  readonly gasPriceRefreshMs: number
  /** Quotes fail with 503 once the last successful gas price read is older than this. */
  readonly gasPriceMaxAgeSeconds: number
  /** Scales the whole gas budget table (10_000 = as documented). */
  readonly gasBudgetBps: number
  /** `OPEN_CLAIMS`: what becomes of a claim naming the zero address as its relayer. */
  readonly openClaims: OpenClaims
  /** First cooldown after a relayed transaction reverted on chain; 0 turns cooldowns off. */
  readonly revertCooldownSeconds: number
  /** The longest cooldown, however often reverts repeat. */
  readonly revertCooldownMaxSeconds: number
  /**
   * Unpaid bind transactions (propose-bind, cancel-bind) sent per account id and per owner in a
   * day; 0 turns the budget off (docs/relayer.md §8 "Unpaid bind budget").
   */
  readonly bindBudgetPerDay: number
  /**
   * Unpaid bind transactions sent for all accounts together in a day; 0 for no relayer-wide budget
   * (docs/relayer.md §8 "Unpaid bind budget").
   */
  readonly bindBudgetTotalPerDay: number
}

/**
 * `accept`: relayed as the spec says (through SEND_RPC_URL when set); `private-only`: the
 * operator asserts SEND_RPC_URL is set (start-up fails without it); `refuse`: 400 `bad_request`.
 * docs/relayer.md §8 "Open claims".
 */
export const openClaimsModes = ["accept", "private-only", "refuse"] as const
export type OpenClaims = (typeof openClaimsModes)[number]

export const loadRelayerSettings = Effect.gen(function* () {
  // The deployment file first: the addresses may come from it. Every other setting is read even
  // when it fails, so that one refusal names them all.
  const file = yield* Effect.either(optionalDeployment)
  const deployment = Either.getOrElse(file, () => Option.none<Deployment>())
  const fromDeployment = <A>(f: (d: Deployment) => A) => Option.map(deployment, f)
  const afterFile = <A>(read: Effect.Effect<A, ConfigError.ConfigError>) =>
    Either.isLeft(file) ? Effect.fail(file.left) : read
  const { vault, settlementAsset, shieldAdapter, startBlockSetting, fees, ...rest } = yield* allSettings({
    vault: afterFile(
      addressOr(
        "FEE_VAULT",
        fromDeployment((d) => d.vault)
      )
    ),
    settlementAsset: afterFile(
      addressOr(
        "SETTLEMENT_ASSET",
        fromDeployment((d) => d.settlementAsset)
      )
    ),
    shieldAdapter: afterFile(
      addressOr(
        "SHIELD_ADAPTER",
        fromDeployment((d) => d.shieldAdapter)
      )
    ),
    startBlockSetting: Config.option(Config.integer("INDEXER_START_BLOCK")),
    fees: loadFeeSettings(deployment),
    ...serviceSettings({ port: 8080, dataDir: ".data/relayer", maxBodyBytes: 64 * 1024 }),
    sendRpcUrl: Config.option(url("SEND_RPC_URL")),
    indexerEnabled: Config.boolean("INDEXER_ENABLED").pipe(Config.withDefault(true)),
    ...indexerTuningSettings,
    hotKey: signerSetting("RELAYER"),
    rateLimitIpBurst: positiveInt("RATE_LIMIT_IP_BURST", 30),
    rateLimitIpPerMinute: positiveInt("RATE_LIMIT_IP_PER_MINUTE", 30),
    rateLimitIpBytesPerToken: positiveInt("RATE_LIMIT_IP_BYTES_PER_TOKEN", 512 * 1024),
    rateLimitIdBurst: positiveInt("RATE_LIMIT_ID_BURST", 6),
    rateLimitIdPerMinute: positiveInt("RATE_LIMIT_ID_PER_MINUTE", 6),
    gasCapBps: bps("GAS_CAP_BPS", 20_000),
    gasLimitMultiplierBps: bps("GAS_LIMIT_MULTIPLIER_BPS", 12_000),
    minDeadlineSeconds: nonNegativeInt("MIN_DEADLINE_SECONDS", 120),
    feeMarginBps: bps("FEE_MARGIN_BPS", 13_000),
    quoteToleranceBps: bps("QUOTE_TOLERANCE_BPS", 0, 10_000),
    quoteTtlSeconds: positiveInt("QUOTE_TTL_SECONDS", 60),
    requireActionFee: Config.boolean("REQUIRE_ACTION_FEE").pipe(Config.withDefault(true)),
    denyListFile: Config.option(Config.nonEmptyString("DENY_LIST")),
    openClaims: oneOf("OPEN_CLAIMS", openClaimsModes).pipe(Config.withDefault<OpenClaims>("accept")),
    revertCooldownSeconds: nonNegativeInt("REVERT_COOLDOWN_SECONDS", 3_600, 31_536_000),
    revertCooldownMaxSeconds: positiveInt("REVERT_COOLDOWN_MAX_SECONDS", 86_400, 31_536_000),
    bindBudgetPerDay: nonNegativeInt("BIND_BUDGET_PER_DAY", 10, 1_000_000),
    bindBudgetTotalPerDay: nonNegativeInt("BIND_BUDGET_TOTAL_PER_DAY", 1_000, 100_000_000),
    ...txSenderSettings
  })
  if (rest.openClaims === "private-only" && Option.isNone(rest.sendRpcUrl))
    return yield* Effect.fail(
      ConfigError.InvalidData(
        ["OPEN_CLAIMS"],
        "private-only needs SEND_RPC_URL (a private send RPC); set it, or choose accept or refuse"
      )
    )
  if (rest.revertCooldownMaxSeconds < rest.revertCooldownSeconds)
    return yield* Effect.fail(
      ConfigError.InvalidData(["REVERT_COOLDOWN_MAX_SECONDS"], "must not be below REVERT_COOLDOWN_SECONDS")
    )
  // A proposal is sent only with room left for the cancel that may undo it (docs/relayer.md §8).
  if (rest.bindBudgetPerDay === 1)
    return yield* Effect.fail(
      ConfigError.InvalidData(
        ["BIND_BUDGET_PER_DAY"],
        "must be 0 (off) or at least 2: a propose-bind is sent only with room left for a cancel-bind"
      )
    )
  const indexerStartBlock = Option.getOrElse(
    Option.orElse(startBlockSetting, () => fromDeployment((d) => d.startBlock)),
    () => 0
  )
  const quotedFullBalance = Option.getOrElse(
    fromDeployment((d) => d.quotedFullBalance),
    () => true
  )
  const chainId = Option.orElse(rest.chainId, () => fromDeployment((d) => d.chainId))
  return {
    ...rest,
    ...fees,
    chainId,
    deployment,
    vault,
    settlementAsset,
    shieldAdapter,
    indexerStartBlock,
    quotedFullBalance
  } satisfies RelayerSettingsShape as RelayerSettingsShape
})

// ---------------------------------------------------------------------------------------------
// Fee quoting

/** A price as a ratio: `num / den` base units of an asset per wei of the native coin. */
export interface NativePrice {
  readonly num: bigint
  readonly den: bigint
}

export const priceSourceNames = ["static", "feed", "dex"] as const
export type PriceSourceName = (typeof priceSourceNames)[number]

const NATIVE_DECIMALS = 18n

/**
 * `STATIC_PRICES`: comma-separated `asset=price` entries, where `price` is how many whole units
 * of the asset one native coin (1 ETH on mainnet) is worth, as a positive decimal (`3000`,
 * `0.00033`). The asset's decimals come from the deployment file's `assets`; an asset missing
 * there gives them after a colon: `asset=price:decimals`.
 */
export const parseStaticPrices = (
  text: string,
  deployment: Option.Option<Deployment>
): Either.Either<ReadonlyMap<Address, NativePrice>, string> => {
  const known = new Map<string, number>()
  if (Option.isSome(deployment))
    for (const [asset, info] of Object.entries(deployment.value.assets))
      known.set(asset.toLowerCase(), info.decimals)
  const prices = new Map<Address, NativePrice>()
  for (const raw of text.split(",")) {
    const entry = raw.trim()
    if (entry === "") continue
    const match = /^(0x[0-9a-fA-F]{40})=(\d+(?:\.\d+)?)(?::(\d{1,2}))?$/.exec(entry)
    if (match === null) return Either.left(`"${entry}" is not asset=price or asset=price:decimals`)
    const [, assetText = "", priceText = "", decimalsText] = match
    if (!isAddress(assetText, { strict: true }))
      return Either.left(`${assetText}: mixed-case address with a wrong checksum`)
    const asset = getAddress(assetText)
    if (prices.has(asset)) return Either.left(`${asset} is listed twice`)
    const decimals = decimalsText === undefined ? known.get(asset.toLowerCase()) : Number(decimalsText)
    if (decimals === undefined)
      return Either.left(
        `${asset} is not in the deployment file; write its decimals as ${asset}=price:decimals`
      )
    const [whole = "", fraction = ""] = priceText.split(".")
    const scaled = BigInt(whole + fraction)
    if (scaled === 0n) return Either.left(`${asset}: the price must be above zero`)
    prices.set(asset, {
      num: scaled * 10n ** BigInt(decimals),
      den: 10n ** BigInt(fraction.length) * 10n ** NATIVE_DECIMALS
    })
  }
  return Either.right(prices)
}

const parsePriceSources = (text: string): Either.Either<ReadonlySet<PriceSourceName>, string> => {
  const names = text
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "")
  const chosen = new Set<PriceSourceName>()
  for (const name of names) {
    const known = priceSourceNames.find((n) => n === name)
    if (known === undefined) return Either.left(`unknown price source "${name}" (expected static, feed, dex)`)
    chosen.add(known)
  }
  return chosen.size === 0 ? Either.left("name at least one price source") : Either.right(chosen)
}

/** A setting parsed from text; the default is given as text too and goes through the same parser. */
const fromText = <A>(name: string, parse: (text: string) => Either.Either<A, string>, defaultText: string) =>
  Config.string(name).pipe(
    // Mapped before the default, so that a refusal carries the setting's name.
    Config.mapOrFail((text) =>
      Either.mapLeft(parse(text), (message) => ConfigError.InvalidData([], message))
    ),
    Config.withDefault(Either.getOrThrow(parse(defaultText)))
  )

/** The settings of the fee oracle; the deployment file supplies decimals, feeds and the router. */
export const loadFeeSettings = (deployment: Option.Option<Deployment>) =>
  Effect.map(
    allSettings({
      swapRouter: Effect.flatMap(Config.option(Config.nonEmptyString("SWAP_ROUTER")), (set) =>
        Option.isSome(set)
          ? Effect.map(address("SWAP_ROUTER"), Option.some)
          : Effect.succeed(Option.map(deployment, (d) => d.swapRouter))
      ),
      wrappedNative: Effect.flatMap(Config.option(Config.nonEmptyString("WRAPPED_NATIVE")), (set) =>
        Option.isSome(set)
          ? Effect.map(address("WRAPPED_NATIVE"), Option.some)
          : Effect.succeed(Option.none())
      ),
      rest: Config.all({
        staticPrices: fromText("STATIC_PRICES", (text) => parseStaticPrices(text, deployment), ""),
        priceSources: fromText("PRICE_SOURCES", parsePriceSources, priceSourceNames.join(",")),
        // Three hours: above the usual one-hour heartbeat; a feed with a longer one (a day, for
        // many stablecoins) takes its own limit from the deployment file.
        priceFeedMaxAgeSeconds: positiveInt("PRICE_FEED_MAX_AGE_SECONDS", 10_800),
        priceMaxDeviationBps: bps("PRICE_MAX_DEVIATION_BPS", 500),
        gasPriceRefreshMs: positiveInt("GAS_PRICE_REFRESH_MS", 5_000, 3_600_000),
        gasPriceMaxAgeSeconds: positiveInt("GAS_PRICE_MAX_AGE_SECONDS", 60),
        gasBudgetBps: Config.integer("GAS_BUDGET_BPS").pipe(
          Config.validate({
            message: "expected an integer from 1 to 1000000",
            validation: (n) => n >= 1 && n <= 1_000_000
          }),
          Config.withDefault(10_000)
        )
      })
    }),
    ({ swapRouter, wrappedNative, rest }) => ({ swapRouter, wrappedNative, ...rest })
  )

/**
 * Settings that start but leave the hot key paying for what no fee covers; logged as warnings at
 * start-up (docs/relayer.md §8 "Gas cap and fee margin", "Open claims").
 */
export const relayerSettingsWarnings = (settings: RelayerSettingsShape): ReadonlyArray<string> => [
  ...(settings.gasCapBps > settings.feeMarginBps
    ? [
        `GAS_CAP_BPS (${settings.gasCapBps}) is above FEE_MARGIN_BPS (${settings.feeMarginBps}): transactions whose gas the fee does not cover are refused with fee_too_low before the cap is reached`
      ]
    : []),
  ...(settings.gasLimitMultiplierBps > settings.feeMarginBps
    ? [
        `GAS_LIMIT_MULTIPLIER_BPS (${settings.gasLimitMultiplierBps}) is above FEE_MARGIN_BPS (${settings.feeMarginBps}): a fee of the quote never pays for its budget's gas limit, so every quote is priced again on each request and a claim estimated at its budget is refused with fee_too_low`
      ]
    : []),
  ...(settings.openClaims === "accept" && Option.isNone(settings.sendRpcUrl)
    ? [
        "open claims (claim.relayer = 0x0) go out through RPC_URL's public mempool without SEND_RPC_URL: anyone can copy one, take its fee, and make this relayer's transaction revert at its cost; set SEND_RPC_URL or OPEN_CLAIMS=refuse"
      ]
    : [])
]

export class RelayerSettings extends Context.Tag("RelayerSettings")<RelayerSettings, RelayerSettingsShape>() {
  static readonly layer = Layer.effect(RelayerSettings, loadRelayerSettings)
}
