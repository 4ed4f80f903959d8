/**
 * Logins (spec/attestor.md §3, §4 "OAuth start / callback / verify rules", §5): each verified
 * login becomes a session bound to the stealth owner fixed before it. This version has one
 * login, the messenger widget:
 *
 * `POST /v1/oauth/messenger/verify` `{ auth, stealthOwner, id? }` → SessionResponse
 *
 * 1. Without `MESSENGER_BOT_TOKEN` the route answers 400 `unsupported` whatever the body (the
 *    code the spec uses for a feature this instance is not configured for), and `/v1/info` does
 *    not list messenger.
 * 2. The body is decoded (`MessengerVerifyRequest`): a malformed one, a missing `hash` included,
 *    is 400 `bad_request`.
 * 3. The widget payload is verified (messenger.ts): a hash that does not match the bot's key, an
 *    `auth_date` older than `MESSENGER_AUTH_MAX_AGE_SECONDS` or in the future are 401
 *    `invalid_session`: no session can be made of it, and the remedy is to log in again.
 * 4. Each payload is single-use (spec §3): its `hash` is recorded with the session in one
 *    transaction and kept until the payload would be too old anyway; a replay is 401
 *    `invalid_session` too, and makes no session.
 * 5. The session is `{ platform: "messenger", userId: <widget id>, stealthOwner, ids: [id] or [] }`.
 *
 * Metric `attestor_logins_total{platform,outcome}` (`ok` or the refusal's code). Nothing of the
 * payload, the user, the key, the ids or the token reaches a log line or a metric.
 */
import type { HttpServerRequest } from "@effect/platform"
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, type HttpApiError, HttpApiGroup } from "@effect/platform"
import { Clock, Effect, Either, Metric, Option, Redacted } from "effect"
import {
  MessengerVerifyRequest,
  type Platform,
  type Session,
  SessionResponse
} from "../../schema/attestor.js"
import { type BadRequest, InvalidSession, Unavailable, Unsupported, Wire } from "../../schema/errors.js"
import { AttestorSettings } from "../config/attestor.js"
import { taggedOnce } from "../http/metrics.js"
import { decodeBody, withOutcome } from "../http/route.js"
import { verifyWidgetPayload, type WidgetKey, type WidgetRefusal, widgetKey } from "./messenger.js"
import { type CreatedSession, SESSION_STORE_UNAVAILABLE, SessionStore } from "./SessionStore.js"

export const messengerVerifyEndpoint = HttpApiEndpoint.post("messengerVerify", "/v1/oauth/messenger/verify")
  .setPayload(MessengerVerifyRequest)
  .addSuccess(SessionResponse)
  .addError(Wire.BadRequest)
  .addError(Wire.Unsupported)
  .addError(Wire.InvalidSession)
  .addError(Wire.RateLimited)
  .addError(Wire.Unavailable)

export class AttestorLoginsGroup extends HttpApiGroup.make("logins").add(messengerVerifyEndpoint) {}

export const loginOutcomes = Metric.counter("attestor_logins_total", {
  description: "Login verifications by platform and outcome: ok or the refusal's code",
  incremental: true
})

const loginOutcome = taggedOnce(loginOutcomes)

const recordLogin = (platform: Platform) => (outcome: string) =>
  Metric.increment(loginOutcome({ platform, outcome }))

export const MESSENGER_NOT_CONFIGURED = "messenger login is not configured on this attestor"
export const MESSENGER_REPLAYED = "this messenger login was already used: log in again"

const widgetRefusals: Readonly<Record<WidgetRefusal, string>> = {
  hash: "the messenger login could not be verified",
  expired: "the messenger login is too old: log in again",
  future: "the messenger login is dated in the future"
}

/** The answer to a login: the token once, and what it stands for. */
export const sessionResponse = (created: CreatedSession): SessionResponse => ({
  session: created.token,
  platform: created.platform,
  userId: created.userId,
  stealthOwner: created.stealthOwner,
  ids: created.ids,
  expiresAt: BigInt(created.expiresAt)
})

export interface MessengerLoginConfig {
  readonly key: WidgetKey
  readonly maxAgeSeconds: number
}

type VerifyError = BadRequest | Unsupported | InvalidSession | Unavailable | HttpApiError.HttpApiDecodeError

/** The messenger verify handler; `config` none when no bot token is configured. */
export const handleMessengerVerify =
  (config: Option.Option<MessengerLoginConfig>, store: SessionStore["Type"]) =>
  ({
    request
  }: {
    readonly request: HttpServerRequest.HttpServerRequest
  }): Effect.Effect<SessionResponse, VerifyError> =>
    withOutcome(recordLogin("messenger"))(
      Option.match(config, {
        onNone: () => Effect.fail<VerifyError>(new Unsupported({ message: MESSENGER_NOT_CONFIGURED })),
        onSome: ({ key, maxAgeSeconds }) =>
          Effect.gen(function* () {
            const body = yield* decodeBody(MessengerVerifyRequest)(request)
            const now = Math.floor((yield* Clock.currentTimeMillis) / 1000)
            const login = verifyWidgetPayload(body.auth, { key, now, maxAgeSeconds })
            if (Either.isLeft(login))
              return yield* Effect.fail(new InvalidSession({ message: widgetRefusals[login.left] }))
            const session: Session = {
              platform: "messenger",
              userId: login.right.userId,
              stealthOwner: body.stealthOwner,
              ids: body.id === undefined ? [] : [body.id]
            }
            const created = yield* store
              .create(session, {
                // The hash stands for the whole payload: it is the HMAC of every other field.
                singleUse: { key: `messenger:${body.auth.hash}`, until: login.right.acceptedUntil + 1 }
              })
              .pipe(
                Effect.catchTags({
                  LoginAlreadyUsed: () => Effect.fail(new InvalidSession({ message: MESSENGER_REPLAYED })),
                  SessionStoreError: () =>
                    Effect.fail(new Unavailable({ message: SESSION_STORE_UNAVAILABLE }))
                })
              )
            return sessionResponse(created)
          })
      })
    )

/** What the messenger login needs from the settings; none without a bot token. */
export const messengerLoginConfig = (
  settings: AttestorSettings["Type"]
): Option.Option<MessengerLoginConfig> =>
  Option.map(settings.messengerBotToken, (token) => ({
    key: widgetKey(Redacted.value(token)),
    maxAgeSeconds: settings.messengerAuthMaxAgeSeconds
  }))

/* Built against a view holding this group alone (see src/relayer/quote.ts): no import cycle with api.ts. */
const LoginsApiView = HttpApi.make("attestor").add(AttestorLoginsGroup)

export const AttestorLoginsLive = HttpApiBuilder.group(LoginsApiView, "logins", (handlers) =>
  Effect.gen(function* () {
    const settings = yield* AttestorSettings
    const store = yield* SessionStore
    return handlers.handleRaw("messengerVerify", handleMessengerVerify(messengerLoginConfig(settings), store))
  })
)
