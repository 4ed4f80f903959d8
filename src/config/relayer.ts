/**
 * Every relayer setting (spec/relayer.md §8 and PROTOCOL.md §8), read once at start-up.
 */
import { Config, Context, Effect, Layer, Option, type Redacted } from "effect"
import type { Address } from "viem"
import type { Deployment } from "../../schema/deployment.js"
import {
  addressOr,
  bps,
  nonNegativeInt,
  optionalDeployment,
  optionalPositiveInt,
  optionalSecret,
  port,
  positiveInt,
  privateKey,
  url
} from "./settings.js"

export interface RelayerSettingsShape {
  readonly host: string
  readonly port: number
  readonly rpcUrl: URL
  /** Private RPC for broadcasts; reads always go to `rpcUrl`. */
  readonly sendRpcUrl: Option.Option<URL>
  readonly rpcTimeoutMs: number
  readonly databaseUrl: Option.Option<Redacted.Redacted>
  readonly dataDir: string
  readonly deployment: Option.Option<Deployment>
  readonly chainId: Option.Option<number>
  readonly vault: Address
  readonly settlementAsset: Address
  readonly shieldAdapter: Address
  readonly indexerStartBlock: number
  readonly indexerEnabled: boolean
  readonly quotedFullBalance: boolean
  readonly hotKey: Option.Option<Redacted.Redacted<`0x${string}`>>
  readonly metricsToken: Option.Option<Redacted.Redacted>
  readonly maxBodyBytes: number
  readonly rateLimitIpBurst: number
  readonly rateLimitIpPerMinute: number
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
  /** How many reverse proxies in front of the relayer append to `X-Forwarded-For`; 0 trusts none. */
  readonly trustProxyHops: number
}

export const loadRelayerSettings = Effect.gen(function* () {
  const deployment = yield* optionalDeployment
  const fromDeployment = <A>(f: (d: Deployment) => A) => Option.map(deployment, f)
  const vault = yield* addressOr(
    "FEE_VAULT",
    fromDeployment((d) => d.vault)
  )
  const settlementAsset = yield* addressOr(
    "SETTLEMENT_ASSET",
    fromDeployment((d) => d.settlementAsset)
  )
  const shieldAdapter = yield* addressOr(
    "SHIELD_ADAPTER",
    fromDeployment((d) => d.shieldAdapter)
  )
  const startBlockSetting = yield* Config.option(Config.integer("INDEXER_START_BLOCK"))
  const rest = yield* Config.all({
    host: Config.string("HOST").pipe(Config.withDefault("127.0.0.1")),
    port: port(8080),
    rpcUrl: url("RPC_URL"),
    sendRpcUrl: Config.option(url("SEND_RPC_URL")),
    rpcTimeoutMs: positiveInt("RPC_TIMEOUT_MS", 10_000),
    databaseUrl: Config.option(Config.redacted(Config.nonEmptyString("DATABASE_URL"))),
    dataDir: Config.string("DATA_DIR").pipe(Config.withDefault(".data/relayer")),
    chainId: optionalPositiveInt("CHAIN_ID"),
    indexerEnabled: Config.boolean("INDEXER_ENABLED").pipe(Config.withDefault(true)),
    hotKey: Config.option(privateKey("RELAYER_PRIVATE_KEY")),
    metricsToken: optionalSecret("METRICS_TOKEN"),
    maxBodyBytes: positiveInt("MAX_BODY_BYTES", 64 * 1024),
    rateLimitIpBurst: positiveInt("RATE_LIMIT_IP_BURST", 30),
    rateLimitIpPerMinute: positiveInt("RATE_LIMIT_IP_PER_MINUTE", 30),
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
    trustProxyHops: nonNegativeInt("TRUST_PROXY", 0, 16)
  })
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
    chainId,
    deployment,
    vault,
    settlementAsset,
    shieldAdapter,
    indexerStartBlock,
    quotedFullBalance
  } satisfies RelayerSettingsShape as RelayerSettingsShape
})

export class RelayerSettings extends Context.Tag("RelayerSettings")<RelayerSettings, RelayerSettingsShape>() {
  static readonly layer = Layer.effect(RelayerSettings, loadRelayerSettings)
}
