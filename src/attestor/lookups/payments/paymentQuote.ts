/**
 * The paid lookup's quote (docs/attestor.md §2 PaymentRequired, docs/protocol.md §10 "Paid lookups"):
 * the settings' price and payee, the settlement asset's EIP-712 name and version, and the terms of
 * the configured transfer method as the facilitator's `/supported` announces them for this chain's
 * network: for `permit2-exact` its signer and spender, for `permit2` only that it takes `exact`
 * payments there. Read the first time a paid lookup needs it and kept once read (`keptOnceRead`),
 * so the attestor starts while its facilitator is down and answers 503 until it is back; start-up
 * stops only when the facilitator answers and does not list the method (`facilitatorListsMethod`).
 */
import type { FacilitatorClient } from "@x402/core/http"
import type { PaymentRequirements, SupportedResponse } from "@x402/core/types"
import { ConfigError, Effect, Option } from "effect"
import { type Address, erc20Abi, getAddress, isAddress } from "viem"
import { Unavailable } from "../../../../schema/errors.js"
import { keptOnceRead } from "../../../background/once.js"
import type { ChainClientShape } from "../../../chain/ChainClient.js"
import { chainUnavailable } from "../../../chain/errors.js"
import type { PaidLookupSettings, TransferMethod } from "../../../config/attestor.js"
import { lookupRequirements } from "./x402.js"

export const FACILITATOR_UNAVAILABLE = "the payment facilitator is not answering: try again later"

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
    kindsOf(supported).map((kind) => {
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

const kindsOf = (supported: SupportedResponse) => (Array.isArray(supported?.kinds) ? supported.kinds : [])

/**
 * Whether the facilitator takes `@x402/evm`'s `exact` payments with the `permit2` method on
 * `network`: an x402 version 2 `exact` kind there that names no other transfer method. The
 * library's facilitator announces the kind without `extra` and takes both of its methods on it.
 */
export const offersPermit2 = (supported: SupportedResponse, network: string): boolean =>
  kindsOf(supported).some(
    (kind) =>
      kind.x402Version === 2 &&
      kind.scheme === "exact" &&
      kind.network === network &&
      (kind.extra?.assetTransferMethod === undefined || kind.extra.assetTransferMethod === "permit2")
  )

/** Whether the facilitator offers `method` on `network` (with its terms, for `permit2-exact`). */
export const offersMethod = (
  supported: SupportedResponse,
  network: string,
  method: TransferMethod
): boolean =>
  method === "permit2"
    ? offersPermit2(supported, network)
    : Option.isSome(facilitatorTerms(supported, network))

/** A word of the facilitator's own for a start-up line: printable, short. */
const word = (value: unknown): string =>
  typeof value === "string" || typeof value === "number"
    ? String(value)
        .replace(/[^\x21-\x7e]/g, "?")
        .slice(0, 40)
    : "?"

/** What the facilitator lists, for the line that stops start-up: `v2 exact eip155:56 permit2-exact`, … */
export const listedKinds = (supported: SupportedResponse): string => {
  const kinds = kindsOf(supported).map((kind) =>
    [
      `v${word(kind?.x402Version)}`,
      word(kind?.scheme),
      word(kind?.network),
      ...(kind?.extra?.assetTransferMethod === undefined ? [] : [word(kind.extra.assetTransferMethod)])
    ].join(" ")
  )
  if (kinds.length === 0) return "nothing"
  const shown = kinds.slice(0, 8).join(", ")
  return kinds.length > 8 ? `${shown} and ${kinds.length - 8} more` : shown
}

/**
 * The start-up check of docs/attestor.md §4: the facilitator's `/supported` must list the
 * configured method on this chain's network, else start-up stops with one line naming what it does
 * list (a `ConfigError` of `HANDLE_LOOKUP_TRANSFER_METHOD`). A facilitator or chain not answering
 * does not stop it: lookups answer 503 until they do.
 */
export const facilitatorListsMethod = (options: {
  readonly method: TransferMethod
  readonly chainId: Effect.Effect<number, Unavailable>
  readonly facilitator: FacilitatorClient
}): Effect.Effect<void, ConfigError.ConfigError> =>
  Effect.gen(function* () {
    const network = `eip155:${yield* options.chainId}`
    const supported = yield* Effect.tryPromise({
      try: () => options.facilitator.getSupported(),
      catch: () => new Unavailable({ message: FACILITATOR_UNAVAILABLE })
    })
    if (!offersMethod(supported, network, options.method))
      return yield* Effect.fail(
        ConfigError.InvalidData(
          ["HANDLE_LOOKUP_TRANSFER_METHOD"],
          `the facilitator (FACILITATOR_URL) does not list x402 v2 exact ${options.method} payments on ${network}; it lists ${listedKinds(supported)}`
        )
      )
  }).pipe(
    Effect.catchTag("Unavailable", () =>
      Effect.logWarning(
        "the payment facilitator's /supported (or the chain id) could not be read at start-up: paid handle lookups answer 503 until they can be quoted"
      )
    )
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
      const method = settings.transferMethod
      const offered: Option.Option<
        | { readonly transferMethod: "permit2" }
        | (FacilitatorTerms & { readonly transferMethod: "permit2-exact" })
      > =
        method === "permit2"
          ? offersPermit2(supported, network)
            ? Option.some({ transferMethod: "permit2" })
            : Option.none()
          : Option.map(facilitatorTerms(supported, network), (terms) => ({
              ...terms,
              transferMethod: "permit2-exact"
            }))
      const terms = yield* Option.match(offered, {
        onSome: Effect.succeed,
        onNone: () =>
          Effect.logWarning(
            `the payment facilitator offers no x402 v2 exact ${method} payments on this chain's network`
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
