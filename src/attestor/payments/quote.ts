/**
 * The paid lookup's quote (docs/attestor.md §2 PaymentRequired, docs/protocol.md §10 "Paid lookups"):
 * the settings' price and payee, the settlement asset's EIP-712 name and version, and the
 * facilitator's signer and spender as its `/supported` announces them for this chain's network.
 * Read the first time a paid lookup needs it and kept once read (`keptOnceRead`), so the attestor
 * starts while its facilitator is down and answers 503 until it is back.
 */
import type { FacilitatorClient } from "@x402/core/http"
import type { PaymentRequirements, SupportedResponse } from "@x402/core/types"
import { Effect, Option } from "effect"
import { type Address, erc20Abi, getAddress, isAddress } from "viem"
import { Unavailable } from "../../../schema/errors.js"
import { keptOnceRead } from "../../background/once.js"
import type { ChainClientShape } from "../../chain/ChainClient.js"
import { chainUnavailable } from "../../chain/errors.js"
import type { PaidLookupSettings } from "../../config/attestor.js"
import { lookupRequirements } from "./x402.js"

/** The facilitator's terms for `permit2-exact` payments on a network. */
export interface FacilitatorTerms {
  readonly signerAddress: Address
  readonly spenderAddress: Address
}

const addressField = (extra: Record<string, unknown> | undefined, key: string): Address | undefined => {
  const value = extra?.[key]
  return typeof value === "string" && isAddress(value) ? getAddress(value) : undefined
}

/**
 * The signer and spender of the facilitator's x402 version 2 `exact` kind on `network` with
 * `assetTransferMethod: "permit2-exact"`; none when it does not offer one.
 */
export const facilitatorTerms = (
  supported: SupportedResponse,
  network: string
): Option.Option<FacilitatorTerms> =>
  Option.firstSomeOf(
    (Array.isArray(supported?.kinds) ? supported.kinds : []).map((kind) => {
      if (kind.x402Version !== 2 || kind.scheme !== "exact" || kind.network !== network)
        return Option.none<FacilitatorTerms>()
      if (kind.extra?.assetTransferMethod !== "permit2-exact") return Option.none<FacilitatorTerms>()
      const signerAddress = addressField(kind.extra, "signerAddress")
      const spenderAddress = addressField(kind.extra, "spenderAddress")
      return signerAddress !== undefined && spenderAddress !== undefined
        ? Option.some({ signerAddress, spenderAddress })
        : Option.none<FacilitatorTerms>()
    })
  )

const eip5267Abi = [
  {
    type: "function",
    name: "eip712Domain",
    stateMutability: "view",
    inputs: [],
    outputs: [
      { name: "fields", type: "bytes1" },
      { name: "name", type: "string" },
      { name: "version", type: "string" },
      { name: "chainId", type: "uint256" },
      { name: "verifyingContract", type: "address" },
      { name: "salt", type: "bytes32" },
      { name: "extensions", type: "uint256[]" }
    ]
  }
] as const

/**
 * The token's EIP-712 name and version as the quote's `extra` names them: the settings' when set,
 * else its EIP-5267 `eip712Domain()`, else its ERC-20 `name()` and version "1" (a token without a
 * domain of its own; Permit2 signs under Permit2's domain either way).
 */
const assetDomain = (
  chain: ChainClientShape,
  asset: Address,
  settings: PaidLookupSettings
): Effect.Effect<{ readonly name: string; readonly version: string }, Unavailable> => {
  if (Option.isSome(settings.assetName) && Option.isSome(settings.assetVersion))
    return Effect.succeed({ name: settings.assetName.value, version: settings.assetVersion.value })
  const fromName = Effect.suspend(() =>
    Effect.map(chain.readContract({ address: asset, abi: erc20Abi, functionName: "name" }), (name) => ({
      name,
      version: "1"
    }))
  )
  return chain.readContract({ address: asset, abi: eip5267Abi, functionName: "eip712Domain" }).pipe(
    Effect.map(([, name, version]) => ({ name, version })),
    Effect.catchTag("ChainReverted", () => fromName),
    Effect.catchTag("ChainResultInvalid", () => fromName),
    Effect.map((domain) => ({
      name: Option.getOrElse(settings.assetName, () => domain.name),
      version: Option.getOrElse(settings.assetVersion, () => domain.version)
    })),
    Effect.mapError((error) =>
      error._tag === "ChainReverted" || error._tag === "ChainResultInvalid"
        ? new Unavailable({
            message: "the settlement asset does not answer name(): set HANDLE_LOOKUP_ASSET_NAME"
          })
        : chainUnavailable()
    )
  )
}

export const FACILITATOR_UNAVAILABLE = "the payment facilitator is not answering: try again later"

/** The quote, read once (see the module header). */
export const lookupQuote = (options: {
  readonly settings: PaidLookupSettings
  readonly asset: Address
  readonly chain: ChainClientShape
  readonly chainId: Effect.Effect<number, Unavailable>
  readonly facilitator: FacilitatorClient
}): Effect.Effect<Effect.Effect<PaymentRequirements, Unavailable>> =>
  keptOnceRead(
    Effect.gen(function* () {
      const { settings, asset, facilitator } = options
      const chainId = yield* options.chainId
      const network = `eip155:${chainId}`
      const supported = yield* Effect.tryPromise({
        try: () => facilitator.getSupported(),
        catch: () => new Unavailable({ message: FACILITATOR_UNAVAILABLE })
      })
      const terms = yield* Option.match(facilitatorTerms(supported, network), {
        onSome: Effect.succeed,
        onNone: () =>
          Effect.logWarning(
            "the payment facilitator offers no x402 v2 exact permit2-exact payments on this chain's network"
          ).pipe(
            Effect.zipRight(
              Effect.fail(new Unavailable({ message: "the payment facilitator cannot take this payment" }))
            )
          )
      })
      const domain = yield* assetDomain(options.chain, asset, settings)
      return lookupRequirements({
        chainId,
        asset,
        assetName: domain.name,
        assetVersion: domain.version,
        amount: settings.amount,
        payTo: settings.payTo,
        maxTimeoutSeconds: settings.maxTimeoutSeconds,
        ...terms
      })
    })
  )
