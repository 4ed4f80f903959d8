/**
 * The messenger widget's login (docs/attestor.md §3, §4 "OAuth start / callback / verify rules",
 * §5): a verified payload becomes a session bound to the stealth owner fixed before it.
 *
 * `POST /v1/oauth/messenger/verify` `{ auth, stealthOwner, id?, loginChallenge? }` → SessionResponse
 *
 * 1. Without `MESSENGER_BOT_TOKEN` the route answers 400 `unsupported` whatever the body (the
 *    code docs/attestor.md uses for a feature this instance is not configured for; `LoginOffered`, before
 *    the body is read), and `/v1/info` does not list messenger.
 * 2. The body is decoded (`MessengerVerifyRequest`): a malformed one, a missing `hash` included,
 *    is 400 `bad_request`.
 * 3. The widget payload is verified (messengerWidget.ts): a hash that does not match the bot's key, an
 *    `auth_date` older than `MESSENGER_AUTH_MAX_AGE_SECONDS` or in the future are 401
 *    `invalid_session`: no session can be made of it, and the remedy is to log in again.
 * 4. Each payload is single-use (docs/attestor.md §3): its `hash` is recorded with the session in one
 *    transaction and kept until the payload is too old on every replica, whose clocks may run up to
 *    `MESSENGER_SINGLE_USE_CLOCK_TOLERANCE_SECONDS` apart (messengerWidget.ts); a replay is 401
 *    `invalid_session` too, and makes no session. So is a payload whose `auth_date` is in an
 *    earlier second than the user's last contest (docs/protocol.md §10 "Contests"): whoever kept
 *    it from before cannot redeem it after.
 * 5. The session is `{ platform: "messenger", userId: <widget id>, stealthOwner, ids: [id] or [] }`,
 *    with the `loginChallenge` when one was sent (optional here in both `LOGIN_CHALLENGE` modes: the
 *    session comes back in the answer to the caller that asked, docs/protocol.md §10).
 *
 * Metric `attestor_logins_total{platform,outcome}` (`ok` or the refusal's code). Nothing of the
 * payload, the user, the key, the ids or the token reaches a log line or a metric.
 */
import { Context, Effect, Either, Layer, Option, Redacted } from "effect"
import type { MessengerVerifyRequest, Session, SessionResponse } from "../../../../schema/attestor.js"
import { InvalidSession, Unavailable, Unsupported } from "../../../../schema/errors.js"
import { nowSeconds } from "../../../clock.js"
import type { AttestorSettingsShape } from "../../../config/attestor.js"
import type { MessengerVerifyError } from "../api.js"
import { loginNotConfigured, sessionResponse } from "../loginAnswers.js"
import { SESSION_STORE_UNAVAILABLE, SessionStore } from "../SessionStore.js"
import { verifyWidgetPayload, type WidgetKey, type WidgetRefusal, widgetKey } from "./messengerWidget.js"

const MESSENGER_REPLAYED = "this messenger login was already used: log in again"

const widgetRefusals: Readonly<Record<WidgetRefusal, string>> = {
  hash: "the messenger login could not be verified",
  expired: "the messenger login is too old: log in again",
  future: "the messenger login is dated in the future"
}

export interface MessengerLoginConfig {
  readonly key: WidgetKey
  readonly maxAgeSeconds: number
}

/** Verifies a decoded messenger login and makes its session. */
const verifyMessengerLogin =
  ({ key, maxAgeSeconds }: MessengerLoginConfig, store: SessionStore["Type"]) =>
  (body: MessengerVerifyRequest): Effect.Effect<SessionResponse, MessengerVerifyError> =>
    Effect.gen(function* () {
      const now = yield* nowSeconds
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
          // Its expiry is the payload's own (`auth_date`-based), not this replica's reading of now.
          singleUse: { key: `messenger:${body.auth.hash}`, until: login.right.singleUseUntil },
          loginChallenge: body.loginChallenge,
          // The payload was signed when the user logged in: one from before a contest is refused.
          startedAt: body.auth.auth_date
        })
        .pipe(
          Effect.catchTags({
            LoginAlreadyUsed: () => Effect.fail(new InvalidSession({ message: MESSENGER_REPLAYED })),
            LoginStartedBeforeContest: (e) => Effect.fail(new InvalidSession({ message: e.message })),
            SessionStoreError: () => Effect.fail(new Unavailable({ message: SESSION_STORE_UNAVAILABLE }))
          })
        )
      return sessionResponse(created)
    })

/** What the messenger login needs from the settings; none without a bot token. */
export const messengerLoginConfig = (settings: AttestorSettingsShape): Option.Option<MessengerLoginConfig> =>
  Option.map(settings.messengerBotToken, (token) => ({
    key: widgetKey(Redacted.value(token)),
    maxAgeSeconds: settings.messengerAuthMaxAgeSeconds
  }))

export interface MessengerLoginsShape {
  readonly verify: (request: MessengerVerifyRequest) => Effect.Effect<SessionResponse, MessengerVerifyError>
}

export class MessengerLogins extends Context.Tag("MessengerLogins")<MessengerLogins, MessengerLoginsShape>() {
  static readonly layer = (config: MessengerLoginConfig): Layer.Layer<MessengerLogins, never, SessionStore> =>
    Layer.effect(
      MessengerLogins,
      Effect.map(SessionStore, (store) => ({ verify: verifyMessengerLogin(config, store) }))
    )

  /** No `MESSENGER_BOT_TOKEN`: `LoginOffered` refuses the route first, with this same answer. */
  static readonly disabled: Layer.Layer<MessengerLogins> = Layer.succeed(MessengerLogins, {
    verify: () => Effect.fail(new Unsupported({ message: loginNotConfigured("messenger") }))
  })
}
