/**
 * Messenger login-widget verification (src/attestor/logins/messenger/messengerWidget.ts) against the Telegram Login
 * Widget rule written out again here with node:crypto: a good payload, each field tampered with,
 * the wrong bot token, auth_date at and past the age limit and in the future, and payloads the
 * request schema refuses before any check (missing or malformed hash).
 */
import { createHash, createHmac } from "node:crypto"
import { Either, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { type MessengerAuth, MessengerVerifyRequest } from "../../schema/attestor.js"
import {
  dataCheckString,
  MESSENGER_AUTH_CLOCK_SKEW_SECONDS,
  MESSENGER_SINGLE_USE_CLOCK_TOLERANCE_SECONDS,
  signWidgetPayload,
  verifyWidgetPayload,
  widgetKey
} from "../../src/attestor/logins/messenger/messengerWidget.js"

const BOT_TOKEN = "123456789:AAE-test-bot-token-for-widget-checks"
const NOW = 1_700_000_000
const DAY = 86_400

/** https://core.telegram.org/widgets/login#checking-authorization, independently of the module. */
const telegramHash = (botToken: string, fields: Record<string, string | number>): string => {
  const check = Object.keys(fields)
    .filter((k) => k !== "hash")
    .sort()
    .map((k) => `${k}=${fields[k]}`)
    .join("\n")
  const secret = createHash("sha256").update(botToken).digest()
  return createHmac("sha256", secret).update(check).digest("hex")
}

const fields = {
  id: 987654321,
  first_name: "Ada",
  last_name: "Lovelace",
  username: "ada_l",
  photo_url: "https://t.example/i/userpic/320/ada.jpg",
  auth_date: NOW - 30
}

const signed = (f: Record<string, string | number>, token = BOT_TOKEN): MessengerAuth =>
  ({ ...f, hash: telegramHash(token, f) }) as MessengerAuth

const check = (auth: MessengerAuth, options: { now?: number; maxAgeSeconds?: number; token?: string } = {}) =>
  verifyWidgetPayload(auth, {
    key: widgetKey(options.token ?? BOT_TOKEN),
    now: options.now ?? NOW,
    maxAgeSeconds: options.maxAgeSeconds ?? DAY
  })

describe("messenger widget payloads", () => {
  it("accepts a payload signed with the bot's key, and names the widget's numeric id", () => {
    expect(check(signed(fields))).toEqual(
      Either.right({
        userId: "987654321",
        singleUseUntil: NOW - 30 + DAY + 1 + MESSENGER_SINGLE_USE_CLOCK_TOLERANCE_SECONDS
      })
    )
  })

  it("signs the sorted key=value lines without hash, as the widget does", () => {
    expect(dataCheckString(signed(fields))).toBe(
      [
        `auth_date=${NOW - 30}`,
        "first_name=Ada",
        "id=987654321",
        "last_name=Lovelace",
        "photo_url=https://t.example/i/userpic/320/ada.jpg",
        "username=ada_l"
      ].join("\n")
    )
    // Absent optional fields are not signed; the module's signer agrees with the rule.
    const minimal = { id: 42, auth_date: NOW }
    expect(signWidgetPayload(widgetKey(BOT_TOKEN), minimal)).toEqual(signed(minimal))
    expect(check(signed(minimal))).toMatchObject(
      Either.right({
        userId: "42",
        singleUseUntil: NOW + DAY + 1 + MESSENGER_SINGLE_USE_CLOCK_TOLERANCE_SECONDS
      })
    )
  })

  it.each([
    ["id", { id: 987654322 }],
    ["first_name", { first_name: "Eve" }],
    ["last_name", { last_name: "" }],
    ["username", { username: "eve" }],
    ["photo_url", { photo_url: "https://t.example/eve.jpg" }],
    ["auth_date", { auth_date: NOW - 29 }]
  ])("refuses a payload whose %s was changed after signing", (_, change) => {
    expect(check({ ...signed(fields), ...change })).toEqual(Either.left("hash"))
  })

  it("refuses a payload with a field added or removed after signing", () => {
    const { username: _, ...withoutUsername } = signed(fields)
    expect(check(withoutUsername as MessengerAuth)).toEqual(Either.left("hash"))
    const { last_name: __, ...partial } = fields
    expect(check({ ...signed(partial), last_name: "Lovelace" })).toEqual(Either.left("hash"))
  })

  it("refuses a payload signed with another bot's token, or a hash of another payload", () => {
    expect(check(signed(fields, "987:another-bot-token"))).toEqual(Either.left("hash"))
    expect(check(signed(fields), { token: "987:another-bot-token" })).toEqual(Either.left("hash"))
    const other = signed({ ...fields, id: 1 })
    expect(check({ ...signed(fields), hash: other.hash })).toEqual(Either.left("hash"))
    expect(check({ ...signed(fields), hash: "0".repeat(64) })).toEqual(Either.left("hash"))
  })

  it("accepts auth_date exactly the age limit old, refuses one second more", () => {
    const at = signed({ ...fields, auth_date: NOW - DAY })
    expect(Either.isRight(check(at))).toBe(true)
    expect(check(signed({ ...fields, auth_date: NOW - DAY - 1 }))).toEqual(Either.left("expired"))
    expect(check(signed({ ...fields, auth_date: 0 }))).toEqual(Either.left("expired"))
    // The limit is a setting.
    expect(check(signed({ ...fields, auth_date: NOW - 61 }), { maxAgeSeconds: 60 })).toEqual(
      Either.left("expired")
    )
  })

  it("refuses an auth_date more than the allowed skew in the future", () => {
    const skew = MESSENGER_AUTH_CLOCK_SKEW_SECONDS
    expect(Either.isRight(check(signed({ ...fields, auth_date: NOW + skew })))).toBe(true)
    expect(check(signed({ ...fields, auth_date: NOW + skew + 1 }))).toEqual(Either.left("future"))
  })

  it("checks the hash before the dates: a forged stale payload is refused for its hash", () => {
    expect(check({ ...signed({ ...fields, auth_date: 1 }), id: 5 })).toEqual(Either.left("hash"))
  })

  it("the request schema refuses a payload without hash, with a malformed hash or id", () => {
    const decode = Schema.decodeUnknownEither(MessengerVerifyRequest)
    const body = (auth: unknown) => ({ auth, stealthOwner: "0x90f79bf6eb2c4f870365e785982e1f101e93b906" })
    const { hash, ...withoutHash } = signed(fields)
    expect(Either.isRight(decode(body({ ...withoutHash, hash })))).toBe(true)
    expect(Either.isLeft(decode(body(withoutHash)))).toBe(true)
    expect(Either.isLeft(decode(body({ ...withoutHash, hash: "" })))).toBe(true)
    expect(Either.isLeft(decode(body({ ...withoutHash, hash: hash.toUpperCase() })))).toBe(true)
    expect(Either.isLeft(decode(body({ ...withoutHash, hash: hash.slice(2) })))).toBe(true)
    expect(Either.isLeft(decode(body({ ...withoutHash, hash, id: "987654321" })))).toBe(true)
    expect(Either.isLeft(decode(body({ ...withoutHash, hash, id: -1 })))).toBe(true)
    expect(Either.isLeft(decode(body({ ...withoutHash, hash, auth_date: undefined })))).toBe(true)
  })
})
