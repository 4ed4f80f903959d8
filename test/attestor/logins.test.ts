/**
 * POST /v1/oauth/messenger/verify and the session checks of POST /v1/escrows through the
 * attestor's own server wiring over a mocked chain, no indexer and a real (embedded) database: a
 * widget payload signed with the bot token makes a session bound to the stealth owner and id sent
 * with it; every refusal with its status and code (bad hash, wrong token, stale or future
 * auth_date, replay, malformed bodies, messenger not configured, unknown and expired sessions,
 * index not ready); /v1/info lists messenger exactly when it is configured; the outcome metric;
 * and nothing of a login in logs or metrics. The escrow listing itself runs on the devnet
 * (test/e2e/attestor-escrows.test.ts).
 */
import { Schema } from "effect"
import type { Hex } from "viem"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { SessionResponse } from "../../schema/attestor.js"
import { signWidgetPayload, widgetKey } from "../../src/attestor/logins/messenger/messengerWidget.js"
import { newLoginSecret } from "../../src/client.js"
import { serverUrl } from "../../src/http/server.js"
import { embeddedAttestor, offlineAttestorEnv } from "../support/embeddedAttestor.js"

const BOT_TOKEN = "5550001:route-test-bot-token"
const STEALTH_OWNER = "0x90F79bf6EB2c4f870365E785982E1f101E93b906"
const ESCROW_ID: Hex = `0x${"ab".repeat(32)}`

const baseEnv = {
  ...offlineAttestorEnv,
  METRICS_TOKEN: "metrics-secret",
  HOST: "127.0.0.1",
  PORT: "0",
  TRUST_PROXY: "1",
  RATE_LIMIT_BURST: "100",
  RATE_LIMIT_PER_MINUTE: "1"
}

/** Every log line the servers write, to check that nothing of a login reaches one. */
const logLines: Array<string> = []

/** The attestor's server with its session store on an embedded database, no indexer. */
const serve = (env: Record<string, string>) => embeddedAttestor(env, logLines)

const configured = serve({ ...baseEnv, MESSENGER_BOT_TOKEN: BOT_TOKEN })
const unconfigured = serve(baseEnv)
const shortLived = serve({ ...baseEnv, MESSENGER_BOT_TOKEN: BOT_TOKEN, SESSION_TTL_SECONDS: "1" })
let base = ""
let bare = ""
let short = ""
beforeAll(async () => {
  base = await configured.runPromise(serverUrl)
  bare = await unconfigured.runPromise(serverUrl)
  short = await shortLived.runPromise(serverUrl)
})
afterAll(async () => {
  await Promise.all([configured.dispose(), unconfigured.dispose(), shortLived.dispose()])
})

let clients = 0
const post = (url: string, path: string, body: unknown) =>
  fetch(`${url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-forwarded-for": `198.51.100.${++clients}` },
    body: typeof body === "string" ? body : JSON.stringify(body)
  })
const verify = (body: unknown, url = base) => post(url, "/v1/oauth/messenger/verify", body)

const nowSeconds = () => Math.floor(Date.now() / 1000)
let users = 0
/** A fresh widget payload of a new user, signed with `token`. */
const widget = (overrides: { id?: number; auth_date?: number } = {}, token = BOT_TOKEN) =>
  signWidgetPayload(widgetKey(token), {
    id: overrides.id ?? 7_000_000 + ++users,
    first_name: "Ada",
    username: `ada_${users}`,
    auth_date: overrides.auth_date ?? nowSeconds() - 5
  })

const expectRefusal = async (res: Response, status: number, code: string) => {
  expect({ status: res.status, body: await res.json() }).toMatchObject({ status, body: { code } })
}

const metricsText = async () =>
  (await fetch(`${base}/v1/metrics`, { headers: { authorization: "Bearer metrics-secret" } })).text()
const logins = async (outcome: string) => {
  const match = new RegExp(
    `^attestor_logins_total\\{(?=[^}]*platform="messenger")(?=[^}]*outcome="${outcome}")[^}]*\\} (\\d+)$`,
    "m"
  ).exec(await metricsText())
  return match?.[1] === undefined ? 0 : Number(match[1])
}

describe("POST /v1/oauth/messenger/verify", () => {
  it("makes a session of a good widget payload, bound to the stealth owner and id sent with it", async () => {
    const auth = widget()
    const before = nowSeconds()
    const res = await verify({ auth, stealthOwner: STEALTH_OWNER.toLowerCase(), id: ESCROW_ID })
    expect(res.status).toBe(200)
    const body = (await res.json()) as Record<string, unknown>
    expect(() => Schema.decodeUnknownSync(SessionResponse)(body)).not.toThrow()
    expect(body).toMatchObject({
      platform: "messenger",
      userId: String(auth.id),
      stealthOwner: STEALTH_OWNER,
      ids: [ESCROW_ID]
    })
    expect(body.session).toMatch(/^[A-Za-z0-9_-]{43}$/)
    const expiresAt = Number(body.expiresAt)
    expect(expiresAt).toBeGreaterThanOrEqual(before + 900)
    expect(expiresAt).toBeLessThanOrEqual(nowSeconds() + 900)
  })

  it("without id the session is for every escrow of the user (ids: [])", async () => {
    const res = await verify({ auth: widget(), stealthOwner: STEALTH_OWNER })
    expect(res.status).toBe(200)
    expect(await res.json()).toMatchObject({ ids: [] })
  })

  it("each payload is single-use: a replay gets 401 invalid_session, also with another key or id", async () => {
    const auth = widget()
    expect((await verify({ auth, stealthOwner: STEALTH_OWNER })).status).toBe(200)
    await expectRefusal(await verify({ auth, stealthOwner: STEALTH_OWNER }), 401, "invalid_session")
    const otherKey = "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65"
    await expectRefusal(await verify({ auth, stealthOwner: otherKey, id: ESCROW_ID }), 401, "invalid_session")
    // The same fields sent in another order are the same payload.
    const reordered = Object.fromEntries(Object.entries(auth).reverse())
    await expectRefusal(
      await verify({ auth: reordered, stealthOwner: STEALTH_OWNER }),
      401,
      "invalid_session"
    )
  })

  it("refuses forged, foreign, stale and future payloads with 401 invalid_session", async () => {
    const good = widget()
    await expectRefusal(
      await verify({ auth: { ...good, id: good.id + 1 }, stealthOwner: STEALTH_OWNER }),
      401,
      "invalid_session"
    )
    await expectRefusal(
      await verify({ auth: { ...good, username: "mallory" }, stealthOwner: STEALTH_OWNER }),
      401,
      "invalid_session"
    )
    await expectRefusal(
      await verify({ auth: widget({}, "5550002:another-bot"), stealthOwner: STEALTH_OWNER }),
      401,
      "invalid_session"
    )
    await expectRefusal(
      await verify({ auth: widget({ auth_date: nowSeconds() - 86_400 - 60 }), stealthOwner: STEALTH_OWNER }),
      401,
      "invalid_session"
    )
    // MESSENGER_AUTH_MAX_AGE_SECONDS is 300 by default: a payload seen by someone else is theirs
    // to redeem for five minutes at most.
    await expectRefusal(
      await verify({ auth: widget({ auth_date: nowSeconds() - 301 }), stealthOwner: STEALTH_OWNER }),
      401,
      "invalid_session"
    )
    await expectRefusal(
      await verify({ auth: widget({ auth_date: nowSeconds() + 3_600 }), stealthOwner: STEALTH_OWNER }),
      401,
      "invalid_session"
    )
    // None of these used the good payload up.
    expect((await verify({ auth: good, stealthOwner: STEALTH_OWNER })).status).toBe(200)
    // Four minutes old is still fresh.
    expect(
      (await verify({ auth: widget({ auth_date: nowSeconds() - 240 }), stealthOwner: STEALTH_OWNER })).status
    ).toBe(200)
  })

  it("with a loginChallenge, the session answers only to its loginSecret", async () => {
    const { loginSecret, loginChallenge } = newLoginSecret()
    const res = await verify({ auth: widget(), stealthOwner: STEALTH_OWNER, loginChallenge })
    expect(res.status).toBe(200)
    const { session } = (await res.json()) as { session: string }
    await expectRefusal(await post(base, "/v1/escrows", { session }), 401, "invalid_session")
    await expectRefusal(
      await post(base, "/v1/escrows", { session, loginSecret: newLoginSecret().loginSecret }),
      401,
      "invalid_session"
    )
    // Past the session check: this wiring has no index, so the answer is 503, not 401.
    await expectRefusal(await post(base, "/v1/escrows", { session, loginSecret }), 503, "unavailable")
    await expectRefusal(
      await verify({ auth: widget(), stealthOwner: STEALTH_OWNER, loginChallenge: "0x12" }),
      400,
      "bad_request"
    )
  })

  it("refuses malformed bodies with 400 bad_request", async () => {
    const { hash: _, ...withoutHash } = widget()
    const good = widget()
    const cases: Array<unknown> = [
      { auth: withoutHash, stealthOwner: STEALTH_OWNER },
      { auth: { ...good, hash: good.hash.toUpperCase() }, stealthOwner: STEALTH_OWNER },
      { auth: { ...good, id: String(good.id) }, stealthOwner: STEALTH_OWNER },
      { auth: good },
      { auth: good, stealthOwner: "0x1234" },
      // A mixed-case address must carry a valid checksum.
      { auth: good, stealthOwner: "0x90F79bf6EB2c4f870365E785982E1f101E93B906" },
      { auth: good, stealthOwner: STEALTH_OWNER, id: "0x1234" },
      { auth: good, stealthOwner: STEALTH_OWNER, id: [ESCROW_ID] },
      { stealthOwner: STEALTH_OWNER },
      "[]",
      "{"
    ]
    for (const body of cases) await expectRefusal(await verify(body), 400, "bad_request")
    // Still unused: a malformed request consumes nothing.
    expect((await verify({ auth: good, stealthOwner: STEALTH_OWNER })).status).toBe(200)
  })

  it("counts outcomes in attestor_logins_total{platform,outcome}", async () => {
    const before = { ok: await logins("ok"), refused: await logins("invalid_session") }
    const auth = widget()
    await verify({ auth, stealthOwner: STEALTH_OWNER })
    await verify({ auth, stealthOwner: STEALTH_OWNER })
    expect(await logins("ok")).toBe(before.ok + 1)
    expect(await logins("invalid_session")).toBe(before.refused + 1)
    expect(await logins("bad_request")).toBeGreaterThan(0)
  })

  it("writes nothing of a login to logs or metrics", async () => {
    const auth = widget({ id: 424_242_424 })
    const res = await verify({ auth, stealthOwner: STEALTH_OWNER, id: ESCROW_ID })
    const { session } = (await res.json()) as { session: string }
    const text = `${logLines.join("\n")}\n${await metricsText()}`
    expect(logLines.some((line) => line.includes("/v1/oauth/messenger/verify"))).toBe(true)
    for (const secret of [
      session,
      auth.hash,
      String(auth.id),
      auth.username as string,
      STEALTH_OWNER,
      STEALTH_OWNER.toLowerCase(),
      ESCROW_ID,
      BOT_TOKEN
    ])
      expect(text).not.toContain(secret)
  })
})

describe("messenger not configured", () => {
  it("answers 400 unsupported whatever the body, and /v1/info lists no messenger", async () => {
    await expectRefusal(
      await verify({ auth: widget(), stealthOwner: STEALTH_OWNER }, bare),
      400,
      "unsupported"
    )
    await expectRefusal(await verify({ nothing: true }, bare), 400, "unsupported")
    const info = (await (await fetch(`${bare}/v1/info`)).json()) as { platforms: Array<string> }
    expect(info.platforms).toEqual([])
  })

  it("with MESSENGER_BOT_TOKEN set, /v1/info lists messenger", async () => {
    const info = (await (await fetch(`${base}/v1/info`)).json()) as { platforms: Array<string> }
    expect(info.platforms).toEqual(["messenger"])
  })
})

describe("POST /v1/escrows: sessions", () => {
  const escrows = (body: unknown, url = base) => post(url, "/v1/escrows", body)
  const login = async (url = base) => {
    const res = await verify({ auth: widget(), stealthOwner: STEALTH_OWNER }, url)
    expect(res.status).toBe(200)
    return (await res.json()) as { session: string; expiresAt: string }
  }

  it("refuses an unknown session with 401 invalid_session", async () => {
    await expectRefusal(
      await escrows({ session: "no-such-session-token-0123456789" }),
      401,
      "invalid_session"
    )
    // Sessions belong to the attestor that made them.
    const { session } = await login(short)
    await expectRefusal(await escrows({ session }), 401, "invalid_session")
  })

  it("refuses malformed bodies with 400 bad_request", async () => {
    for (const body of [
      {},
      { session: "too-short" },
      { session: "with spaces in the token 0123" },
      { session: "with/slash/in/the/token/0123" },
      { session: 1234567890123456 },
      { session: "x".repeat(513) },
      "[]"
    ])
      await expectRefusal(await escrows(body), 400, "bad_request")
  })

  it("answers 503 unavailable to a valid session while the index is not ready", async () => {
    const { session } = await login()
    await expectRefusal(await escrows({ session }), 503, "unavailable")
  })

  it("refuses an expired session with 401 invalid_session (SESSION_TTL_SECONDS=1)", async () => {
    const { session, expiresAt } = await login(short)
    await new Promise((resolve) => setTimeout(resolve, Number(expiresAt) * 1000 - Date.now() + 50))
    await expectRefusal(await escrows({ session }, short), 401, "invalid_session")
  })
})
