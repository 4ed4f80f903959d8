/**
 * `GET /v1/config` and `GET /v1/quote` (spec/relayer.md §2 RelayerConfig and QuoteResponse, §4):
 * the endpoints, their handlers, and the fee oracle they stand on.
 */
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Effect, Redacted } from "effect"
import { privateKeyToAccount } from "viem/accounts"
import { Unavailable, Wire } from "../../schema/errors.js"
import { AddressFromSelf, ZeroAddress } from "../../schema/primitives.js"
import { QuoteQuery, QuoteResponse, RelayerConfig } from "../../schema/relayer.js"
import { lazyChainId } from "../chain/chainId.js"
import { RelayerSettings } from "../config/relayer.js"
import { FeeOracle } from "./FeeOracle.js"
import { recordQuoteServed } from "./fees/metrics.js"

export { FeeOracle, feeOracleLayer } from "./FeeOracle.js"

export const configEndpoint = HttpApiEndpoint.get("config", "/v1/config")
  .addSuccess(RelayerConfig)
  .addError(Wire.Unavailable)

/**
 * No amount: the fee depends only on asset, adapter, action and flags. A legacy `amount`
 * parameter is not part of `QuoteQuery`, so it is dropped when the query is decoded.
 */
export const quoteEndpoint = HttpApiEndpoint.get("quote", "/v1/quote")
  .setUrlParams(QuoteQuery)
  .addSuccess(QuoteResponse)
  .addError(Wire.BadRequest)
  .addError(Wire.AdapterNotAllowed)
  .addError(Wire.Unavailable)

export class QuoteGroup extends HttpApiGroup.make("quote").add(configEndpoint).add(quoteEndpoint) {}

/*
 * The handlers are built against an API holding this group alone, under the relayer API's id, so
 * this module need not import `api.ts` (which imports it). Routes land in the same router either
 * way; the API's own middleware and errors are applied where the whole API is served.
 */
const QuoteApi = HttpApi.make("relayer").add(QuoteGroup)

export const QuoteHandlers = HttpApiBuilder.group(QuoteApi, "quote", (handlers) =>
  Effect.gen(function* () {
    const settings = yield* RelayerSettings
    const oracle = yield* FeeOracle

    // The hot key's address: what clients put in `Claim.relayer` (fee-only claims must).
    const relayer = AddressFromSelf.make(privateKeyToAccount(Redacted.value(settings.hotKey)).address)
    // Settings hold checksummed addresses already; the brand says so to the response schemas.
    const vault = AddressFromSelf.make(settings.vault)
    const settlementAsset = AddressFromSelf.make(settings.settlementAsset)
    const shieldAdapter = AddressFromSelf.make(settings.shieldAdapter)
    // The configured chain id when there is one; else the RPC's, read once it answers.
    const chainId = (yield* lazyChainId(settings.chainId)).pipe(
      Effect.mapError(() => new Unavailable({ message: "the chain RPC is not answering" }))
    )

    return handlers
      .handle("config", () =>
        chainId.pipe(
          Effect.map((chainId) => ({
            chainId,
            vault,
            relayer,
            settlementAsset,
            adapters: { direct: ZeroAddress, shield: shieldAdapter },
            minDeadlineSeconds: settings.minDeadlineSeconds,
            quoteTtlSeconds: settings.quoteTtlSeconds
          }))
        )
      )
      .handle("quote", ({ urlParams: query }) =>
        Effect.gen(function* () {
          const quote = yield* oracle.quote({
            asset: query.asset,
            adapter: query.adapter,
            action: query.action,
            ...(query.templates === undefined ? {} : { templates: query.templates }),
            consolidate: query.consolidate,
            register: query.register
          })
          const response = {
            chainId: yield* chainId,
            vault,
            asset: query.asset,
            adapter: query.adapter,
            action: query.action,
            relayer,
            relayerFee: quote.relayerFee,
            gasEstimate: quote.gasEstimate,
            gasPrice: quote.gasPrice,
            validUntil: quote.validUntil
          }
          yield* recordQuoteServed(query.action)
          return response
        })
      )
  })
)

/**
 * The handlers; they need a `FeeOracle` (`feeOracleLayer`), which the relayer's wiring provides
 * once for every group that prices requests.
 */
export const QuoteLive = QuoteHandlers
