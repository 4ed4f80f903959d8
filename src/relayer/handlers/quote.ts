/**
 * The handlers of `GET /v1/config` and `GET /v1/quote` (src/relayer/api/quote.ts), over the fee
 * oracle (src/relayer/FeeOracle.ts) the relayer's wiring provides once.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, FiberRef } from "effect"
import { AddressFromSelf, ZeroAddress } from "../../../schema/primitives.js"
import { QuoteResponse } from "../../../schema/relayer.js"
import { ChainId } from "../../chain/chainId.js"
import { RelayerSettings } from "../../config/relayer.js"
import { cacheAnswer } from "../../http/cachedAnswers.js"
import { precomputed } from "../../http/precomputed.js"
import { RelayerApi } from "../api/index.js"
import { FeeOracle, type Quote } from "../FeeOracle.js"
import { recordQuoteServed, unsafeRecordQuoteServed } from "../fees/metrics.js"

/**
 * A quote's answer, encoded once (src/http/precomputed.ts): every client asking the same question
 * in the quote's lifetime gets the same bytes and headers without the schema work on each request.
 */
export const quoteAnswer = precomputed(QuoteResponse)

export const RelayerQuoteHandlers = HttpApiBuilder.group(RelayerApi, "quote", (handlers) =>
  Effect.gen(function* () {
    const settings = yield* RelayerSettings
    const oracle = yield* FeeOracle

    // The hot key's address: what clients put in `Claim.relayer` (fee-only claims must).
    const relayer = AddressFromSelf.make(settings.hotKey.address)
    // Settings hold checksummed addresses already; the brand says so to the response schemas.
    const vault = AddressFromSelf.make(settings.vault)
    const settlementAsset = AddressFromSelf.make(settings.settlementAsset)
    const shieldAdapter = AddressFromSelf.make(settings.shieldAdapter)
    // The configured chain id when there is one; else the RPC's, read once it answers.
    const chainId = (yield* ChainId).get

    /**
     * A cached quote's rendered answer (`quoteAnswer`), kept by the oracle's quote object (a new
     * quote is a new object), for the question it answered.
     */
    const encoded = new WeakMap<Quote, QuoteAnswer>()

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
          const id = yield* chainId
          yield* recordQuoteServed(query.action)
          // The same bytes answer this request target again until the quote expires or is replaced.
          const metricLabels = yield* FiberRef.get(FiberRef.currentMetricLabels)
          yield* cacheAnswer({
            untilMs: quote.validUntil * 1000,
            current: () => oracle.isCurrent(quote),
            onReplay: () => unsafeRecordQuoteServed(query.action, metricLabels)
          })
          const known = encoded.get(quote)
          if (
            known !== undefined &&
            known.chainId === id &&
            known.asset === query.asset &&
            known.adapter === query.adapter &&
            known.action === query.action
          )
            return known.response
          const answer = {
            chainId: id,
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
          const response = quoteAnswer.render(answer)
          // Not rendered: left to HttpApiBuilder, which fails it as it always has.
          if (!HttpServerResponse.isServerResponse(response)) return answer
          encoded.set(quote, {
            chainId: id,
            asset: query.asset,
            adapter: query.adapter,
            action: query.action,
            response
          })
          return response
        })
      )
  })
)

interface QuoteAnswer {
  readonly chainId: number
  readonly asset: string
  readonly adapter: string
  readonly action: string
  readonly response: HttpServerResponse.HttpServerResponse
}
