/**
 * The login handlers (src/attestor/api/logins.ts) and `LoginOffered`: a route under
 * `/v1/oauth/<platform>/` whose platform this instance cannot log in with is 400 `unsupported`
 * before its body is read (the platforms are exactly those `/v1/info` lists).
 */
import { HttpApiBuilder, HttpServerRequest } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { Unsupported } from "../../../schema/errors.js"
import { AttestorSettings } from "../../config/attestor.js"
import { AttestorApi } from "../api/index.js"
import { LoginOffered } from "../api/logins.js"
import { loginPlatforms } from "../info.js"
import { loginNotConfigured, messengerLoginConfig, verifyMessengerLogin } from "../logins.js"
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

export const AttestorLoginsLive = HttpApiBuilder.group(AttestorApi, "logins", (handlers) =>
  Effect.gen(function* () {
    const settings = yield* AttestorSettings
    const store = yield* SessionStore
    const messenger = Option.map(messengerLoginConfig(settings), (config) =>
      verifyMessengerLogin(config, store)
    )
    return handlers.handle("messengerVerify", ({ payload }) =>
      Option.match(messenger, {
        // Not reached: `LoginOffered` refuses first. Kept so the handler stands on its own.
        onNone: () => Effect.fail(new Unsupported({ message: loginNotConfigured("messenger") })),
        onSome: (verify) => verify(payload)
      })
    )
  })
).pipe(Layer.provide(loginOfferedLayer))
