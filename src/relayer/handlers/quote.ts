/**
 * The handlers of `GET /v1/config` and `GET /v1/quote` (src/relayer/api/quote.ts), over the fee
 * oracle (src/relayer/FeeOracle.ts) the relayer's wiring provides once.
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Redacted } from "effect"
import { privateKeyToAccount } from "viem/accounts"
import { AddressFromSelf, ZeroAddress } from "../../../schema/primitives.js"
import { ChainId } from "../../chain/chainId.js"
import { RelayerSettings } from "../../config/relayer.js"
import { RelayerApi } from "../api/index.js"
import { FeeOracle } from "../FeeOracle.js"
import { recordQuoteServed } from "../fees/metrics.js"

export const QuoteLive = HttpApiBuilder.group(RelayerApi, "quote", (handlers) =>
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
    const chainId = (yield* ChainId).get

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
