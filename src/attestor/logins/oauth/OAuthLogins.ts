/**
 * OAuth logins (docs/attestor.md §3 "OAuth state → session", §4 "OAuth start / callback / verify
 * rules", §5; docs/protocol.md §10 "OAuth start", "OAuth callback", "Legacy GET start").
 *
 * Start: the intent (stealth owner, ids, redirect, login challenge) is fixed before the user meets
 * the provider and stored under a fresh state with the PKCE verifier (`OAuthStates`); the provider
 * URL carries only `response_type`, `client_id`, `redirect_uri`, `scope`, `state` and the PKCE
 * challenge. A `redirect` must equal a `REDIRECT_ALLOWLIST` entry (`redirectAllowList.ts`), and the
 * entry is what is kept. With `LOGIN_CHALLENGE=required` a start without a `loginChallenge` is 400:
 * PKCE binds the code to the attestor, the challenge binds the session to the client that started
 * the login (docs/protocol.md §10 "Login challenge"; RFC 9700 §2.1, §4.7). A start from a client
 * address holding `OAUTH_STATES_PER_CLIENT` live states, or while all clients hold
 * `OAUTH_STATES_MAX`, is 429 `rate_limited` and stores nothing (`OAuthStates`).
 *
 * Callback, in order, each refusing with no session made:
 * 1. the state is taken once: unknown, expired or used is 400 `bad_request`; from here on a failure
 *    of a login started with a `redirect` (still on the allow-list) is answered by sending the
 *    browser to `<redirect>#error=<code>`;
 * 2. the state must be this platform's (400); the user's refusal at the provider
 *    (`error=access_denied`) is 401 `access_denied`, any other provider error 401 `invalid_session`;
 *    no `code` is 400;
 * 3. the code is exchanged with the verifier (arctic): a refused code is 401 `invalid_session`, a
 *    provider not answering (or too slow) 503 `unavailable`;
 * 4. the immutable numeric user id is read with the token: a token the provider does not accept is
 *    401; an answer without a canonical numeric id, too large or too slow is 503;
 * 5. the access token is revoked: the attestor keeps no access to the user's account, and a login
 *    whose token could not be revoked makes no session (503);
 * 6. the session `{ platform, userId, stealthOwner, ids }` is created (`SessionStore`), with the
 *    start's login challenge; a login started (its state made) before the user's last contest
 *    makes none: 401 `invalid_session` (docs/protocol.md §10 "Contests").
 *
 * Nothing of a code, state, token, verifier or user reaches a log line, a metric or an error
 * message.
 */

import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import {
  CodeChallengeMethod,
  generateCodeVerifier,
  OAuth2Client,
  OAuth2RequestError,
  type OAuth2Tokens
} from "arctic"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import type {
  LegacyOAuthStartQuery,
  OAuthCallbackPlatform,
  OAuthStartRequest,
  OAuthStartResponse,
  Platform,
  SessionResponse
} from "../../../../schema/attestor.js"
import {
  AccessDenied,
  BadRequest,
  errorCatalog,
  InvalidSession,
  type RateLimited,
  Unavailable,
  Unsupported
} from "../../../../schema/errors.js"
import { reportOutcome } from "../../../http/outcomes.js"
import { sessionResponse } from "../loginAnswers.js"
import { SESSION_STORE_UNAVAILABLE, SessionStore } from "../SessionStore.js"
import { OAuthStates, startRefusal } from "./OAuthStates.js"
import {
  canonicalUserId,
  type OAuthApp,
  type OAuthProvider,
  oauthProviders,
  readBodyLimited
} from "./providers.js"
import { matchRedirect, REDIRECT_REFUSED } from "./redirectAllowList.js"

export interface OAuthLoginsConfig {
  /** The platforms this instance has an app for. */
  readonly apps: Partial<Readonly<Record<OAuthCallbackPlatform, OAuthApp>>>
  /** The attestor's own origin as providers and browsers reach it: the callback's base. */
  readonly publicUrl: string
  /** Where a login may redirect back to: canonical entries (`redirectAllowList.ts`). */
  readonly redirectAllowList: ReadonlyArray<string>
  /** Whether a start must carry a `loginChallenge` (`LOGIN_CHALLENGE`). */
  readonly loginChallenge: "required" | "optional"
  /** Longest wait for each provider call. */
  readonly providerTimeoutMs: number
}

export type OAuthStartError = BadRequest | Unsupported | RateLimited | Unavailable
export type OAuthCallbackError = BadRequest | InvalidSession | AccessDenied | Unavailable

/** A callback's answer: the session, and where to send the browser with it (none: JSON). */
export interface OAuthCallbackResult {
  readonly session: SessionResponse
  readonly redirect: string | undefined
}

/** A refused callback, and where to send the browser with the refusal's code (none: JSON). */
export interface OAuthCallbackRefusal {
  readonly error: OAuthCallbackError
  readonly redirect: string | undefined
}

export interface OAuthCallbackQuery {
  readonly state: string
  readonly code?: string | undefined
  readonly error?: string | undefined
}

export interface OAuthLoginsShape {
  /** `client`: the address the request is counted under (`clientKey` of src/http/rateLimit.ts). */
  readonly start: (
    platform: Platform,
    request: OAuthStartRequest,
    client: string
  ) => Effect.Effect<OAuthStartResponse, OAuthStartError>
  /** The deprecated GET start: a 302 to the provider, or `{ url, state }` with `format=json`. */
  readonly legacyStart: (
    platform: Platform,
    query: LegacyOAuthStartQuery,
    client: string
  ) => Effect.Effect<OAuthStartResponse | HttpServerResponse.HttpServerResponse, OAuthStartError>
  /**
   * The callback as the browser gets it: for a login started with a `redirect`, a 302 to the
   * matched entry with `#attest=<session>`, or `#error=<code>` when it fails; else the JSON answer.
   */
  readonly callbackAnswer: (
    platform: Platform,
    query: OAuthCallbackQuery
  ) => Effect.Effect<SessionResponse | HttpServerResponse.HttpServerResponse, OAuthCallbackError>
}

export class OAuthLogins extends Context.Tag("OAuthLogins")<OAuthLogins, OAuthLoginsShape>() {
  static readonly layer = (
    config: OAuthLoginsConfig
  ): Layer.Layer<OAuthLogins, never, OAuthStates | SessionStore> =>
    Layer.effect(OAuthLogins, makeOAuthLogins(config))
}

/** The two answers that go to a browser, from `start` and the callback's result. */
const browserAnswers = (
  start: OAuthLoginsShape["start"],
  callback: (
    platform: Platform,
    query: OAuthCallbackQuery
  ) => Effect.Effect<OAuthCallbackResult, OAuthCallbackRefusal>
): Pick<OAuthLoginsShape, "legacyStart" | "callbackAnswer"> => ({
  legacyStart: (platform, query, client) =>
    Effect.map(
      start(
        platform,
        {
          stealthOwner: query.stealthOwner,
          ...(query.redirect === undefined ? {} : { redirect: query.redirect }),
          ...(query.loginChallenge === undefined ? {} : { loginChallenge: query.loginChallenge })
        },
        client
      ),
      (started) =>
        query.format === "json" ? started : HttpServerResponse.redirect(started.url, { status: 302 })
    ),
  callbackAnswer: (platform, query) =>
    callback(platform, query).pipe(
      Effect.matchEffect({
        onSuccess: ({ session, redirect }) =>
          Effect.succeed(
            redirect === undefined
              ? session
              : HttpServerResponse.redirect(`${redirect}#attest=${session.session}`, { status: 302 })
          ),
        onFailure: ({ error, redirect }) => {
          if (redirect === undefined) return Effect.fail(error)
          const code = errorCatalog[error._tag].code
          return Effect.as(
            reportOutcome(code),
            HttpServerResponse.redirect(`${redirect}#error=${code}`, { status: 302 })
          )
        }
      })
    )
})

export const notAnOAuthPlatform = (platform: string) =>
  platform === "messenger"
    ? "messenger logs in with its widget: POST /v1/oauth/messenger/verify"
    : platform === "fedsocial"
      ? "fedsocial signs in with a signed message: POST /v1/oauth/fedsocial/start, then /v1/oauth/fedsocial/verify"
      : `${platform} login is not configured on this attestor`

const PROVIDER_UNAVAILABLE = "the login provider is not answering: try again later"
const PROVIDER_UNUSABLE = "the login provider's answer could not be used: try again later"
const CODE_REFUSED = "the login provider refused the login: log in again"
const LOGIN_DECLINED = "the login was declined at the provider: log in again and authorize it"
const STATE_UNKNOWN = "the login state is unknown, expired or already used: start the login again"
export const LOGIN_CHALLENGE_REQUIRED =
  "loginChallenge: required: draw a 32-byte loginSecret for this login, keep it, and send its SHA-256 as loginChallenge"

/** A provider call that never outlives the timeout (the fetch is aborted with it). */
const providerFetch = (request: RequestInit & { url: string }, timeoutMs: number) =>
  Effect.tryPromise({
    try: (signal) => fetch(request.url, { ...request, signal, redirect: "manual" }),
    catch: () => new Unavailable({ message: PROVIDER_UNAVAILABLE })
  }).pipe(
    Effect.timeoutFail({
      duration: timeoutMs,
      onTimeout: () => new Unavailable({ message: PROVIDER_UNAVAILABLE })
    })
  )

/** The body of a provider answer, refused past `MAX_PROVIDER_BODY_BYTES` without reading on. */
const readLimited = (response: Response, timeoutMs: number): Effect.Effect<string, Unavailable> =>
  Effect.tryPromise({
    try: () => readBodyLimited(response),
    catch: () => new Unavailable({ message: PROVIDER_UNUSABLE })
  }).pipe(
    Effect.timeoutFail({
      duration: timeoutMs,
      onTimeout: () => new Unavailable({ message: PROVIDER_UNAVAILABLE })
    })
  )

const basicCredentials = (app: OAuthApp): string | undefined =>
  app.clientSecret === undefined
    ? undefined
    : Buffer.from(`${app.clientId}:${Redacted.value(app.clientSecret)}`, "utf8").toString("base64")

/** Code → access token, with arctic; GitHub's 200-with-`error` is a refusal too. */
const exchangeCode = (
  client: OAuth2Client,
  app: OAuthApp,
  code: string,
  verifier: string | undefined,
  timeoutMs: number
): Effect.Effect<string, InvalidSession | Unavailable> =>
  Effect.tryPromise({
    try: () => client.validateAuthorizationCode(app.endpoints.token, code, verifier ?? null),
    catch: (error): InvalidSession | Unavailable => {
      if (error instanceof OAuth2RequestError) return new InvalidSession({ message: CODE_REFUSED })
      const status = (error as { readonly status?: unknown }).status
      // A 4xx without a well-formed OAuth error is still the provider saying no.
      return typeof status === "number" && status >= 400 && status < 500
        ? new InvalidSession({ message: CODE_REFUSED })
        : new Unavailable({ message: PROVIDER_UNAVAILABLE })
    }
  }).pipe(
    Effect.timeoutFail({
      duration: timeoutMs,
      onTimeout: () => new Unavailable({ message: PROVIDER_UNAVAILABLE })
    }),
    Effect.flatMap((tokens: OAuth2Tokens): Effect.Effect<string, InvalidSession | Unavailable> => {
      if (typeof tokens.data === "object" && tokens.data !== null && "error" in tokens.data)
        return Effect.fail(new InvalidSession({ message: CODE_REFUSED }))
      return Effect.try({
        try: () => tokens.accessToken(),
        catch: () => new Unavailable({ message: PROVIDER_UNUSABLE })
      })
    })
  )

/** The immutable numeric id of the token's user. */
const readUserId = (
  provider: OAuthProvider,
  app: OAuthApp,
  token: string,
  timeoutMs: number
): Effect.Effect<string, InvalidSession | Unavailable> =>
  Effect.gen(function* () {
    const response = yield* providerFetch(
      {
        url: app.endpoints.user,
        method: "GET",
        headers: {
          authorization: `Bearer ${token}`,
          accept: "application/json",
          "user-agent": "fee-vault-attestor"
        }
      },
      timeoutMs
    )
    if (response.status === 401 || response.status === 403) {
      yield* Effect.promise(() => response.body?.cancel() ?? Promise.resolve())
      return yield* Effect.fail(new InvalidSession({ message: CODE_REFUSED }))
    }
    if (response.status !== 200) {
      yield* Effect.promise(() => response.body?.cancel() ?? Promise.resolve())
      return yield* Effect.fail(new Unavailable({ message: PROVIDER_UNAVAILABLE }))
    }
    const text = yield* readLimited(response, timeoutMs)
    const body = yield* Effect.try({
      try: () => JSON.parse(text) as unknown,
      catch: () => new Unavailable({ message: PROVIDER_UNUSABLE })
    })
    const userId = canonicalUserId(provider.userId(body))
    if (userId === undefined) return yield* Effect.fail(new Unavailable({ message: PROVIDER_UNUSABLE }))
    return userId
  })

/** Revokes the access token; anything but a success keeps the login from making a session. */
const revoke = (
  provider: OAuthProvider,
  app: OAuthApp,
  token: string,
  timeoutMs: number
): Effect.Effect<void, Unavailable> =>
  Effect.gen(function* () {
    const response = yield* providerFetch(
      provider.revokeRequest(app, token, basicCredentials(app)),
      timeoutMs
    )
    yield* Effect.promise(() => response.body?.cancel() ?? Promise.resolve())
    if (response.status !== 200 && response.status !== 204)
      return yield* Effect.fail(
        new Unavailable({ message: "the login provider did not revoke its access token: log in again" })
      )
  })

const isOAuthPlatform = (platform: Platform): platform is OAuthCallbackPlatform =>
  platform === "microblog" || platform === "codehost" || platform === "community"

const makeOAuthLogins = (config: OAuthLoginsConfig) =>
  Effect.gen(function* () {
    const states = yield* OAuthStates
    const sessions = yield* SessionStore
    const allowed = new Set(config.redirectAllowList)
    const timeoutMs = config.providerTimeoutMs
    const clientOf = (platform: OAuthCallbackPlatform, app: OAuthApp) =>
      new OAuth2Client(
        app.clientId,
        app.clientSecret === undefined ? null : Redacted.value(app.clientSecret),
        `${config.publicUrl}/v1/oauth/${platform}/callback`
      )
    const appOf = (platform: Platform): Option.Option<readonly [OAuthCallbackPlatform, OAuthApp]> =>
      isOAuthPlatform(platform)
        ? Option.map(Option.fromNullable(config.apps[platform]), (app) => [platform, app] as const)
        : Option.none()

    const start: OAuthLoginsShape["start"] = (platform, request, clientAddress) =>
      Effect.gen(function* () {
        const found = appOf(platform)
        if (Option.isNone(found))
          return yield* Effect.fail(new Unsupported({ message: notAnOAuthPlatform(platform) }))
        const [oauthPlatform, app] = found.value
        const redirect = request.redirect === undefined ? undefined : matchRedirect(allowed, request.redirect)
        if (request.redirect !== undefined && redirect === undefined)
          return yield* Effect.fail(new BadRequest({ message: REDIRECT_REFUSED }))
        if (request.loginChallenge === undefined && config.loginChallenge === "required")
          return yield* Effect.fail(new BadRequest({ message: LOGIN_CHALLENGE_REQUIRED }))
        const provider = oauthProviders[oauthPlatform]
        const client = clientOf(oauthPlatform, app)
        const codeVerifier = provider.pkce ? generateCodeVerifier() : undefined
        const { state } = yield* states
          .put(
            {
              platform: oauthPlatform,
              stealthOwner: request.stealthOwner,
              ids: request.ids ?? [],
              redirect,
              codeVerifier,
              loginChallenge: request.loginChallenge
            },
            { client: clientAddress }
          )
          .pipe(Effect.mapError(startRefusal))
        const scopes = [...provider.scopes]
        const url =
          codeVerifier === undefined
            ? client.createAuthorizationURL(app.endpoints.authorize, state, scopes)
            : client.createAuthorizationURLWithPKCE(
                app.endpoints.authorize,
                state,
                CodeChallengeMethod.S256,
                codeVerifier,
                scopes
              )
        return { url: url.toString(), state } as OAuthStartResponse
      })

    const callback = (
      platform: Platform,
      query: OAuthCallbackQuery
    ): Effect.Effect<OAuthCallbackResult, OAuthCallbackRefusal> =>
      Effect.gen(function* () {
        const refuse = (error: OAuthCallbackError, redirect: string | undefined) =>
          Effect.fail<OAuthCallbackRefusal>({ error, redirect })
        // No provider redirects here for a platform without OAuth: its states are not touched.
        if (!isOAuthPlatform(platform) || config.apps[platform] === undefined)
          return yield* refuse(new BadRequest({ message: STATE_UNKNOWN }), undefined)
        const taken = yield* states
          .take(query.state, platform)
          .pipe(
            Effect.catchAll(() =>
              refuse(new Unavailable({ message: "the login state store is not answering" }), undefined)
            )
          )
        if (Option.isNone(taken)) return yield* refuse(new BadRequest({ message: STATE_UNKNOWN }), undefined)
        const intent = taken.value
        // Matched again: an entry taken off the allow-list since the start is not followed.
        const redirect = intent.redirect === undefined ? undefined : matchRedirect(allowed, intent.redirect)
        if (intent.redirect !== undefined && redirect === undefined)
          return yield* refuse(new BadRequest({ message: REDIRECT_REFUSED }), undefined)
        const intentPlatform = intent.platform
        if (intentPlatform !== platform || !isOAuthPlatform(intentPlatform))
          return yield* refuse(new BadRequest({ message: STATE_UNKNOWN }), redirect)
        // The user's "deny" at the provider is said as such; any other provider error is a refusal.
        if (query.error === "access_denied")
          return yield* refuse(new AccessDenied({ message: LOGIN_DECLINED }), redirect)
        if (query.error !== undefined)
          return yield* refuse(new InvalidSession({ message: CODE_REFUSED }), redirect)
        if (query.code === undefined)
          return yield* refuse(
            new BadRequest({ message: "code: the provider's callback carries no code" }),
            redirect
          )
        const app = config.apps[intentPlatform]
        if (app === undefined) return yield* refuse(new BadRequest({ message: STATE_UNKNOWN }), redirect)
        const provider = oauthProviders[intentPlatform]
        const userId = yield* Effect.gen(function* () {
          const token = yield* exchangeCode(
            clientOf(intentPlatform, app),
            app,
            query.code as string,
            intent.codeVerifier,
            timeoutMs
          )
          // Revoked whatever the user read gives: the attestor keeps no access to the account.
          const user = yield* Effect.either(readUserId(provider, app, token, timeoutMs))
          yield* revoke(provider, app, token, timeoutMs)
          return yield* user
        }).pipe(Effect.mapError((error) => ({ error, redirect })))
        const created = yield* sessions
          .create(
            { platform: intent.platform, userId, stealthOwner: intent.stealthOwner, ids: intent.ids },
            { loginChallenge: intent.loginChallenge, startedAt: intent.startedAt }
          )
          .pipe(
            Effect.mapError((e) => ({
              error:
                e._tag === "LoginStartedBeforeContest"
                  ? new InvalidSession({ message: e.message })
                  : new Unavailable({ message: SESSION_STORE_UNAVAILABLE }),
              redirect
            }))
          )
        return { session: sessionResponse(created), redirect }
      })

    return { start, ...browserAnswers(start, callback) } satisfies OAuthLoginsShape
  })
