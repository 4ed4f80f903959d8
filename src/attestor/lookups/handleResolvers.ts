/**
 * Handle resolution (docs/attestor.md §4 "POST /v1/commitment" rules 1 and 3, "Paid handle lookup
 * flow"): a handle of a lookup platform to the platform's immutable numeric user id.
 *
 * - microblog: `GET <api>/2/users/by/username/<handle>` with the app's bearer token; X answers a
 *   missing user as 404 or as 200 with `errors` and no `data`.
 * - codehost: `GET <api>/users/<handle>`; 404 when there is no such user.
 * - fedsocial: the fname registry, `GET <fnames>/transfers/current?name=<name>`; its current
 *   transfer's `to` is the fid; 404 when the name is not registered.
 *
 * Every answer is untrusted: bodies are read up to `MAX_PROVIDER_BODY_BYTES`, calls end at the
 * timeout, and only a canonical decimal id is taken. A directory that does not answer (or answers
 * anything else) is `LookupUnavailable`, never a guess. No handle reaches a log line or a metric.
 */
import { Data, Effect, Option, Redacted } from "effect"
import type { LookupPlatform } from "../../../schema/attestor.js"
import { canonicalUserId, readBodyLimited } from "../logins/oauth/providers.js"

/** The directory could not say: down, slow, refusing the app, or answering nonsense. */
export class LookupUnavailable extends Data.TaggedError("LookupUnavailable")<{
  readonly platform: LookupPlatform
}> {}

/** A handle's user id, or none when the platform has no such handle. */
export type Resolve = (handle: string) => Effect.Effect<Option.Option<string>, LookupUnavailable>

export interface ResolverSettings {
  /** X API base (`https://api.x.com`) and the app's bearer token; no token, no microblog lookups. */
  readonly microblog: { readonly apiUrl: string; readonly bearerToken: Redacted.Redacted | undefined }
  /** GitHub API base (`https://api.github.com`) and an optional token for a higher rate limit. */
  readonly codehost: { readonly apiUrl: string; readonly token: Redacted.Redacted | undefined }
  /** The fname registry (`https://fnames.farcaster.xyz`). */
  readonly fedsocial: { readonly fnamesUrl: string }
  readonly timeoutMs: number
}

interface Answer {
  readonly status: number
  readonly body: unknown
}

const field = (value: unknown, key: string): unknown =>
  typeof value === "object" && value !== null ? (value as Record<string, unknown>)[key] : undefined

/** One GET with a timeout and a body cap; the JSON body, or `undefined` when it is not JSON. */
const getJson = (
  url: string,
  headers: Record<string, string>,
  timeoutMs: number,
  platform: LookupPlatform
): Effect.Effect<Answer, LookupUnavailable> =>
  Effect.tryPromise({
    try: async (signal) => {
      const response = await fetch(url, {
        headers: { accept: "application/json", ...headers },
        signal,
        redirect: "manual"
      })
      const text = await readBodyLimited(response)
      let body: unknown
      try {
        body = JSON.parse(text)
      } catch {
        body = undefined
      }
      return { status: response.status, body }
    },
    catch: () => new LookupUnavailable({ platform })
  }).pipe(Effect.timeoutFail({ duration: timeoutMs, onTimeout: () => new LookupUnavailable({ platform }) }))

/** The user id of a found answer, or unavailable when the answer has none in canonical form. */
const idOrUnavailable = (value: unknown, platform: LookupPlatform) => {
  const id = canonicalUserId(value)
  return id === undefined ? Effect.fail(new LookupUnavailable({ platform })) : Effect.succeed(Option.some(id))
}

export const microblogResolver =
  (settings: ResolverSettings): Resolve =>
  (handle) =>
    Effect.gen(function* () {
      const token = settings.microblog.bearerToken
      if (token === undefined) return yield* Effect.fail(new LookupUnavailable({ platform: "microblog" }))
      const answer = yield* getJson(
        `${settings.microblog.apiUrl}/2/users/by/username/${encodeURIComponent(handle)}`,
        { authorization: `Bearer ${Redacted.value(token)}` },
        settings.timeoutMs,
        "microblog"
      )
      if (answer.status === 404) return Option.none()
      if (answer.status !== 200) return yield* Effect.fail(new LookupUnavailable({ platform: "microblog" }))
      const data = field(answer.body, "data")
      // X's "not found" is a 200 with `errors` and no `data`.
      if (data === undefined && Array.isArray(field(answer.body, "errors"))) return Option.none()
      return yield* idOrUnavailable(field(data, "id"), "microblog")
    })

export const codehostResolver =
  (settings: ResolverSettings): Resolve =>
  (handle) =>
    Effect.gen(function* () {
      const token = settings.codehost.token
      const answer = yield* getJson(
        `${settings.codehost.apiUrl}/users/${encodeURIComponent(handle)}`,
        token === undefined ? {} : { authorization: `Bearer ${Redacted.value(token)}` },
        settings.timeoutMs,
        "codehost"
      )
      if (answer.status === 404) return Option.none()
      if (answer.status !== 200) return yield* Effect.fail(new LookupUnavailable({ platform: "codehost" }))
      return yield* idOrUnavailable(field(answer.body, "id"), "codehost")
    })

export const fedsocialResolver =
  (settings: ResolverSettings): Resolve =>
  (handle) =>
    Effect.gen(function* () {
      const answer = yield* getJson(
        `${settings.fedsocial.fnamesUrl}/transfers/current?name=${encodeURIComponent(handle)}`,
        {},
        settings.timeoutMs,
        "fedsocial"
      )
      if (answer.status === 404) return Option.none()
      if (answer.status !== 200) return yield* Effect.fail(new LookupUnavailable({ platform: "fedsocial" }))
      return yield* idOrUnavailable(field(field(answer.body, "transfer"), "to"), "fedsocial")
    })

/** The resolvers of the platforms this instance can look up (microblog needs its bearer token). */
export const handleResolvers = (
  settings: ResolverSettings
): Partial<Readonly<Record<LookupPlatform, Resolve>>> => ({
  ...(settings.microblog.bearerToken === undefined ? {} : { microblog: microblogResolver(settings) }),
  codehost: codehostResolver(settings),
  fedsocial: fedsocialResolver(settings)
})
