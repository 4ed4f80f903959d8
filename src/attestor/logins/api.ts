/**
 * Logins (docs/attestor.md §4 "OAuth start / callback / verify rules", docs/protocol.md §10): each ends
 * in a session for the stealth owner fixed before it. Every login route lives under
 * `/v1/oauth/<platform>/…`; `LoginOffered` refuses a platform this instance is not configured for
 * with 400 `unsupported` before its body is read.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as OpenApi from "@effect/platform/OpenApi"
import { Effect, Layer, Schema } from "effect"
import {
  FedsocialStartResponse,
  FedsocialVerifyRequest,
  LegacyOAuthStartQuery,
  MessengerVerifyRequest,
  OAuthCallbackQuery,
  OAuthStartRequest,
  OAuthStartResponse,
  Platform,
  SessionResponse
} from "../../../schema/attestor.js"
import { NotFound, Unsupported, Wire } from "../../../schema/errors.js"
import { type ErrorOf, postEndpoint } from "../../http/declare.js"
import { loginNotConfigured } from "./loginAnswers.js"

/** The platform segment of a login route's path: `/v1/oauth/<platform>/…`. */
const platformOf = (url: string): string => url.split("?", 1)[0]?.split("/")[3] ?? ""

/** Whether the route's platform is one this instance logs in with (400 `unsupported` if not). */
export class LoginOffered extends HttpApiMiddleware.Tag<LoginOffered>()("LoginOffered", {
  failure: Wire.Unsupported
}) {
  /** Offers exactly `platforms` (those `/v1/info` lists). */
  static readonly layer = (platforms: Iterable<string>): Layer.Layer<LoginOffered> => {
    const offered = new Set(platforms)
    return Layer.succeed(
      LoginOffered,
      Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
        const platform = platformOf(request.url)
        return offered.has(platform)
          ? Effect.void
          : Effect.fail(new Unsupported({ message: loginNotConfigured(platform) }))
      })
    )
  }
}

/**
 * Whether the legacy GET start is served (`OAUTH_GET_START`): 404 `not_found` when it is not,
 * decided before the query is decoded and before `LoginOffered` (an endpoint's own middleware runs
 * first), so every query and every platform gets that one answer.
 */
export class LegacyStartEnabled extends HttpApiMiddleware.Tag<LegacyStartEnabled>()("LegacyStartEnabled", {
  failure: Wire.NotFound
}) {
  static readonly layer = (enabled: boolean): Layer.Layer<LegacyStartEnabled> =>
    Layer.succeed(
      LegacyStartEnabled,
      enabled
        ? Effect.void
        : Effect.fail(new NotFound({ message: "GET /v1/oauth/:platform/start is disabled: use POST" }))
    )
}

const PlatformPath = Schema.Struct({ platform: Platform })

export const messengerVerifyEndpoint = postEndpoint("messengerVerify", "/v1/oauth/messenger/verify", {
  payload: MessengerVerifyRequest,
  success: SessionResponse,
  errors: [Wire.BadRequest, Wire.Unsupported, Wire.InvalidSession, Wire.RateLimited, Wire.Unavailable]
})

export type MessengerVerifyError = ErrorOf<typeof messengerVerifyEndpoint>

/**
 * The provider URL to send the browser to and the state it carries; for fedsocial, what the client
 * puts in its sign-in message.
 */
export const oauthStartEndpoint = HttpApiEndpoint.post("oauthStart", "/v1/oauth/:platform/start")
  .setPath(PlatformPath)
  .setPayload(OAuthStartRequest)
  .addSuccess(Schema.Union(OAuthStartResponse, FedsocialStartResponse))
  .addError(Wire.BadRequest)
  .addError(Wire.Unsupported)
  .addError(Wire.RateLimited)
  .addError(Wire.Unavailable)

/** Deprecated: the intent in the query (never ids); 302 to the provider, or JSON with `format=json`. */
export const legacyOAuthStartEndpoint = HttpApiEndpoint.get("legacyOAuthStart", "/v1/oauth/:platform/start")
  .setPath(PlatformPath)
  .setUrlParams(LegacyOAuthStartQuery)
  .addSuccess(OAuthStartResponse)
  .addError(Wire.BadRequest)
  .addError(Wire.Unsupported)
  .addError(Wire.RateLimited)
  .addError(Wire.Unavailable)
  .middleware(LegacyStartEnabled)
  .annotate(OpenApi.Deprecated, true)
  .annotate(
    OpenApi.Description,
    "Deprecated: use POST /v1/oauth/:platform/start. Answers 302 to the provider, or { url, state } with format=json; 404 for any query when OAUTH_GET_START=false."
  )

/**
 * Where the provider sends the browser back: 302 to `<redirect>#attest=<session>` for a login
 * started with a `redirect` (and `<redirect>#error=<code>` when it fails), else the JSON answer.
 */
export const oauthCallbackEndpoint = HttpApiEndpoint.get("oauthCallback", "/v1/oauth/:platform/callback")
  .setPath(PlatformPath)
  .setUrlParams(OAuthCallbackQuery)
  .addSuccess(SessionResponse)
  .addError(Wire.BadRequest)
  .addError(Wire.Unsupported)
  .addError(Wire.InvalidSession)
  .addError(Wire.AccessDenied)
  .addError(Wire.RateLimited)
  .addError(Wire.Unavailable)

export const fedsocialVerifyEndpoint = postEndpoint("fedsocialVerify", "/v1/oauth/fedsocial/verify", {
  payload: FedsocialVerifyRequest,
  success: SessionResponse,
  errors: [Wire.BadRequest, Wire.Unsupported, Wire.InvalidSession, Wire.RateLimited, Wire.Unavailable]
})

export class AttestorLoginsGroup extends HttpApiGroup.make("logins")
  .add(oauthStartEndpoint)
  .add(legacyOAuthStartEndpoint)
  .add(oauthCallbackEndpoint)
  .add(messengerVerifyEndpoint)
  .add(fedsocialVerifyEndpoint)
  .middleware(LoginOffered) {}
