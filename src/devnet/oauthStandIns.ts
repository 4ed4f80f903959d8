/**
 * Local stand-ins of the three OAuth providers the attestor logs users in with (docs/protocol.md §9
 * "Devnet stand-ins for the outside world (attestor)", §10 "OAuth start" and "OAuth callback"):
 * microblog (X-style OAuth 2.0 with PKCE), codehost (GitHub-style OAuth app, no PKCE) and community
 * (Discord-style OAuth 2.0 with PKCE), on one loopback HTTP server.
 *
 * The devnet points the attestor at them so that every login runs on one machine, and tests use
 * them to drive the attestor through real HTTP. They answer like the real providers, failures
 * included (GitHub's 200-with-`error` on a refused code, X's problem+json 401, Discord's string
 * snowflakes), because a stand-in that is kinder than the real thing hides the attestor's bugs.
 * A browser's visit (a navigation, `Sec-Fetch-Mode: navigate`) to the authorize endpoint gets a
 * consent page, where a person picks a devnet user and presses "authorize" (or "deny"). Scripts
 * skip it: with the extra `devnet_user` query parameter, or from any client that is not a
 * navigating browser, consent is implied and the endpoint redirects at once, for the decimal id in
 * `devnet_user` (default `DEFAULT_DEVNET_USERS`). The handle `dev<n>` is user `n`. Tests can
 * switch faults on per platform and endpoint (slow, huge, down, ...).
 *
 * Nothing here is logged: the answers carry codes and tokens.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import { Effect, type Scope } from "effect"
import { closeOnce, listen } from "./loopbackServer.js"

export interface StandInClient {
  readonly clientId: string
  readonly clientSecret: string
  readonly redirectUri: string
}

export interface StandInOptions {
  /** Default "127.0.0.1". */
  readonly host?: string
  /** Default 0 (a free port). */
  readonly port?: number
  /**
   * The OAuth apps registered per platform: one, or several (a committee's members each register
   * their own app, with their own callback, at one provider; docs/protocol.md §9).
   */
  readonly clients: {
    readonly microblog: StandInClient | ReadonlyArray<StandInClient>
    readonly codehost: StandInClient | ReadonlyArray<StandInClient>
    readonly community: StandInClient | ReadonlyArray<StandInClient>
  }
}

export type StandInPlatform = "microblog" | "codehost" | "community"
export type StandInEndpoint = "authorize" | "token" | "revoke" | "user" | "handle"
/** Faults a test can switch on per platform and endpoint (cleared with undefined). */
export type StandInFault = "slow" | "huge" | "down" | "missing_id" | "non_numeric_id" | "server_error"

export interface OAuthStandIns {
  /** `http://<host>:<port>`. */
  readonly url: string
  /**
   * The platform's endpoints; codehost's revoke URL names the app (`clientId`, by default the
   * first one registered).
   */
  readonly endpoints: (
    platform: StandInPlatform,
    clientId?: string
  ) => {
    authorize: string
    token: string
    revoke: string
    user: string
    /** The handle lookup's path prefix: append `/<handle>`. */
    handles: string
  }
  /**
   * fedsocial's name registry, like fnames.farcaster.xyz: `GET <fnames>/transfers/current?name=dev<n>`
   * answers the current transfer of that name to fid n; any other name is 404.
   */
  readonly fnames: string
  /** Access tokens revoked so far. */
  readonly revoked: (platform: StandInPlatform) => ReadonlyArray<string>
  /** Access tokens issued so far. */
  readonly issued: (platform: StandInPlatform) => ReadonlyArray<string>
  readonly setFault: (
    platform: StandInPlatform,
    endpoint: StandInEndpoint,
    fault: StandInFault | undefined
  ) => void
  readonly close: () => Promise<void>
}

export const DEFAULT_DEVNET_USERS = {
  microblog: "1000001",
  codehost: "1000003",
  community: "1000005"
} as const

const PLATFORMS: ReadonlyArray<StandInPlatform> = ["microblog", "codehost", "community"]

const CODE_TTL_MS = 10 * 60 * 1000
const SLOW_MS = 30_000
/** Request bodies of these endpoints are a few hundred bytes; anything far larger is refused. */
const MAX_BODY_BYTES = 64 * 1024
const HUGE_PADDING_BYTES = 8 * 1024 * 1024

const USER_ID = /^[1-9][0-9]{0,19}$/
const HANDLE = /^dev([1-9][0-9]{0,19})$/
/** An S256 challenge is always 32 bytes in unpadded base64url. */
const S256_CHALLENGE = /^[A-Za-z0-9_-]{43}$/
const CODE_VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/

const GITHUB_DOCS = "https://docs.github.com/rest"
const GITHUB_OAUTH_DOCS =
  "https://docs.github.com/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors"

// ---------------------------------------------------------------------------------------------
// Answers

/**
 * A JSON number written with all its digits: GitHub's ids are JSON numbers, and a stand-in must be
 * able to answer one above 2^53 exactly as the wire would carry it.
 */
class RawNumber {
  constructor(readonly digits: string) {}
}

type Json =
  | null
  | boolean
  | number
  | string
  | RawNumber
  | ReadonlyArray<Json>
  | { readonly [k: string]: Json }
type JsonObject = { readonly [k: string]: Json }

interface Answer {
  readonly status: number
  readonly headers?: Readonly<Record<string, string>>
  /** JSON answer. */
  readonly json?: Json
  /** Any other body (with its content-type in `headers`). */
  readonly text?: string
}

/** Unguessable per process, so no string from a request can turn itself into a raw number. */
const RAW_MARK = `\u0000raw${randomBytes(8).toString("hex")}:`
const RAW_IN_JSON = new RegExp(`"\\\\u0000raw${RAW_MARK.slice(4, -1)}:([0-9]+)"`, "g")

const serialize = (value: Json): string =>
  JSON.stringify(value, (_key, v: unknown) =>
    v instanceof RawNumber ? `${RAW_MARK}${v.digits}` : v
  ).replace(RAW_IN_JSON, "$1")

const json = (status: number, body: Json, contentType = "application/json; charset=utf-8"): Answer => ({
  status,
  headers: { "content-type": contentType },
  json: body
})

const isObject = (value: Json | undefined): value is JsonObject =>
  typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof RawNumber)

const errorPage = (message: string): Answer => ({
  status: 400,
  headers: { "content-type": "text/html; charset=utf-8" },
  text: `<!doctype html><title>Error</title><h1>Something went wrong</h1><p>${message}</p>\n`
})

const redirect = (location: string): Answer => ({ status: 302, headers: { location } })

const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

const PROVIDER_NAMES: Record<StandInPlatform, string> = {
  microblog: "microblog (X-style)",
  codehost: "codehost (GitHub-style)",
  community: "community (Discord-style)"
}

/**
 * The provider's consent page: the same authorize request again, with the user the person picked
 * in `devnet_user` (or `devnet_deny=1`), so the form's answer takes the scripts' path. Inline
 * styles only: the page loads nothing.
 */
const consentPage = (platform: StandInPlatform, query: URLSearchParams): Answer => {
  const hidden = [...query]
    .filter(([key]) => key !== "devnet_user" && key !== "devnet_deny")
    .map(([key, value]) => `<input type="hidden" name="${escapeHtml(key)}" value="${escapeHtml(value)}">`)
    .join("")
  const user = DEFAULT_DEVNET_USERS[platform]
  const suggestions = [user, ...[1, 2, 3].map((n) => String(Number(user) + 10 * n))]
    .map((id) => `<option value="${id}">`)
    .join("")
  return {
    status: 200,
    headers: {
      "content-type": "text/html; charset=utf-8",
      "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'",
      "x-frame-options": "DENY"
    },
    text: `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Authorize · ${PROVIDER_NAMES[platform]} stand-in</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: system-ui, sans-serif; max-width: 32rem; margin: 3rem auto; padding: 0 1rem">
<p style="background:#fff3cd;border:1px solid #e0c36a;padding:.5rem">Devnet stand-in of an OAuth provider: no real account is involved.</p>
<h1 style="font-size:1.4rem">Authorize the fee vault attestor</h1>
<p>The attestor asks to read which ${PROVIDER_NAMES[platform]} user you are.</p>
<form method="get" action="">${hidden}
<label for="devnet_user">Log in as devnet user (a decimal id)</label><br>
<input id="devnet_user" name="devnet_user" value="${user}" list="devnet-users" required pattern="[1-9][0-9]{0,19}" inputmode="numeric" style="font-size:1rem;margin:.5rem 0">
<datalist id="devnet-users">${suggestions}</datalist><br>
<button type="submit" id="authorize" style="font-size:1rem">Authorize</button>
<button type="submit" id="deny" name="devnet_deny" value="1" formnovalidate style="font-size:1rem">Deny</button>
</form></body></html>
`
  }
}

const notFound = (platform: StandInPlatform): Answer =>
  platform === "community"
    ? json(404, { message: "404: Not Found", code: 0 })
    : platform === "codehost"
      ? json(404, { message: "Not Found", documentation_url: GITHUB_DOCS, status: "404" })
      : json(404, {
          title: "Not Found Error",
          type: "about:blank",
          status: 404,
          detail: "Not Found"
        })

// ---------------------------------------------------------------------------------------------
// Users and their answers

type IdFault = "missing_id" | "non_numeric_id" | undefined

/** The provider's view of user `n`, with its id field removed or garbled when a fault asks so. */
const profile = (platform: StandInPlatform, n: string, fault: IdFault): JsonObject => {
  const id = (numeric: Json): Record<string, Json> =>
    fault === "missing_id" ? {} : { id: fault === "non_numeric_id" ? "abc" : numeric }
  switch (platform) {
    case "microblog":
      return { data: { ...id(n), name: `Dev ${n}`, username: `dev${n}` } }
    case "codehost":
      return { login: `dev${n}`, ...id(new RawNumber(n)), type: "User" }
    case "community":
      // Discord ids are snowflake strings: they exceed 2^53.
      return { ...id(n), username: `dev${n}`, global_name: null, discriminator: "0" }
  }
}

const unauthorized = (platform: StandInPlatform): Answer => {
  switch (platform) {
    case "microblog":
      return json(
        401,
        { title: "Unauthorized", type: "about:blank", status: 401, detail: "Unauthorized" },
        "application/problem+json"
      )
    case "codehost":
      return json(401, { message: "Bad credentials", documentation_url: GITHUB_DOCS, status: "401" })
    case "community":
      return json(401, { message: "401: Unauthorized", code: 0 })
  }
}

// ---------------------------------------------------------------------------------------------
// Requests

const randomCode = (): string => randomBytes(24).toString("base64url")
const randomToken = (): string => randomBytes(20).toString("hex")

const s256 = (verifier: string): string => createHash("sha256").update(verifier, "utf8").digest("base64url")

const sameSecret = (a: string, b: string): boolean => {
  const x = Buffer.from(a, "utf8")
  const y = Buffer.from(b, "utf8")
  return x.length === y.length && timingSafeEqual(x, y)
}

/** `Authorization: Basic base64(id:secret)`, or none. */
const basicCredentials = (req: IncomingMessage): { id: string; secret: string } | undefined => {
  const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(req.headers.authorization ?? "")
  if (match === null) return undefined
  const decoded = Buffer.from(match[1]!, "base64").toString("utf8")
  const colon = decoded.indexOf(":")
  if (colon < 0) return undefined
  return { id: decoded.slice(0, colon), secret: decoded.slice(colon + 1) }
}

/** The bearer token (GitHub also takes `token <t>`), or none. */
const bearerToken = (req: IncomingMessage, platform: StandInPlatform): string | undefined => {
  const schemes = platform === "codehost" ? "Bearer|token" : "Bearer"
  const match = new RegExp(`^(?:${schemes})\\s+(\\S+)\\s*$`, "i").exec(req.headers.authorization ?? "")
  return match === null ? undefined : match[1]
}

const decoded = (segment: string): string | undefined => {
  try {
    return decodeURIComponent(segment)
  } catch {
    return undefined
  }
}

class BodyTooLarge extends Error {}

const readBody = (req: IncomingMessage): Promise<string> =>
  new Promise((resolve, reject) => {
    const declared = Number(req.headers["content-length"] ?? "0")
    if (declared > MAX_BODY_BYTES) {
      reject(new BodyTooLarge())
      return
    }
    const chunks: Array<Buffer> = []
    let size = 0
    req.on("data", (chunk: Buffer) => {
      size += chunk.length
      if (size > MAX_BODY_BYTES) {
        req.removeAllListeners("data")
        req.pause()
        reject(new BodyTooLarge())
        return
      }
      chunks.push(chunk)
    })
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")))
    req.on("error", reject)
  })

/** The form fields of a request body; a JSON object's string fields when the body is JSON. */
const fields = (req: IncomingMessage, body: string): URLSearchParams => {
  const type = (req.headers["content-type"] ?? "").toLowerCase()
  if (type.startsWith("application/json")) {
    const out = new URLSearchParams()
    try {
      const parsed: unknown = JSON.parse(body)
      if (typeof parsed === "object" && parsed !== null)
        for (const [k, v] of Object.entries(parsed)) if (typeof v === "string") out.set(k, v)
    } catch {
      // An unreadable body has no fields: the checks below refuse it.
    }
    return out
  }
  return type.startsWith("application/x-www-form-urlencoded")
    ? new URLSearchParams(body)
    : new URLSearchParams()
}

// ---------------------------------------------------------------------------------------------
// Routes

interface Route {
  readonly platform: StandInPlatform
  readonly endpoint: StandInEndpoint
  readonly method: string
  readonly pattern: RegExp
}

const ROUTES: ReadonlyArray<Route> = [
  {
    platform: "microblog",
    endpoint: "authorize",
    method: "GET",
    pattern: /^\/microblog\/i\/oauth2\/authorize$/
  },
  { platform: "microblog", endpoint: "token", method: "POST", pattern: /^\/microblog\/2\/oauth2\/token$/ },
  { platform: "microblog", endpoint: "revoke", method: "POST", pattern: /^\/microblog\/2\/oauth2\/revoke$/ },
  { platform: "microblog", endpoint: "user", method: "GET", pattern: /^\/microblog\/2\/users\/me$/ },
  {
    platform: "microblog",
    endpoint: "handle",
    method: "GET",
    pattern: /^\/microblog\/2\/users\/by\/username\/([^/]+)$/
  },
  {
    platform: "codehost",
    endpoint: "authorize",
    method: "GET",
    pattern: /^\/codehost\/login\/oauth\/authorize$/
  },
  {
    platform: "codehost",
    endpoint: "token",
    method: "POST",
    pattern: /^\/codehost\/login\/oauth\/access_token$/
  },
  {
    platform: "codehost",
    endpoint: "revoke",
    method: "DELETE",
    pattern: /^\/codehost\/applications\/([^/]+)\/token$/
  },
  { platform: "codehost", endpoint: "user", method: "GET", pattern: /^\/codehost\/user$/ },
  { platform: "codehost", endpoint: "handle", method: "GET", pattern: /^\/codehost\/users\/([^/]+)$/ },
  {
    platform: "community",
    endpoint: "authorize",
    method: "GET",
    pattern: /^\/community\/oauth2\/authorize$/
  },
  {
    platform: "community",
    endpoint: "token",
    method: "POST",
    pattern: /^\/community\/api\/v10\/oauth2\/token$/
  },
  {
    platform: "community",
    endpoint: "revoke",
    method: "POST",
    pattern: /^\/community\/api\/v10\/oauth2\/token\/revoke$/
  },
  { platform: "community", endpoint: "user", method: "GET", pattern: /^\/community\/api\/v10\/users\/@me$/ }
]

const platformOf = (pathname: string): StandInPlatform | undefined =>
  PLATFORMS.find((p) => pathname.startsWith(`/${p}/`))

// ---------------------------------------------------------------------------------------------
// The server

interface Grant {
  readonly platform: StandInPlatform
  readonly clientId: string
  readonly redirectUri: string
  readonly user: string
  readonly challenge: string | undefined
  readonly expiresAt: number
}

interface IssuedToken {
  readonly platform: StandInPlatform
  readonly user: string
  readonly expiresAt: number | undefined
  revoked: boolean
}

let hugePadding: string | undefined
const padding = (): string => {
  hugePadding ??= "x".repeat(HUGE_PADDING_BYTES)
  return hugePadding
}

/** The apps of every platform as lists, each with at least one app and no client id twice. */
const appLists = (
  clients: StandInOptions["clients"]
): Record<StandInPlatform, ReadonlyArray<StandInClient>> => {
  const lists = {} as Record<StandInPlatform, ReadonlyArray<StandInClient>>
  for (const platform of PLATFORMS) {
    const given = clients[platform]
    const list: ReadonlyArray<StandInClient> = Array.isArray(given) ? given : [given as StandInClient]
    if (list.length === 0) throw new Error(`the ${platform} stand-in needs at least one OAuth app`)
    if (new Set(list.map((c) => c.clientId)).size !== list.length)
      throw new Error(`two ${platform} OAuth apps share a client id`)
    lists[platform] = list
  }
  return lists
}

export const startOAuthStandIns = async (options: StandInOptions): Promise<OAuthStandIns> => {
  const host = options.host ?? "127.0.0.1"
  const apps = appLists(options.clients)
  /** The registered app of `platform` with this client id, if any. */
  const appOf = (
    platform: StandInPlatform,
    clientId: string | null | undefined
  ): StandInClient | undefined =>
    clientId === null || clientId === undefined
      ? undefined
      : apps[platform].find((c) => c.clientId === clientId)
  const codes = new Map<string, Grant>()
  const tokens = new Map<string, IssuedToken>()
  /** Discord revokes the whole grant when given its refresh token. */
  const refreshTokens = new Map<string, string>()
  const issuedList: Record<StandInPlatform, Array<string>> = { microblog: [], codehost: [], community: [] }
  const revokedList: Record<StandInPlatform, Array<string>> = { microblog: [], codehost: [], community: [] }
  const faults = new Map<string, StandInFault>()
  const timers = new Set<NodeJS.Timeout>()
  const faultOf = (platform: StandInPlatform, endpoint: StandInEndpoint) =>
    faults.get(`${platform}/${endpoint}`)

  const pruneCodes = (now: number) => {
    for (const [code, grant] of codes) if (grant.expiresAt <= now) codes.delete(code)
  }

  const liveToken = (platform: StandInPlatform, token: string | undefined): IssuedToken | undefined => {
    if (token === undefined) return undefined
    const issued = tokens.get(token)
    if (issued === undefined || issued.platform !== platform || issued.revoked) return undefined
    if (issued.expiresAt !== undefined && issued.expiresAt <= Date.now()) return undefined
    return issued
  }

  const revokeToken = (platform: StandInPlatform, token: string): boolean => {
    const access = refreshTokens.get(token) ?? token
    const issued = tokens.get(access)
    if (issued === undefined || issued.platform !== platform) return false
    if (!issued.revoked) {
      issued.revoked = true
      revokedList[platform].push(access)
    }
    return true
  }

  // --- authorize -----------------------------------------------------------------------------

  const authorize = (platform: StandInPlatform, query: URLSearchParams, navigated: boolean): Answer => {
    const clientId = query.get("client_id")
    const client = appOf(platform, clientId)
    if (clientId === null || client === undefined) return errorPage("Unknown or missing client_id.")
    // GitHub falls back on the registered callback; X and Discord want it named.
    const redirectUri = query.get("redirect_uri") ?? (platform === "codehost" ? client.redirectUri : null)
    // Never redirect to an unregistered URI: the page is the only safe answer.
    if (redirectUri !== client.redirectUri)
      return errorPage("The redirect_uri is not registered for this client.")
    if (query.get("response_type") !== "code") return errorPage("Unsupported response_type.")
    const pkce = platform !== "codehost"
    const challenge = query.get("code_challenge") ?? undefined
    if (pkce) {
      if (query.get("code_challenge_method") !== "S256" || challenge === undefined)
        return errorPage("A code_challenge with code_challenge_method=S256 is required.")
      if (!S256_CHALLENGE.test(challenge)) return errorPage("Invalid code_challenge.")
    }
    // A person at a browser consents on the page; its form comes back with `devnet_user` set.
    if (navigated && query.get("devnet_user") === null && query.get("devnet_deny") === null)
      return consentPage(platform, query)
    const user = query.get("devnet_user") ?? DEFAULT_DEVNET_USERS[platform]
    if (!USER_ID.test(user)) return errorPage("devnet_user must be a decimal user id.")

    const target = new URL(redirectUri)
    const state = query.get("state")
    if (query.get("devnet_deny") === "1") {
      target.searchParams.set("error", "access_denied")
      if (platform !== "codehost")
        target.searchParams.set(
          "error_description",
          "The resource owner or authorization server denied the request"
        )
      if (state !== null) target.searchParams.set("state", state)
      return redirect(target.toString())
    }
    const now = Date.now()
    pruneCodes(now)
    const code = randomCode()
    codes.set(code, {
      platform,
      clientId,
      redirectUri,
      user,
      challenge: pkce ? challenge : undefined,
      expiresAt: now + CODE_TTL_MS
    })
    target.searchParams.set("code", code)
    if (state !== null) target.searchParams.set("state", state)
    return redirect(target.toString())
  }

  // --- token ---------------------------------------------------------------------------------

  /** Answers of the token endpoint; codehost's follow the Accept header like GitHub's. */
  const tokenAnswer = (platform: StandInPlatform, req: IncomingMessage, status: number, body: JsonObject) => {
    if (platform !== "codehost" || (req.headers.accept ?? "").toLowerCase().includes("application/json"))
      return json(status, body)
    const form = new URLSearchParams()
    for (const [k, v] of Object.entries(body)) form.set(k, typeof v === "string" ? v : serialize(v))
    return {
      status,
      headers: { "content-type": "application/x-www-form-urlencoded; charset=utf-8" },
      text: form.toString()
    }
  }

  const badClient = (platform: StandInPlatform, req: IncomingMessage): Answer => {
    switch (platform) {
      case "microblog":
        return json(401, {
          error: "unauthorized_client",
          error_description: "Missing valid authorization header"
        })
      case "codehost":
        return tokenAnswer(platform, req, 200, {
          error: "incorrect_client_credentials",
          error_description: "The client_id and/or client_secret passed are incorrect.",
          error_uri: GITHUB_OAUTH_DOCS + "#incorrect-client-credentials"
        })
      case "community":
        return json(401, { error: "invalid_client" })
    }
  }

  const badCode = (platform: StandInPlatform, req: IncomingMessage): Answer => {
    switch (platform) {
      case "microblog":
        return json(400, {
          error: "invalid_request",
          error_description: "Value passed for the authorization code was invalid."
        })
      case "codehost":
        return tokenAnswer(platform, req, 200, {
          error: "bad_verification_code",
          error_description: "The code passed is incorrect or expired.",
          error_uri: GITHUB_OAUTH_DOCS + "#bad-verification-code"
        })
      case "community":
        return json(400, { error: "invalid_grant", error_description: 'Invalid "code" in request.' })
    }
  }

  /** The authenticated client id, or none: X wants Basic, GitHub and Discord also take the body. */
  const authenticate = (
    platform: StandInPlatform,
    req: IncomingMessage,
    form: URLSearchParams
  ): string | undefined => {
    const basic = basicCredentials(req)
    const given =
      basic ??
      (platform === "microblog"
        ? undefined
        : { id: form.get("client_id") ?? "", secret: form.get("client_secret") ?? "" })
    if (given === undefined) return undefined
    const client = appOf(platform, given.id)
    return client !== undefined && sameSecret(given.secret, client.clientSecret) ? client.clientId : undefined
  }

  const token = (platform: StandInPlatform, req: IncomingMessage, body: string): Answer => {
    const form = fields(req, body)
    const clientId = authenticate(platform, req, form)
    if (clientId === undefined) return badClient(platform, req)
    if (form.get("grant_type") !== "authorization_code") {
      return platform === "microblog"
        ? json(400, {
            error: "invalid_request",
            error_description: "Missing required parameter [grant_type]."
          })
        : tokenAnswer(platform, req, platform === "codehost" ? 200 : 400, { error: "unsupported_grant_type" })
    }
    const code = form.get("code") ?? ""
    const grant = codes.get(code)
    // Used once, whatever the outcome: a failed attempt burns the code (no guessing the verifier).
    codes.delete(code)
    if (grant === undefined || grant.platform !== platform || grant.clientId !== clientId)
      return badCode(platform, req)
    if (grant.expiresAt <= Date.now()) return badCode(platform, req)
    const redirectUri = form.get("redirect_uri")
    if (platform === "codehost") {
      // GitHub: optional, but when given it must be the one the code was issued for.
      if (redirectUri !== null && redirectUri !== grant.redirectUri)
        return tokenAnswer(platform, req, 200, {
          error: "redirect_uri_mismatch",
          error_description: "The redirect_uri MUST match the registered callback URL for this application.",
          error_uri: GITHUB_OAUTH_DOCS + "#redirect-uri-mismatch2"
        })
    } else if (redirectUri !== grant.redirectUri) return badCode(platform, req)
    if (grant.challenge !== undefined) {
      const verifier = form.get("code_verifier") ?? ""
      if (!CODE_VERIFIER.test(verifier) || s256(verifier) !== grant.challenge) return badCode(platform, req)
    }

    const access = randomToken()
    const now = Date.now()
    switch (platform) {
      case "microblog":
        tokens.set(access, { platform, user: grant.user, expiresAt: now + 7200_000, revoked: false })
        issuedList[platform].push(access)
        return json(200, {
          token_type: "bearer",
          expires_in: 7200,
          access_token: access,
          scope: "users.read tweet.read"
        })
      case "codehost":
        tokens.set(access, { platform, user: grant.user, expiresAt: undefined, revoked: false })
        issuedList[platform].push(access)
        return tokenAnswer(platform, req, 200, { access_token: access, token_type: "bearer", scope: "" })
      case "community": {
        const refresh = randomToken()
        tokens.set(access, { platform, user: grant.user, expiresAt: now + 604800_000, revoked: false })
        refreshTokens.set(refresh, access)
        issuedList[platform].push(access)
        return json(200, {
          access_token: access,
          token_type: "Bearer",
          expires_in: 604800,
          refresh_token: refresh,
          scope: "identify"
        })
      }
    }
  }

  // --- revoke --------------------------------------------------------------------------------

  const revoke = (platform: StandInPlatform, req: IncomingMessage, body: string, param: string): Answer => {
    const form = fields(req, body)
    if (platform === "codehost") {
      const basic = basicCredentials(req)
      const client = appOf(platform, basic?.id)
      // GitHub hides the application from wrong credentials: 404, not 401.
      if (
        basic === undefined ||
        client === undefined ||
        param !== client.clientId ||
        !sameSecret(basic.secret, client.clientSecret)
      )
        return json(404, { message: "Not Found", documentation_url: GITHUB_DOCS, status: "404" })
      const accessToken = form.get("access_token")
      if (accessToken === null)
        return json(422, { message: "Invalid request.", documentation_url: GITHUB_DOCS, status: "422" })
      if (liveToken(platform, accessToken) === undefined)
        return json(404, { message: "Not Found", documentation_url: GITHUB_DOCS, status: "404" })
      revokeToken(platform, accessToken)
      return { status: 204 }
    }
    if (authenticate(platform, req, form) === undefined) return badClient(platform, req)
    const value = form.get("token")
    if (value === null || value === "")
      return platform === "microblog"
        ? json(400, { error: "invalid_request", error_description: "Missing required parameter [token]." })
        : json(400, { error: "invalid_request", error_description: 'Missing "token" in request.' })
    // RFC 7009: an unknown token is revoked already, so both answer success.
    revokeToken(platform, value)
    return platform === "microblog" ? json(200, { revoked: true }) : json(200, {})
  }

  // --- user and handles ----------------------------------------------------------------------

  const user = (platform: StandInPlatform, req: IncomingMessage, fault: StandInFault | undefined): Answer => {
    const issued = liveToken(platform, bearerToken(req, platform))
    const idFault: IdFault = fault === "missing_id" || fault === "non_numeric_id" ? fault : undefined
    // A fault on the user's answer is the provider's misbehaviour: it answers even a bad token.
    if (issued === undefined && idFault === undefined && fault !== "huge") return unauthorized(platform)
    return json(200, profile(platform, issued?.user ?? DEFAULT_DEVNET_USERS[platform], idFault))
  }

  const handle = (
    platform: StandInPlatform,
    req: IncomingMessage,
    raw: string,
    fault: StandInFault | undefined
  ): Answer => {
    const name = decoded(raw)
    if (name === undefined) return notFound(platform)
    const idFault: IdFault = fault === "missing_id" || fault === "non_numeric_id" ? fault : undefined
    const n = HANDLE.exec(name)?.[1]
    if (platform === "microblog") {
      if (bearerToken(req, platform) === undefined) return unauthorized(platform)
      if (n === undefined)
        return json(200, {
          errors: [
            {
              value: name,
              detail: `Could not find user with username: [${name}].`,
              title: "Not Found Error",
              resource_type: "user",
              parameter: "username",
              resource_id: name,
              type: "https://api.twitter.com/2/problems/resource-not-found"
            }
          ]
        })
      return json(200, profile(platform, n, idFault))
    }
    if (platform === "codehost" && n !== undefined) return json(200, profile(platform, n, idFault))
    return notFound(platform)
  }

  // --- dispatch ------------------------------------------------------------------------------

  const send = (res: ServerResponse, answer: Answer) => {
    if (res.destroyed || res.headersSent) return
    const body =
      answer.json !== undefined ? serialize(answer.json) : answer.text !== undefined ? answer.text : undefined
    res.writeHead(answer.status, {
      "cache-control": "no-store",
      ...answer.headers,
      ...(body === undefined ? {} : { "content-length": String(Buffer.byteLength(body)) })
    })
    res.end(body)
  }

  /** The fname registry's answer for `name`: its current transfer (to fid n for `dev<n>`), or 404. */
  const fnameTransfer = (name: string): Answer => {
    const fid = HANDLE.exec(name)?.[1]
    if (fid === undefined)
      return json(404, { code: "NOT_FOUND", error: "Could not resolve current transfer" })
    return json(200, {
      transfer: {
        id: Number(fid),
        timestamp: 1_700_000_000,
        username: name,
        owner: "0x0000000000000000000000000000000000000000",
        from: 0,
        to: Number(fid),
        user_signature: "0x",
        server_signature: "0x"
      }
    })
  }

  const handleRequest = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    let url: URL
    try {
      url = new URL(req.url ?? "/", "http://stand-in")
    } catch {
      req.resume()
      return send(res, json(400, { message: "Bad Request" }))
    }
    const pathname = url.pathname
    if (pathname === "/fedsocial/transfers/current" && req.method === "GET") {
      req.resume()
      return send(res, fnameTransfer(url.searchParams.get("name") ?? ""))
    }
    const found = ROUTES.map((route) => ({ route, match: route.pattern.exec(pathname) })).find(
      ({ match }) => match !== null
    )
    if (found === undefined) {
      req.resume()
      const platform = platformOf(pathname)
      return send(res, platform === undefined ? json(404, { message: "Not Found" }) : notFound(platform))
    }
    const { route, match } = found
    if (req.method !== route.method) {
      req.resume()
      return send(res, json(405, { message: "Method Not Allowed" }))
    }
    const { platform, endpoint } = route
    const fault = faultOf(platform, endpoint)
    if (fault === "down") {
      req.socket.destroy()
      return
    }
    let body = ""
    if (route.method === "GET") req.resume()
    else
      try {
        body = await readBody(req)
      } catch (error) {
        if (error instanceof BodyTooLarge)
          return send(res, {
            ...json(413, { message: "Payload Too Large" }),
            headers: { "content-type": "application/json; charset=utf-8", connection: "close" }
          })
        req.socket.destroy()
        return
      }
    let answer: Answer
    if (fault === "server_error") answer = json(503, { message: "Service Unavailable" })
    else {
      switch (endpoint) {
        case "authorize":
          answer = authorize(platform, url.searchParams, req.headers["sec-fetch-mode"] === "navigate")
          break
        case "token":
          answer = token(platform, req, body)
          break
        case "revoke":
          answer = revoke(platform, req, body, decoded(match?.[1] ?? "") ?? "")
          break
        case "user":
          answer = user(platform, req, fault)
          break
        case "handle":
          answer = handle(platform, req, match?.[1] ?? "", fault)
          break
      }
      if (fault === "huge")
        answer = json(200, { ...(isObject(answer.json) ? answer.json : {}), padding: padding() })
    }
    if (fault === "slow") {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          timers.delete(timer)
          resolve()
        }, SLOW_MS)
        timer.unref()
        timers.add(timer)
        // A closed connection needs no answer: stop waiting for it.
        res.once("close", () => {
          clearTimeout(timer)
          timers.delete(timer)
          resolve()
        })
      })
    }
    send(res, answer)
  }

  const server = createServer((req, res) => {
    handleRequest(req, res).catch(() => {
      // No detail on the wire or in logs: the request may carry secrets.
      if (!res.headersSent && !res.destroyed) send(res, json(500, { message: "Internal Server Error" }))
      else res.destroy()
    })
  })

  const address = await listen(server, options.port ?? 0, host)
  const url = `http://${address.family === "IPv6" ? `[${address.address}]` : address.address}:${address.port}`

  const close = closeOnce(server, () => {
    for (const timer of timers) clearTimeout(timer)
    timers.clear()
  })

  const endpoints = (platform: StandInPlatform, clientId?: string) => {
    switch (platform) {
      case "microblog":
        return {
          authorize: `${url}/microblog/i/oauth2/authorize`,
          token: `${url}/microblog/2/oauth2/token`,
          revoke: `${url}/microblog/2/oauth2/revoke`,
          user: `${url}/microblog/2/users/me`,
          handles: `${url}/microblog/2/users/by/username`
        }
      case "codehost":
        return {
          authorize: `${url}/codehost/login/oauth/authorize`,
          token: `${url}/codehost/login/oauth/access_token`,
          revoke: `${url}/codehost/applications/${encodeURIComponent(clientId ?? apps.codehost[0]!.clientId)}/token`,
          user: `${url}/codehost/user`,
          handles: `${url}/codehost/users`
        }
      case "community":
        return {
          authorize: `${url}/community/oauth2/authorize`,
          token: `${url}/community/api/v10/oauth2/token`,
          revoke: `${url}/community/api/v10/oauth2/token/revoke`,
          user: `${url}/community/api/v10/users/@me`,
          // Discord has no handle lookup: everything under it answers 404.
          handles: `${url}/community/api/v10/users`
        }
    }
  }

  return {
    url,
    endpoints,
    fnames: `${url}/fedsocial`,
    revoked: (platform) => [...revokedList[platform]],
    issued: (platform) => [...issuedList[platform]],
    setFault: (platform, endpoint, fault) => {
      if (fault === undefined) faults.delete(`${platform}/${endpoint}`)
      else faults.set(`${platform}/${endpoint}`, fault)
    },
    close
  }
}

/** The Effect flavour: a scoped resource closed with its scope. */
export const oauthStandIns = (options: StandInOptions): Effect.Effect<OAuthStandIns, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.promise(() => startOAuthStandIns(options)),
    (standIns) => Effect.promise(() => standIns.close())
  )
