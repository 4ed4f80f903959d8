/**
 * The three OAuth providers the attestor logs users in with (docs/attestor.md §5, docs/protocol.md §10
 * "OAuth start" and "OAuth callback"): microblog (X-style OAuth 2.0 with PKCE), codehost
 * (GitHub-style OAuth app, no PKCE) and community (Discord-style OAuth 2.0 with PKCE).
 *
 * The OAuth mechanics (authorization URL, PKCE challenge, code exchange) are arctic's generic
 * `OAuth2Client`, which takes the endpoints per call; what differs between the providers is here:
 * their default endpoints, scopes, where the immutable numeric user id sits in the user answer, how
 * a token is revoked (X wants `token_type_hint`, GitHub revokes with `DELETE
 * /applications/{client_id}/token`), and GitHub answering a refused code with 200 and `{ error }`.
 *
 * Every answer of a provider is untrusted input: bodies are read up to `MAX_PROVIDER_BODY_BYTES`,
 * every call is bounded by the configured timeout, and the user id must be a canonical decimal
 * string (Discord's exceed 2^53, so ids stay strings).
 */
import type { Redacted } from "effect"
import { isUserId, type OAuthCallbackPlatform } from "../../../../schema/attestor.js"

export interface ProviderEndpoints {
  /** Where the browser is sent to consent. */
  readonly authorize: string
  /** Code → access token. */
  readonly token: string
  /** Access token → revoked; codehost's may hold `{client_id}`. */
  readonly revoke: string
  /** The logged-in user, read with the access token. */
  readonly user: string
}

/** An OAuth app of this attestor on one platform. */
export interface OAuthApp {
  readonly clientId: string
  /** None for a public client (PKCE only): the client id then travels in the token request body. */
  readonly clientSecret: Redacted.Redacted | undefined
  readonly endpoints: ProviderEndpoints
}

export interface OAuthProvider {
  readonly scopes: ReadonlyArray<string>
  /** Whether the provider takes a PKCE challenge (S256). */
  readonly pkce: boolean
  /** The real provider's endpoints: the defaults of the settings. */
  readonly defaults: ProviderEndpoints
  /** The user id field of the user endpoint's JSON answer. */
  readonly userId: (body: unknown) => unknown
  /** The request that revokes `token`. */
  readonly revokeRequest: (
    app: OAuthApp,
    token: string,
    basic: string | undefined
  ) => RequestInit & { url: string }
}

const field = (value: unknown, key: string): unknown =>
  typeof value === "object" && value !== null ? (value as Record<string, unknown>)[key] : undefined

const formRevoke =
  (extra: Record<string, string>) =>
  (app: OAuthApp, token: string, basic: string | undefined): RequestInit & { url: string } => {
    const body = new URLSearchParams({ token, ...extra })
    if (basic === undefined) body.set("client_id", app.clientId)
    return {
      url: app.endpoints.revoke,
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        accept: "application/json",
        ...(basic === undefined ? {} : { authorization: `Basic ${basic}` })
      },
      body: body.toString()
    }
  }

export const oauthProviders: Readonly<Record<OAuthCallbackPlatform, OAuthProvider>> = {
  microblog: {
    scopes: ["users.read", "tweet.read"],
    pkce: true,
    defaults: {
      authorize: "https://x.com/i/oauth2/authorize",
      token: "https://api.x.com/2/oauth2/token",
      revoke: "https://api.x.com/2/oauth2/revoke",
      user: "https://api.x.com/2/users/me"
    },
    // `{ data: { id, name, username } }`; the username can change, the id cannot.
    userId: (body) => field(field(body, "data"), "id"),
    revokeRequest: formRevoke({ token_type_hint: "access_token" })
  },
  codehost: {
    // No scope: the public profile (with the numeric id) needs none.
    scopes: [],
    pkce: false,
    defaults: {
      authorize: "https://github.com/login/oauth/authorize",
      token: "https://github.com/login/oauth/access_token",
      revoke: "https://api.github.com/applications/{client_id}/token",
      user: "https://api.github.com/user"
    },
    // `{ login, id }` with `id` a JSON number; the login can change, the id cannot.
    userId: (body) => field(body, "id"),
    revokeRequest: (app, token, basic) => ({
      url: app.endpoints.revoke.replace("{client_id}", encodeURIComponent(app.clientId)),
      method: "DELETE",
      headers: {
        "content-type": "application/json",
        accept: "application/vnd.github+json",
        ...(basic === undefined ? {} : { authorization: `Basic ${basic}` })
      },
      body: JSON.stringify({ access_token: token })
    })
  },
  community: {
    scopes: ["identify"],
    pkce: true,
    // The API routes pinned to v10: a route without a version goes to Discord's default version,
    // which is the deprecated v6. The authorize page is no API route and has no version.
    defaults: {
      authorize: "https://discord.com/oauth2/authorize",
      token: "https://discord.com/api/v10/oauth2/token",
      revoke: "https://discord.com/api/v10/oauth2/token/revoke",
      user: "https://discord.com/api/v10/users/@me"
    },
    // `{ id, username }` with `id` a snowflake string above 2^53.
    userId: (body) => field(body, "id"),
    revokeRequest: formRevoke({ token_type_hint: "access_token" })
  }
}

/** Longest provider answer read; a real one is a few hundred bytes. */
export const MAX_PROVIDER_BODY_BYTES = 64 * 1024

/**
 * The user id of a user answer as a canonical decimal string, or none: a JSON number is taken only
 * while it is a safe integer (beyond that it has already lost digits).
 */
export const canonicalUserId = (value: unknown): string | undefined => {
  if (typeof value === "string") return isUserId(value) ? value : undefined
  if (typeof value === "number" && Number.isSafeInteger(value) && value > 0) return String(value)
  return undefined
}

/** A provider's answer body, refused (rejected) past `MAX_PROVIDER_BODY_BYTES` without reading on. */
export const readBodyLimited = async (response: Response): Promise<string> => {
  const reader = response.body?.getReader()
  if (reader === undefined) return ""
  const chunks: Array<Uint8Array> = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    size += value.byteLength
    if (size > MAX_PROVIDER_BODY_BYTES) {
      await reader.cancel()
      throw new Error("the answer is too large")
    }
    chunks.push(value)
  }
  return Buffer.concat(chunks).toString("utf8")
}
