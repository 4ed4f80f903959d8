/**
 * The messenger login widget (docs/attestor.md §1 "login widget hash", §3): the widget hands the
 * page a payload `{ id, first_name?, last_name?, username?, photo_url?, auth_date, hash }` signed
 * the way the Telegram Login Widget signs it:
 *
 * ```
 * data_check_string = every received field except hash, as key=value, sorted by key, joined by "\n"
 * secret_key        = SHA-256(bot token)
 * hash              = hex(HMAC-SHA256(secret_key, data_check_string))
 * ```
 *
 * The recomputed HMAC is compared with `hash` by `timingSafeEqual`. A payload is accepted while
 * `now - auth_date <= MESSENGER_AUTH_MAX_AGE_SECONDS` (300 s by default) and `auth_date` is not
 * more than `MESSENGER_AUTH_CLOCK_SKEW_SECONDS` in the future. The user's immutable id is the
 * widget's numeric `id`; names, username and photo are signed but not used.
 *
 * Written on node:crypto rather than `@telegram-auth/server`: that package (1.0.5) marks its
 * validator deprecated and unmaintained, reads the wall clock itself (no injectable clock) and
 * switches to a different key derivation when a `user` field is present. The algorithm is a few
 * lines, and the fields come from `MessengerAuth` (schema/attestor.ts), which keeps exactly the
 * widget's fields.
 *
 * Pure functions of the key, the payload and the time: the route (MessengerLogins.ts) adds single use.
 */
import { createHash, createHmac, timingSafeEqual } from "node:crypto"
import { Either } from "effect"
import type { MessengerAuth } from "../../../../schema/attestor.js"

/** How far in the future an `auth_date` may be: the messenger's clock and ours may differ a little. */
export const MESSENGER_AUTH_CLOCK_SKEW_SECONDS = 60

/**
 * How long a used payload's record outlives the payload's last accepted second (docs/attestor.md
 * §4 "Messenger verify"): the replica that prunes it may run ahead of one that still checks the
 * payload's age, and the record must be there for every replica whose clock is at most this far
 * behind.
 */
export const MESSENGER_SINGLE_USE_CLOCK_TOLERANCE_SECONDS = 300

/** The HMAC key of a bot's widget payloads: SHA-256 of the bot token. */
export type WidgetKey = Uint8Array & { readonly WidgetKey: unique symbol }

export const widgetKey = (botToken: string): WidgetKey =>
  createHash("sha256").update(botToken, "utf8").digest() as Uint8Array as WidgetKey

type WidgetFields = Readonly<Record<string, string | number | undefined>>

/** The signed fields, as `key=value` lines sorted by key; `hash` itself is not signed. */
export const dataCheckString = (auth: WidgetFields): string =>
  Object.entries(auth)
    .filter(([key, value]) => key !== "hash" && value !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([key, value]) => `${key}=${String(value)}`)
    .join("\n")

const hmac = (key: WidgetKey, auth: WidgetFields): Buffer =>
  createHmac("sha256", key).update(dataCheckString(auth), "utf8").digest()

/**
 * The payload a widget of the key's bot would hand over for these fields: what tests and local
 * doubles of the widget sign with.
 */
export const signWidgetPayload = (key: WidgetKey, fields: Omit<MessengerAuth, "hash">): MessengerAuth => ({
  ...fields,
  hash: hmac(key, fields).toString("hex")
})

/** Why a payload is refused: a hash that does not match, too old, or dated in the future. */
export type WidgetRefusal = "hash" | "expired" | "future"

export interface WidgetLogin {
  /** The immutable numeric user id, canonical decimal. */
  readonly userId: string
  /**
   * When its single-use record may go: the first second at which every replica whose clock is
   * behind by at most `MESSENGER_SINGLE_USE_CLOCK_TOLERANCE_SECONDS` refuses it as too old.
   */
  readonly singleUseUntil: number
}

export interface WidgetCheck {
  readonly key: WidgetKey
  /** Unix seconds. */
  readonly now: number
  readonly maxAgeSeconds: number
}

/**
 * Checks a payload. The hash comes first, so nothing about the dates of a forged payload is
 * revealed; its comparison takes the same time wherever the first differing byte is.
 */
export const verifyWidgetPayload = (
  auth: MessengerAuth,
  { key, now, maxAgeSeconds }: WidgetCheck
): Either.Either<WidgetLogin, WidgetRefusal> => {
  const expected = hmac(key, auth)
  // The schema admits only 64 lowercase hex digits, so both sides are 32 bytes.
  const given = Buffer.from(auth.hash, "hex")
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return Either.left("hash")
  if (now - auth.auth_date > maxAgeSeconds) return Either.left("expired")
  if (auth.auth_date - now > MESSENGER_AUTH_CLOCK_SKEW_SECONDS) return Either.left("future")
  // One second past the last one it is accepted in, and the replicas' clock tolerance.
  return Either.right({
    userId: String(auth.id),
    singleUseUntil: auth.auth_date + maxAgeSeconds + 1 + MESSENGER_SINGLE_USE_CLOCK_TOLERANCE_SECONDS
  })
}
