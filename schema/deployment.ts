/**
 * The deployment file (PROTOCOL.md §8): where a vault lives and what surrounds it. The devnet
 * writes a superset of it (rpcUrl, relayerUrl, …); readers ignore what they do not know.
 */
import { Schema } from "effect"
import { getAddress, isAddress } from "viem"

/** Any-case address; a mixed-case one must carry its EIP-55 checksum. Decodes to checksummed. */
const DeploymentAddress = Schema.String.pipe(
  Schema.filter((s) => isAddress(s, { strict: true }) || "expected an address with a valid EIP-55 checksum"),
  Schema.transform(Schema.String, { strict: true, decode: (s) => getAddress(s), encode: (s) => s })
)

export const DeploymentAsset = Schema.Struct({
  symbol: Schema.String,
  decimals: Schema.Int.pipe(Schema.between(0, 255)),
  priceFeed: Schema.optional(DeploymentAddress)
})

export class Deployment extends Schema.Class<Deployment>("Deployment")({
  chainId: Schema.Int.pipe(Schema.positive()),
  vault: DeploymentAddress,
  settlementAsset: DeploymentAddress,
  shieldAdapter: DeploymentAddress,
  swapRouter: DeploymentAddress,
  startBlock: Schema.Int.pipe(Schema.nonNegative()),
  quotedFullBalance: Schema.Boolean,
  assets: Schema.Record({ key: Schema.String, value: DeploymentAsset }),
  nativePriceFeed: Schema.optional(DeploymentAddress)
}) {}

export const decodeDeploymentJson = Schema.decodeUnknown(Schema.parseJson(Deployment))
