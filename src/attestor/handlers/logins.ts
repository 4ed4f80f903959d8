/**
 * The login handlers (src/attestor/api/logins.ts), `LoginOffered`: a route under
 * `/v1/oauth/<platform>/` whose platform this instance cannot log in with is 400 `unsupported`
 * before its body is read (the platforms are exactly those `/v1/info` lists); and
 * `LegacyStartEnabled`: with `OAUTH_GET_START=false` the legacy GET start is 404 `not_found` before
 * its query is decoded.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Layer, Option } from "effect"
import { errorCatalog, NotFound, Unsupported } from "../../../schema/errors.js"
import { AttestorSettings } from "../../config/attestor.js"
import { reportOutcome } from "../../http/outcomes.js"
import { AttestorApi } from "../api/index.js"
import { LegacyStartEnabled, LoginOffered } from "../api/logins.js"
import { loginPlatforms } from "../info.js"
import { loginNotConfigured, messengerLoginConfig, verifyMessengerLogin } from "../logins.js"
import { FedsocialLogins } from "../oauth/FedsocialLogins.js"
import { OAuthLogins } from "../oauth/OAuthLogins.js"
import { SessionStore } from "../SessionStore.js"

/** The platform segment of a login route's path: `/v1/oauth/<platform>/…`. */
const platformOf = (url: string): string => url.split("?", 1)[0]?.split("/")[3] ?? ""

export const loginOfferedLayer = Layer.effect(
  LoginOffered,
  Effect.map(AttestorSettings, (settings) => {
    const offered = new Set<string>(loginPlatforms(settings))
    return Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      const platform = platformOf(request.url)
      return offered.has(platform)
        ? Effect.void
        : Effect.fail(new Unsupported({ message: loginNotConfigured(platform) }))
    })
  })
)

export const legacyStartEnabledLayer = Layer.effect(
  LegacyStartEnabled,
  Effect.map(AttestorSettings, (settings) =>
    settings.oauthGetStart
      ? Effect.void
      : Effect.fail(new NotFound({ message: "GET /v1/oauth/:platform/start is disabled: use POST" }))
  )
)

export const AttestorLoginsLive = HttpApiBuilder.group(AttestorApi, "logins", (handlers) =>
  Effect.gen(function* () {
    const settings = yield* AttestorSettings
    const store = yield* SessionStore
    const messenger = Option.map(messengerLoginConfig(settings), (config) =>
      verifyMessengerLogin(config, store)
    )
    const oauth = yield* OAuthLogins
    const fedsocial = yield* FedsocialLogins
    return handlers
      .handle("messengerVerify", ({ payload }) =>
        Option.match(messenger, {
          // Not reached: `LoginOffered` refuses first. Kept so the handler stands on its own.
          onNone: () => Effect.fail(new Unsupported({ message: loginNotConfigured("messenger") })),
          onSome: (verify) => verify(payload)
        })
      )
      .handle("oauthStart", ({ path, payload }) =>
        path.platform === "fedsocial" ? fedsocial.start(payload) : oauth.start(path.platform, payload)
      )
      .handle("fedsocialVerify", ({ payload }) => fedsocial.verify(payload))
      .handle("legacyOAuthStart", ({ path, urlParams }) =>
        // Reached with OAUTH_GET_START=true only: `LegacyStartEnabled` answers 404 first otherwise.
        Effect.map(
          oauth.start(path.platform, {
            stealthOwner: urlParams.stealthOwner,
            ...(urlParams.redirect === undefined ? {} : { redirect: urlParams.redirect }),
            ...(urlParams.loginChallenge === undefined ? {} : { loginChallenge: urlParams.loginChallenge })
          }),
          (started) =>
            urlParams.format === "json" ? started : HttpServerResponse.redirect(started.url, { status: 302 })
        )
      )
      .handle("oauthCallback", ({ path, urlParams }) =>
        oauth.callback(path.platform, urlParams).pipe(
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
      )
  })
).pipe(Layer.provide(loginOfferedLayer), Layer.provide(legacyStartEnabledLayer))
