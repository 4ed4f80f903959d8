/**
 * The attestor's per-IP rate limit (docs/attestor.md §8): every POST and every OAuth route costs
 * one token of a `RATE_LIMIT_BURST` bucket refilled at `RATE_LIMIT_PER_MINUTE`; other reads (health,
 * info, metrics, the OpenAPI document) are free.
 */
import type { AttestorSettingsShape } from "../config/attestor.js"
import type { IpRateLimitOptions } from "../http/rateLimit.js"

/** Per-IP cost of a request by method and route template ("unmatched" for unknown routes). */
export const attestorRequestCost = (method: string, route: string): number => {
  if (method === "POST") return 1
  // OAuth start and callback are GETs too (docs/attestor.md §4); every route under /v1/oauth/ counts.
  if (method === "GET") return route.startsWith("/v1/oauth/") ? 1 : 0
  return 0
}

export const attestorIpRateLimit = (settings: AttestorSettingsShape): IpRateLimitOptions => ({
  bucket: { burst: settings.rateLimitBurst, perMinute: settings.rateLimitPerMinute },
  trustProxyHops: settings.trustProxyHops,
  cost: attestorRequestCost
})
