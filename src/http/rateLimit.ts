/**
 * Token-bucket rate limits: the per-client-IP limit both servers apply to every request (a
 * synchronous check in the servers' middleware, see `serveApi`), and, on `@effect/experimental`'s
 * RateLimiter, the helper services use for their own keys (the relayer's per-id limit).
 *
 * Buckets live in this process's memory (`tokenBuckets`): replicas behind a load balancer
 * each count on their own, and a restart refills every bucket. Keys are never logged or used as
 * metric labels.
 */

import { isIP } from "node:net"
import * as RateLimiter from "@effect/experimental/RateLimiter"
import { Duration, Effect, Layer, Metric } from "effect"
import { RateLimited } from "../../schema/errors.js"
import { counter, type SeriesAtZero } from "./metrics.js"

/** A bucket that holds `burst` tokens and refills `perMinute` tokens a minute. */
export interface TokenBucket {
  readonly burst: number
  readonly perMinute: number
}

/**
 * Costs are fractional (a poll costs 0.2); the store counts thousandths of a token so that sums of
 * fractions stay exact instead of drifting below zero through floating-point error.
 */
const SCALE = 1000

export const rateLimitedTotal = counter(
  "rate_limited_total",
  "Requests refused by a rate limit, by limit scope"
)

/** The refusal counter of each scope, to export at 0 from start-up (`exportAtZero`). */
export const rateLimitedSeriesAtZero = (scopes: ReadonlyArray<string>): ReadonlyArray<SeriesAtZero> =>
  scopes.map((scope) => Metric.tagged(rateLimitedTotal, "scope", scope))

export type Limit = (key: string, cost: number) => Effect.Effect<void, RateLimited>

/**
 * A limiter for one kind of key: `limit(key, cost)` takes `cost` tokens from the key's bucket or
 * fails with `RateLimited` carrying how long until enough tokens are back. `scope` only labels
 * the refusal metric.
 */
export const makeLimit = (
  bucket: TokenBucket,
  scope: string
): Effect.Effect<Limit, never, RateLimiter.RateLimiter> =>
  Effect.map(RateLimiter.RateLimiter, (limiter) => {
    const window = Duration.millis((60_000 * bucket.burst) / bucket.perMinute)
    const limit = Math.round(bucket.burst * SCALE)
    return (key, cost) => {
      const tokens = Math.round(cost * SCALE)
      if (tokens <= 0) return Effect.void
      return limiter
        .consume({ algorithm: "token-bucket", onExceeded: "fail", window, limit, key, tokens })
        .pipe(
          Effect.asVoid,
          Effect.catchAll((error) =>
            error.reason === "Exceeded"
              ? Metric.increment(Metric.tagged(rateLimitedTotal, "scope", scope)).pipe(
                  Effect.zipRight(
                    Effect.fail(
                      new RateLimited({
                        message: "too many requests, retry later",
                        retryAfterSeconds: Duration.toSeconds(error.retryAfter)
                      })
                    )
                  )
                )
              : // A limiter that cannot count must not take the service down with it.
                Effect.logWarning("rate limiter store failed; request let through")
          )
        )
    }
  })

interface Bucket {
  tokens: number
  updatedAt: number
  limit: number
  refillMillis: number
}

/**
 * In-memory token buckets, refilled continuously (to the thousandth of a token the limiter
 * counts), taken from synchronously. Bounded: past `maxKeys` buckets it forgets the ones that have
 * refilled completely (forgetting them changes nothing), then the oldest.
 */
const tokenBuckets = (maxKeys: number, onEvict: (now: number) => void = () => {}) => {
  const buckets = new Map<string, Bucket>()

  const refilled = (bucket: Bucket, now: number) =>
    Math.min(bucket.limit, bucket.tokens + Math.floor((now - bucket.updatedAt) / bucket.refillMillis))

  const evict = (now: number) => {
    if (buckets.size <= maxKeys) return
    for (const [key, bucket] of buckets) if (refilled(bucket, now) >= bucket.limit) buckets.delete(key)
    for (const key of buckets.keys()) {
      if (buckets.size <= maxKeys) break
      buckets.delete(key)
    }
    onEvict(now)
  }

  /** Takes `tokens` from `key`'s bucket if it holds them (or `allowOverflow`); what is left, < 0 if too few. */
  return (
    key: string,
    tokens: number,
    limit: number,
    refillMillis: number,
    allowOverflow: boolean,
    now: number
  ): number => {
    let bucket = buckets.get(key)
    if (bucket === undefined) {
      evict(now)
      bucket = { tokens: limit, updatedAt: now, limit, refillMillis }
      buckets.set(key, bucket)
    } else {
      const added = Math.floor((now - bucket.updatedAt) / refillMillis)
      if (added > 0) {
        bucket.tokens = Math.min(limit, bucket.tokens + added)
        // Keep the partial token earned since the last whole one.
        bucket.updatedAt = bucket.tokens === limit ? now : bucket.updatedAt + added * refillMillis
      }
    }
    const remaining = bucket.tokens - tokens
    if (allowOverflow || remaining >= 0) bucket.tokens = remaining
    return remaining
  }
}

/**
 * In-memory token buckets for the library's RateLimiter (`tokenBuckets`). Unlike the library's
 * memory store it stays bounded.
 */
export const boundedMemoryStore = (maxKeys = 100_000): Layer.Layer<RateLimiter.RateLimiterStore> =>
  Layer.sync(RateLimiter.RateLimiterStore, () => {
    const windows = new Map<string, { count: number; expiresAt: number }>()
    const take = tokenBuckets(maxKeys, (now) => {
      for (const [key, counter] of windows) if (counter.expiresAt <= now) windows.delete(key)
    })

    return RateLimiter.RateLimiterStore.of({
      fixedWindow: (options) =>
        Effect.clockWith((clock) =>
          Effect.sync(() => {
            const now = clock.unsafeCurrentTimeMillis()
            let counter = windows.get(options.key)
            if (counter === undefined || counter.expiresAt <= now) {
              counter = { count: 0, expiresAt: now }
              windows.set(options.key, counter)
            }
            if (options.limit !== undefined && counter.count + options.tokens > options.limit)
              return [counter.count + options.tokens, counter.expiresAt - now] as const
            counter.count += options.tokens
            counter.expiresAt += Duration.toMillis(options.refillRate) * options.tokens
            return [counter.count, counter.expiresAt - now] as const
          })
        ),
      tokenBucket: (options) =>
        Effect.clockWith((clock) =>
          Effect.sync(() =>
            take(
              options.key,
              options.tokens,
              options.limit,
              Duration.toMillis(options.refillRate),
              options.allowOverflow,
              clock.unsafeCurrentTimeMillis()
            )
          )
        )
    })
  })

/** The RateLimiter over a fresh bounded in-memory store. */
export const memoryRateLimiter = (maxKeys?: number): Layer.Layer<RateLimiter.RateLimiter> =>
  RateLimiter.layer.pipe(Layer.provide(boundedMemoryStore(maxKeys)))

// ---------------------------------------------------------------------------------------------
// Per-IP limit

export interface IpRateLimitOptions {
  readonly bucket: TokenBucket
  /**
   * How many reverse proxies in front of the server append to `X-Forwarded-For`. 0: the client is
   * the socket's peer and the header is ignored (anyone can write it).
   */
  readonly trustProxyHops: number
  /** Tokens a request costs, by method and route template ("unmatched" for unknown routes); 0 is free. */
  readonly cost: (method: string, route: string) => number
  /**
   * Routes whose answers cost what they weigh: bytes of body per token, by method and route
   * template; none for the others. Such an answer costs a token per `bytesPerToken` bytes of its
   * body, at least `cost` (charged on arrival as for every request).
   */
  readonly bytesPerToken?: ((method: string, route: string) => number | undefined) | undefined
}

/**
 * The address requests are counted under. The socket's peer, or with `trustProxyHops = n` the
 * address the n-th trusted proxy saw: the n-th `X-Forwarded-For` entry from the right (entries
 * further left are written by the client and prove nothing). An IPv6 client is counted by its /64,
 * the block one subscriber typically gets, so it cannot mint fresh buckets by changing addresses.
 */
export const clientKey = (
  socketAddress: string | undefined,
  forwardedFor: string | undefined,
  trustProxyHops: number
): string => {
  const chain = [socketAddress ?? "unknown"]
  if (trustProxyHops > 0 && forwardedFor !== undefined) {
    const hops = forwardedFor
      .split(",")
      .map((entry) => entry.trim())
      .filter((entry) => entry.length > 0)
      .reverse()
    chain.push(...hops.slice(0, trustProxyHops))
  }
  const picked = chain[chain.length - 1] ?? "unknown"
  return normalizeAddress(isIP(stripPort(picked)) === 0 ? (socketAddress ?? "unknown") : stripPort(picked))
}

/** `[v6]:port` and `v4:port` as some proxies write them. */
const stripPort = (entry: string): string => {
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(entry)
  if (bracketed?.[1] !== undefined) return bracketed[1]
  const v4WithPort = /^(\d{1,3}(?:\.\d{1,3}){3}):\d+$/.exec(entry)
  return v4WithPort?.[1] ?? entry
}

const normalizeAddress = (address: string): string => {
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address)
  if (mapped?.[1] !== undefined) return mapped[1]
  if (isIP(address) !== 6) return address
  return `${expandIpv6(address).slice(0, 4).join(":")}::/64`
}

/** The eight 16-bit groups of an IPv6 address (zone id dropped). */
const expandIpv6 = (address: string): ReadonlyArray<string> => {
  const plain = address.split("%")[0] ?? address
  const [head = "", tail] = plain.split("::")
  const parse = (part: string) => (part.length === 0 ? [] : part.split(":"))
  const left = parse(head)
  const right = tail === undefined ? [] : parse(tail)
  // An embedded IPv4 tail counts as two groups; only the first four groups matter here.
  const missing = Math.max(0, 8 - left.length - right.length)
  return [...left, ...Array.from({ length: missing }, () => "0"), ...right].map((group) =>
    (group.replace(/^0+(?=.)/, "") || "0").toLowerCase()
  )
}

export interface IpLimit {
  /**
   * Charges one request on arrival (its method, route template, the socket's peer and
   * `X-Forwarded-For`) to its client's bucket: the refusal to answer with, or none.
   */
  readonly arrive: (
    method: string,
    route: string,
    socketAddress: string | undefined,
    forwardedFor: string | undefined
  ) => RateLimited | undefined
  /** Whether this route's answers are weighed (`IpRateLimitOptions.bytesPerToken`). */
  readonly weighs: (method: string, route: string) => boolean
  /**
   * Charges what an answer of a weighed route weighs beyond what its arrival cost, once its body's
   * size is known and before it is sent. Taken even past empty: the answer goes out, and the
   * client's next requests are refused until the bucket has refilled.
   */
  readonly answered: (
    method: string,
    route: string,
    socketAddress: string | undefined,
    forwardedFor: string | undefined,
    bodyBytes: number
  ) => void
}

/**
 * The per-IP check of the server (src/http/server.ts, for the full path and for cached answers
 * alike): charges the request
 * `cost(method, route)` tokens of its client's bucket and answers nothing, or the `RateLimited`
 * refusal (429 with `Retry-After`) to fail the request with before its body is read. An answer of
 * a weighed route is charged the rest of its weight when it is known (`IpLimit.answered`).
 *
 * Synchronous, on buckets of its own: the same token bucket as `makeLimit` over
 * `memoryRateLimiter` (limit and window in thousandths of a token, `Retry-After` as the library
 * computes it, refusals counted under scope `ip`), without an Effect per request.
 */
export const ipRateLimit = (options: IpRateLimitOptions, maxKeys = 100_000): IpLimit => {
  const take = tokenBuckets(maxKeys)
  const window = Duration.millis((60_000 * options.bucket.burst) / options.bucket.perMinute)
  const limit = Math.round(options.bucket.burst * SCALE)
  const refillRate = Duration.unsafeDivide(window, limit)
  const refillMillis = Duration.toMillis(refillRate)
  const refused = rateLimitedTotal.pipe(Metric.tagged("scope", "ip"))
  const refusal = (retryAfter: Duration.Duration) => {
    refused.unsafeUpdate(1, [])
    return new RateLimited({
      message: "too many requests, retry later",
      retryAfterSeconds: Duration.toSeconds(retryAfter)
    })
  }
  const bytesPerToken = options.bytesPerToken
  return {
    arrive: (method, route, socketAddress, forwardedFor) => {
      const tokens = Math.round(options.cost(method, route) * SCALE)
      if (tokens <= 0) return undefined
      if (tokens > limit) return refusal(window)
      const key = clientKey(socketAddress, forwardedFor, options.trustProxyHops)
      const remaining = take(`ip:${key}`, tokens, limit, refillMillis, false, Date.now())
      // In debt after a heavy answer too: refused until a whole arrival cost is back.
      return remaining < 0 ? refusal(Duration.times(refillRate, -remaining)) : undefined
    },
    weighs: (method, route) => bytesPerToken?.(method, route) !== undefined,
    answered: (method, route, socketAddress, forwardedFor, bodyBytes) => {
      const perToken = bytesPerToken?.(method, route)
      if (perToken === undefined) return
      const tokens = Math.round(answerTokens(bodyBytes, perToken, options.cost(method, route)) * SCALE)
      if (tokens <= 0) return
      const key = clientKey(socketAddress, forwardedFor, options.trustProxyHops)
      take(`ip:${key}`, tokens, limit, refillMillis, true, Date.now())
    }
  }
}

/**
 * What an answer of `bodyBytes` bytes costs beyond the `arrivalCost` already taken: a token per
 * `bytesPerToken` bytes (to the thousandth of a token the buckets count), when that is more than
 * the arrival cost (docs/relayer.md §8).
 */
export const answerTokens = (bodyBytes: number, bytesPerToken: number, arrivalCost: number): number =>
  Math.max(0, bodyBytes / bytesPerToken - arrivalCost)
