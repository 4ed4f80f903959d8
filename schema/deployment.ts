/**
 * The deployment file (docs/protocol.md §8): where a vault lives and what surrounds it. The devnet
 * writes a superset of it (rpcUrl, relayerUrl, …); readers ignore what they do not know.
 */
import { Schema } from "effect"
import { Address } from "./primitives.js"

export const DeploymentAsset = Schema.Struct({
  symbol: Schema.String,
  decimals: Schema.Int.pipe(Schema.between(0, 255)),
  priceFeed: Schema.optional(Address)
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
  nativePriceFeed: Schema.optional(Address)
}) {}

export const decodeDeploymentJson = Schema.decodeUnknown(Schema.parseJson(Deployment))
