/**
 * Handle lookups as `HANDLE_LOOKUP_MODE` allows them (docs/attestor.md §2 AttestorInfo.handleLookup,
 * §4 "POST /v1/commitment" rules 1 and 5, "Paid handle lookup flow"), for `/v1/commitment` and
 * `/v1/public-handle` alike:
 *
 * - `off`: 400 `unsupported` (send the numeric userId);
 * - `free` (local development): resolved with the platform's directory, no payment;
 * - `paid`: bought over x402 (src/attestor/lookups/payments/paidLookup.ts) from the facilitator at
 *   `FACILITATOR_URL`, the payment recorded in `PaymentStore`. Start-up stops when that
 *   facilitator answers without listing `HANDLE_LOOKUP_TRANSFER_METHOD` (docs/attestor.md §4).
 *
 * A platform without a directory here (microblog without its bearer token) is 400 `unsupported`
 * before any payment is asked for, so no one pays for a lookup that cannot happen.
 */
import { HTTPFacilitatorClient } from "@x402/core/http"
import { type ConfigError, Context, Effect, Layer, Option, Redacted } from "effect"
import type { LookupPlatform } from "../../../schema/attestor.js"
import { NotFound, Unavailable, Unsupported } from "../../../schema/errors.js"
import { ChainClient } from "../../chain/ChainClient.js"
import { ChainId } from "../../chain/chainId.js"
import { clockLeadSeconds } from "../../chain/DevnetChainClock.js"
import { AttestorSettings, type PaidLookupSettings } from "../../config/attestor.js"
import { type HandleLookup, noLookups } from "../commitments/commitmentRules.js"
import { handleResolvers, type Resolve } from "./handleResolvers.js"
import { PaymentStore } from "./payments/PaymentStore.js"
import { paidLookup } from "./payments/paidLookup.js"
import { facilitatorListsMethod, lookupQuote } from "./payments/paymentQuote.js"
import { settlementChain } from "./payments/settlementOnChain.js"

export const HANDLE_NOT_FOUND = "no user has this handle on this platform"
export const DIRECTORY_UNAVAILABLE = "the platform's directory is not answering: try again later"

export interface HandleLookupsShape {
  readonly lookup: HandleLookup
}

type Resolvers = Partial<Readonly<Record<LookupPlatform, Resolve>>>

const unsupportedPlatform = (platform: LookupPlatform) =>
  new Unsupported({ message: `${platform} handles cannot be looked up here: send the numeric userId` })

/** A handle's user id from its platform's directory: 404 when it has none, 503 when it cannot say. */
export const resolveHandle =
  (resolvers: Resolvers) =>
  (platform: LookupPlatform, handle: string): Effect.Effect<string, Unsupported | NotFound | Unavailable> => {
    const resolve = resolvers[platform]
    if (resolve === undefined) return Effect.fail(unsupportedPlatform(platform))
    return resolve(handle).pipe(
      Effect.mapError(() => new Unavailable({ message: DIRECTORY_UNAVAILABLE })),
      Effect.flatMap(
        Option.match({
          onNone: () => Effect.fail(new NotFound({ message: HANDLE_NOT_FOUND })),
          onSome: Effect.succeed
        })
      )
    )
  }

/** `free`: each handle resolved with its platform's directory, no payment. */
export const freeLookups = (resolvers: Resolvers): HandleLookup => {
  const resolve = resolveHandle(resolvers)
  return (platform, handle, _paymentSignature, answer) =>
    resolve(platform, handle).pipe(
      Effect.flatMap(answer.make),
      Effect.map((body) => ({ body, paymentResponse: undefined }))
    )
}

/** The x402 facilitator of the settings: per-request timeout, and its bearer token when one is set. */
export const facilitatorClient = (settings: PaidLookupSettings): HTTPFacilitatorClient =>
  new HTTPFacilitatorClient({
    url: settings.facilitatorUrl,
    timeoutMs: settings.facilitatorTimeoutMs,
    ...Option.match(settings.facilitatorToken, {
      onNone: () => ({}),
      onSome: (token) => ({
        createAuthHeaders: async () => {
          const headers = { Authorization: `Bearer ${Redacted.value(token)}` }
          return { verify: headers, settle: headers, supported: headers }
        }
      })
    })
  })

export class HandleLookups extends Context.Tag("HandleLookups")<HandleLookups, HandleLookupsShape>() {
  /** The lookups of the settings' mode. */
  static readonly layer: Layer.Layer<
    HandleLookups,
    ConfigError.ConfigError,
    AttestorSettings | ChainClient | ChainId | PaymentStore
  > = Layer.scoped(
    HandleLookups,
    Effect.gen(function* () {
      const settings = yield* AttestorSettings
      const resolvers = handleResolvers(settings.handleResolvers)
      if (settings.handleLookupMode === "off") return { lookup: noLookups }
      if (settings.handleLookupMode === "free" || Option.isNone(settings.paidLookup))
        return { lookup: freeLookups(resolvers) }
      const paid = settings.paidLookup.value
      const facilitator = facilitatorClient(paid)
      const chainId = (yield* ChainId).get
      // A facilitator that answers without the configured method can never take these payments.
      yield* facilitatorListsMethod({ method: paid.transferMethod, chainId, facilitator })
      const chain = yield* ChainClient
      const quoted = yield* lookupQuote({
        settings: paid,
        asset: settings.settlementAsset,
        chain,
        chainId,
        facilitator
      })
      // A payer signs its deadline by its own clock: on a devnet chain run ahead of it
      // (DEVNET_CHAIN_CLOCK), the window also covers the lead, so the deadline is ahead on chain
      // too (docs/protocol.md §9 "The devnet's clock"). No lead anywhere else.
      const requirements = settings.devnetChainClock
        ? Effect.zipWith(quoted, clockLeadSeconds, (quote, lead) =>
            lead === 0 ? quote : { ...quote, maxTimeoutSeconds: quote.maxTimeoutSeconds + lead }
          )
        : quoted
      // Read the quote once at start-up, so an operator learns at once of a facilitator that cannot
      // take these payments; the service starts either way and answers 503 until it can.
      yield* requirements.pipe(
        Effect.tapError(() =>
          Effect.logWarning(
            "paid handle lookups cannot be quoted yet (facilitator or chain not answering): they answer 503 until then"
          )
        ),
        Effect.ignore,
        Effect.forkScoped
      )
      const buy = paidLookup({
        requirements,
        publicUrl: settings.publicUrl,
        facilitator,
        store: yield* PaymentStore,
        resolve: resolveHandle(resolvers),
        chain: settlementChain(chain)
      })
      const lookup: HandleLookup = (platform, handle, paymentSignature, answer) =>
        resolvers[platform] === undefined
          ? Effect.fail(unsupportedPlatform(platform))
          : buy(platform, handle, paymentSignature, answer)
      return { lookup }
    })
  )

  /** No lookups (`off`), for tests that do not need them. */
  static readonly off: Layer.Layer<HandleLookups> = Layer.succeed(HandleLookups, { lookup: noLookups })
}
