/**
 * The deployment file (docs/protocol.md §8): where a vault lives and what surrounds it. The devnet
 * writes a superset of it (rpcUrl, relayerUrl, …); readers ignore what they do not know.
 */
import { Schema } from "effect"
import { Address } from "./primitives.js"

/** A feed's own age limit in seconds (its heartbeat and some slack), over `PRICE_FEED_MAX_AGE_SECONDS`. */
const FeedMaxAgeSeconds = Schema.Int.pipe(Schema.positive())

export const DeploymentAsset = Schema.Struct({
  symbol: Schema.String,
  decimals: Schema.Int.pipe(Schema.between(0, 255)),
  priceFeed: Schema.optional(Address),
  priceFeedMaxAgeSeconds: Schema.optional(FeedMaxAgeSeconds)
})

export class Deployment extends Schema.Class<Deployment>("Deployment")({
  chainId: Schema.Int.pipe(Schema.positive()),
  vault: Address,
  settlementAsset: Address,
  shieldAdapter: Address,
  swapRouter: Address,
  startBlock: Schema.Int.pipe(Schema.nonNegative()),
  quotedFullBalance: Schema.Boolean,
  assets: Schema.Record({ key: Schema.String, value: DeploymentAsset }),
  nativePriceFeed: Schema.optional(Address),
  nativePriceFeedMaxAgeSeconds: Schema.optional(FeedMaxAgeSeconds)
}) {}

export const decodeDeploymentJson = Schema.decodeUnknown(Schema.parseJson(Deployment))
