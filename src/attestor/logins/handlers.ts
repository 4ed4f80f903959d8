/**
 * The login handlers (src/attestor/logins/api.ts) over the `MessengerLogins`, `OAuthLogins` and
 * `FedsocialLogins` services. `LoginOffered` and `LegacyStartEnabled` (provided in
 * layers/attestor.ts) refuse before any of these runs. A start is counted against the client
 * address the per-IP limit counts it under (its OAuth states are bounded per address).
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import type { HttpServerRequest } from "@effect/platform/HttpServerRequest"
import { Effect, Option } from "effect"
import { AttestorSettings } from "../../config/attestor.js"
import { clientKey } from "../../http/rateLimit.js"
import { AttestorApi } from "../api.js"
import { FedsocialLogins } from "./fedsocial/FedsocialLogins.js"
import { MessengerLogins } from "./messenger/MessengerLogins.js"
import { OAuthLogins } from "./oauth/OAuthLogins.js"

/** The client address of a request, as `TRUST_PROXY` decides it (src/http/rateLimit.ts). */
const clientOf = (trustProxyHops: number) => (request: HttpServerRequest) =>
  clientKey(Option.getOrUndefined(request.remoteAddress), request.headers["x-forwarded-for"], trustProxyHops)

export const AttestorLoginsHandlers = HttpApiBuilder.group(AttestorApi, "logins", (handlers) =>
  Effect.all([MessengerLogins, OAuthLogins, FedsocialLogins, AttestorSettings]).pipe(
    Effect.map(([messenger, oauth, fedsocial, settings]) => {
      const client = clientOf(settings.trustProxyHops)
      return handlers
        .handle("messengerVerify", ({ payload }) => messenger.verify(payload))
        .handle("oauthStart", ({ path, payload, request }) =>
          path.platform === "fedsocial"
            ? fedsocial.start(payload, client(request))
            : oauth.start(path.platform, payload, client(request))
        )
        .handle("fedsocialVerify", ({ payload }) => fedsocial.verify(payload))
        .handle("legacyOAuthStart", ({ path, urlParams, request }) =>
          oauth.legacyStart(path.platform, urlParams, client(request))
        )
        .handle("oauthCallback", ({ path, urlParams }) => oauth.callbackAnswer(path.platform, urlParams))
    })
  )
)
