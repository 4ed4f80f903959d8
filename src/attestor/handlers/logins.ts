/**
 * The login handlers (src/attestor/api/logins.ts) over the `MessengerLogins`, `OAuthLogins` and
 * `FedsocialLogins` services. `LoginOffered` and `LegacyStartEnabled` (provided in
 * layers/attestor.ts) refuse before any of these runs.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { AttestorApi } from "../api/index.js"
import { MessengerLogins } from "../MessengerLogins.js"
import { FedsocialLogins } from "../oauth/FedsocialLogins.js"
import { OAuthLogins } from "../oauth/OAuthLogins.js"

export const AttestorLoginsHandlers = HttpApiBuilder.group(AttestorApi, "logins", (handlers) =>
  Effect.all([MessengerLogins, OAuthLogins, FedsocialLogins]).pipe(
    Effect.map(([messenger, oauth, fedsocial]) =>
      handlers
        .handle("messengerVerify", ({ payload }) => messenger.verify(payload))
        .handle("oauthStart", ({ path, payload }) =>
          path.platform === "fedsocial" ? fedsocial.start(payload) : oauth.start(path.platform, payload)
        )
        .handle("fedsocialVerify", ({ payload }) => fedsocial.verify(payload))
        .handle("legacyOAuthStart", ({ path, urlParams }) => oauth.legacyStart(path.platform, urlParams))
        .handle("oauthCallback", ({ path, urlParams }) => oauth.callbackAnswer(path.platform, urlParams))
    )
  )
)
