/**
 * The relayer's rate limits (docs/relayer.md §8): a per-IP bucket where each POST costs 1, a
 * quote or transaction-status poll 0.2 and `GET /v1/accounts` what its answer weighs (a poll's
 * 0.2 at least), and a
 * per-account bucket charged only once a request for that account has passed simulation, so
 * refused requests naming someone's id cannot drain it.
 */
import { Context, Effect, Layer } from "effect"
import type { Hex } from "viem"
import type { RateLimited } from "../../schema/errors.js"
import { RelayerSettings, type RelayerSettingsShape } from "../config/relayer.js"
import { type IpRateLimitOptions, makeLimit, memoryRateLimiter } from "../http/rateLimit.js"

const POLL_COST = 0.2
const ACCOUNTS = "/v1/accounts"

/**
 * Per-IP cost of a request on arrival by method and route template; other reads are free. A HEAD
 * is answered as its GET and costs as much on arrival. `GET /v1/accounts` costs a poll's on
 * arrival and the rest of its weight once its answer is known (`relayerBytesPerToken`).
 */
export const relayerRequestCost = (method: string, route: string): number => {
  if (method === "GET" || method === "HEAD")
    return route === "/v1/quote" || route === ACCOUNTS ? POLL_COST : 0
  if (method === "POST") return route === "/v1/tx-status" ? POLL_COST : 1
  return 0
}

/**
 * The answers weighed by the per-IP limit: `GET /v1/accounts`, a token per `bytesPerToken` bytes
 * sent (`RATE_LIMIT_IP_BYTES_PER_TOKEN`) when that is more than a poll's 0.2, so the identity body
 * costs several times the gzip one, as it costs the relayer several times the work, and a 304
 * costs what a poll does.
 */
export const relayerBytesPerToken =
  (bytesPerToken: number) =>
  (method: string, route: string): number | undefined =>
    method === "GET" && route === ACCOUNTS ? bytesPerToken : undefined

export const relayerIpRateLimit = (settings: RelayerSettingsShape): IpRateLimitOptions => ({
  bucket: { burst: settings.rateLimitIpBurst, perMinute: settings.rateLimitIpPerMinute },
  trustProxyHops: settings.trustProxyHops,
  cost: relayerRequestCost,
  bytesPerToken: relayerBytesPerToken(settings.rateLimitIpBytesPerToken)
})

export interface IdRateLimitShape {
  /** Takes one token of the account's bucket, or refuses with 429 `rate_limited`. */
  readonly charge: (id: Hex) => Effect.Effect<void, RateLimited>
}

export class IdRateLimit extends Context.Tag("IdRateLimit")<IdRateLimit, IdRateLimitShape>() {
  /** In-memory buckets of `RATE_LIMIT_ID_BURST` tokens refilled at `RATE_LIMIT_ID_PER_MINUTE`. */
  static readonly layer: Layer.Layer<IdRateLimit, never, RelayerSettings> = Layer.effect(
    IdRateLimit,
    Effect.gen(function* () {
      const settings = yield* RelayerSettings
      const limit = yield* makeLimit(
        { burst: settings.rateLimitIdBurst, perMinute: settings.rateLimitIdPerMinute },
        "id"
      ).pipe(Effect.provide(memoryRateLimiter()))
      return { charge: (id) => limit(`id:${id.toLowerCase()}`, 1) }
    })
  )

  /** No limit, for tests of everything else. */
  static readonly test: Layer.Layer<IdRateLimit> = Layer.succeed(IdRateLimit, {
    charge: () => Effect.void
  })
}
