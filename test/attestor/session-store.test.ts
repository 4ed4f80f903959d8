/**
 * The attestor's SessionStore on a real database (PGlite, and PostgreSQL when DATABASE_URL is
 * set): tokens of the SessionToken alphabet, only their SHA-256 in the database, sessions read
 * back exactly, expiry on the TestClock at the second it is due, single-use logins, a contest
 * ending the user's other sessions, opportunistic
 * pruning of expired rows, and sessions that survive a restart of an on-disk database.
 */
import { createHash, randomBytes } from "node:crypto"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { SqlClient } from "@effect/sql/SqlClient"
import { describe, expect, it, layer, type Vitest } from "@effect/vitest"
import { Clock, Duration, Effect, Exit, Layer, Option, Schema, TestClock } from "effect"
import { LoginChallenge, LoginSecret, type Session, SessionToken } from "../../schema/attestor.js"
import { Address, Bytes32 } from "../../schema/primitives.js"
import {
  authenticate,
  LOGIN_SECRET_MISSING,
  LOGIN_SECRET_REFUSED,
  LOGIN_SECRET_UNEXPECTED,
  LoginAlreadyUsed,
  makeSessionStore,
  SessionStore,
  storageDigest
} from "../../src/attestor/SessionStore.js"
import { migrate } from "../../src/store/migrations.js"
import { storageLayer } from "../../src/store/sql.js"
import { testDatabases } from "../support/database.js"

const owner = Schema.decodeSync(Address)("0x90f79bf6eb2c4f870365e785982e1f101e93b906")
const id = (n: number) => Schema.decodeSync(Bytes32)(`0x${n.toString(16).padStart(64, "0")}`)

let users = 0
const session = (ids: ReadonlyArray<number> = []): Session => ({
  platform: "messenger",
  userId: String(500_000_000 + ++users),
  stealthOwner: owner,
  ids: ids.map(id)
})

const sha256 = (s: string) => createHash("sha256").update(s, "utf8").digest("hex")

const TTL = 900

/** The TestClock's now in unix seconds; the tests of one database share it, and it only moves forward. */
const now = Effect.map(Clock.currentTimeMillis, (ms) => Math.floor(ms / 1000))

type Methods = Vitest.MethodsNonLive<SqlClient>

const withMigrations = (database: ReturnType<typeof testDatabases>[number]) =>
  Layer.effectDiscard(migrate).pipe(Layer.provideMerge(database.layer))

const creates = (it: Methods) => {
  it.effect("creates a session with a fresh URL-safe token and reads it back", () =>
    Effect.gen(function* () {
      const store = yield* makeSessionStore({ ttlSeconds: TTL })
      yield* TestClock.adjust(Duration.seconds(1_700_000_000))
      const start = yield* now
      const wanted = session([1, 2])
      const created = yield* store.create(wanted)
      expect(created.token).toMatch(/^[A-Za-z0-9_-]{43}$/)
      expect(() => Schema.decodeSync(SessionToken)(created.token)).not.toThrow()
      expect(created.expiresAt).toBe(start + TTL)
      expect(created).toMatchObject(wanted)
      expect(yield* store.read(created.token)).toEqual(Option.some({ ...wanted, expiresAt: start + TTL }))
      // Another session of the same user has another token.
      const again = yield* store.create(wanted)
      expect(again.token).not.toBe(created.token)
      expect(Option.isSome(yield* store.read(again.token))).toBe(true)
    })
  )

  it.effect("stores only the SHA-256 of the token", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient
      const store = yield* makeSessionStore({ ttlSeconds: TTL })
      const created = yield* store.create(session())
      expect(storageDigest(created.token)).toBe(sha256(created.token))
      const rows = yield* sql<Record<string, unknown>>`
        SELECT * FROM attestor_sessions WHERE token_hash = ${sha256(created.token)}`
      expect(rows).toHaveLength(1)
      expect(JSON.stringify(rows)).not.toContain(created.token)
      const asIs = yield* sql<{ n: string }>`
        SELECT count(*) AS n FROM attestor_sessions WHERE token_hash = ${created.token}`
      expect(Number(asIs[0]?.n)).toBe(0)
    })
  )

  it.effect("an unknown token reads as none, and authenticate refuses it with invalid_session", () =>
    Effect.gen(function* () {
      const store = yield* makeSessionStore({ ttlSeconds: TTL })
      const created = yield* store.create(session())
      const unknown = Schema.decodeSync(SessionToken)("unknown-token-0123456789")
      expect(yield* store.read(unknown)).toEqual(Option.none())
      // One character changed is another token.
      const last = created.token.at(-1) === "A" ? "B" : "A"
      const altered = Schema.decodeSync(SessionToken)(`${created.token.slice(0, -1)}${last}`)
      expect(yield* store.read(altered)).toEqual(Option.none())
      const refused = yield* Effect.exit(
        authenticate(unknown, undefined).pipe(Effect.provideService(SessionStore, store))
      )
      expect(refused).toEqual(Exit.fail(expect.objectContaining({ _tag: "InvalidSession" })))
      const accepted = yield* authenticate(created.token, undefined).pipe(
        Effect.provideService(SessionStore, store)
      )
      expect(accepted.userId).toBe(created.userId)
    })
  )
}

/** A login secret and its challenge, as a client draws them (docs/protocol.md §10 "Login challenge"). */
const drawSecret = () => {
  const secret = Schema.decodeSync(LoginSecret)(`0x${randomBytes(32).toString("hex")}`)
  const challenge = Schema.decodeSync(LoginChallenge)(
    `0x${createHash("sha256")
      .update(Buffer.from(secret.slice(2), "hex"))
      .digest("hex")}`
  )
  return { secret, challenge }
}

const challenges = (it: Methods) => {
  it.effect("a session made with a login challenge answers only to that login's secret", () =>
    Effect.gen(function* () {
      const store = yield* makeSessionStore({ ttlSeconds: TTL })
      const { secret, challenge } = drawSecret()
      const created = yield* store.create(session([3]), { loginChallenge: challenge })
      const read = yield* store.read(created.token)
      expect(Option.map(read, (s) => s.loginChallenge)).toEqual(Option.some(challenge))
      const as = (loginSecret: LoginSecret | undefined) =>
        Effect.exit(authenticate(created.token, loginSecret).pipe(Effect.provideService(SessionStore, store)))
      // The token alone, as a login CSRF hands it over, is refused; so is another client's secret.
      expect(yield* as(undefined)).toEqual(
        Exit.fail(expect.objectContaining({ _tag: "InvalidSession", message: LOGIN_SECRET_MISSING }))
      )
      expect(yield* as(drawSecret().secret)).toEqual(
        Exit.fail(expect.objectContaining({ _tag: "InvalidSession", message: LOGIN_SECRET_REFUSED }))
      )
      // The secret is hashed, not compared: its challenge is not a secret.
      expect(yield* as(challenge as unknown as LoginSecret)).toEqual(
        Exit.fail(expect.objectContaining({ _tag: "InvalidSession" }))
      )
      const accepted = yield* as(secret)
      expect(Exit.isSuccess(accepted) && accepted.value.userId).toBe(created.userId)
    })
  )

  it.effect(
    "a session made without a challenge refuses a secret: it is not the login this client started",
    () =>
      Effect.gen(function* () {
        const store = yield* makeSessionStore({ ttlSeconds: TTL })
        const created = yield* store.create(session())
        const refused = yield* Effect.exit(
          authenticate(created.token, drawSecret().secret).pipe(Effect.provideService(SessionStore, store))
        )
        expect(refused).toEqual(
          Exit.fail(expect.objectContaining({ _tag: "InvalidSession", message: LOGIN_SECRET_UNEXPECTED }))
        )
      })
  )
}

const expires = (it: Methods) => {
  it.effect("a session is valid until the last millisecond before expiresAt, and gone from then on", () =>
    Effect.gen(function* () {
      const store = yield* makeSessionStore({ ttlSeconds: TTL })
      // On a whole second, so the last millisecond before expiry can be tried.
      const ms = yield* Clock.currentTimeMillis
      yield* TestClock.adjust(Duration.millis(1_000 - (ms % 1_000)))
      const start = yield* now
      const created = yield* store.create(session([7]))
      expect(created.expiresAt).toBe(start + TTL)
      yield* TestClock.adjust(Duration.seconds(TTL - 1))
      expect(Option.isSome(yield* store.read(created.token))).toBe(true)
      yield* TestClock.adjust(Duration.millis(999))
      expect(Option.isSome(yield* store.read(created.token))).toBe(true)
      yield* TestClock.adjust(Duration.millis(1))
      expect(yield* store.read(created.token)).toEqual(Option.none())
      const refused = yield* Effect.exit(
        authenticate(created.token, undefined).pipe(Effect.provideService(SessionStore, store))
      )
      expect(refused).toEqual(Exit.fail(expect.objectContaining({ _tag: "InvalidSession" })))
    })
  )

  it.effect("a short SESSION_TTL_SECONDS makes short sessions", () =>
    Effect.gen(function* () {
      const store = yield* makeSessionStore({ ttlSeconds: 2 })
      const created = yield* store.create(session())
      expect(created.expiresAt).toBe((yield* now) + 2)
      yield* TestClock.adjust(Duration.seconds(1))
      expect(Option.isSome(yield* store.read(created.token))).toBe(true)
      yield* TestClock.adjust(Duration.seconds(1))
      expect(yield* store.read(created.token)).toEqual(Option.none())
    })
  )
}

const singleUse = (it: Methods) => {
  it.effect("a single-use login makes one session; the second attempt fails and stores nothing", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient
      const store = yield* makeSessionStore({ ttlSeconds: TTL })
      const user = session()
      const sessions = sql<{ n: string }>`
        SELECT count(*) AS n FROM attestor_sessions WHERE user_id = ${user.userId}`.pipe(
        Effect.map((rows) => Number(rows[0]?.n))
      )
      const key = `messenger:${"ab".repeat(32)}:${users}`
      const until = (yield* now) + 86_400
      const first = yield* store.create(user, { singleUse: { key, until } })
      const second = yield* Effect.exit(store.create(user, { singleUse: { key, until } }))
      expect(second).toEqual(Exit.fail(new LoginAlreadyUsed()))
      expect(yield* sessions).toBe(1)
      expect(Option.isSome(yield* store.read(first.token))).toBe(true)
      // The key is stored hashed too.
      const used = yield* sql<{ digest: string }>`
        SELECT digest FROM attestor_used_logins WHERE digest = ${sha256(key)}`
      expect(used).toHaveLength(1)
      // Another payload is another login.
      yield* store.create(user, { singleUse: { key: `${key}-other`, until } })
      expect(yield* sessions).toBe(2)
    })
  )
}

const endsOthers = (it: Methods) => {
  it.effect("a contest ends every other session of the same platform and user id, and only those", () =>
    Effect.gen(function* () {
      const store = yield* makeSessionStore({ ttlSeconds: TTL })
      const user = session()
      const kept = yield* store.create(user)
      const others = [yield* store.create(user), yield* store.create({ ...user, ids: [id(7)] })]
      // The same user id on another platform, and another user on the same platform.
      const otherPlatform = yield* store.create({ ...user, platform: "codehost" })
      const otherUser = yield* store.create(session())
      expect(yield* store.endOthers(user, kept.token)).toBe(2)
      for (const ended of others) expect(yield* store.read(ended.token)).toEqual(Option.none())
      for (const alive of [kept, otherPlatform, otherUser])
        expect(Option.isSome(yield* store.read(alive.token))).toBe(true)
      expect(yield* store.endOthers(user, kept.token)).toBe(0)
    })
  )
}

const prunes = (it: Methods) => {
  it.effect("prunes expired sessions and used logins when a session is created, at most once a minute", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient
      const ttl = 30
      const store = yield* makeSessionStore({ ttlSeconds: ttl })
      const count = (table: "attestor_sessions" | "attestor_used_logins", column: string, value: string) =>
        sql<{ n: string }>`SELECT count(*) AS n FROM ${sql(table)} WHERE ${sql(column)} = ${value}`.pipe(
          Effect.map((rows) => Number(rows[0]?.n))
        )
      const oldKey = `old-${users}`
      // This store's first creation prunes; nothing of it is due yet.
      const old = yield* store.create(session(), { singleUse: { key: oldKey, until: (yield* now) + 45 } })
      expect(yield* count("attestor_sessions", "token_hash", sha256(old.token))).toBe(1)
      expect(yield* count("attestor_used_logins", "digest", sha256(oldKey))).toBe(1)
      // A minute later the next creation prunes again: the old session and login record are due.
      yield* TestClock.adjust(Duration.seconds(61))
      const fresh = yield* store.create(session())
      expect(yield* count("attestor_sessions", "token_hash", sha256(old.token))).toBe(0)
      expect(yield* count("attestor_used_logins", "digest", sha256(oldKey))).toBe(0)
      expect(yield* count("attestor_sessions", "token_hash", sha256(fresh.token))).toBe(1)
      // Within the minute nothing is pruned: the expired row stays (and reads as none) until then.
      yield* TestClock.adjust(Duration.seconds(ttl))
      yield* store.create(session())
      expect(yield* store.read(fresh.token)).toEqual(Option.none())
      expect(yield* count("attestor_sessions", "token_hash", sha256(fresh.token))).toBe(1)
      yield* TestClock.adjust(Duration.seconds(30))
      yield* store.create(session())
      expect(yield* count("attestor_sessions", "token_hash", sha256(fresh.token))).toBe(0)
    })
  )
}

for (const database of testDatabases()) {
  describe(database.name, () => {
    layer(withMigrations(database), { timeout: 60_000 })((it) => {
      creates(it)
      challenges(it)
      expires(it)
      singleUse(it)
      endsOthers(it)
      prunes(it)
    })
  })
}

describe("sessions on disk", () => {
  it("survive a restart of the attestor's database", { timeout: 120_000 }, async () => {
    const dataDir = join(mkdtempSync(join(tmpdir(), "sessions-")), "db")
    const storage = storageLayer({ databaseUrl: Option.none(), dataDir, applicationName: "test" })
    const inStore = <A, E>(f: (store: SessionStore["Type"]) => Effect.Effect<A, E>) =>
      Effect.runPromise(
        Effect.flatMap(SessionStore, f).pipe(
          Effect.provide(SessionStore.layer({ ttlSeconds: TTL }).pipe(Layer.provide(storage)))
        )
      )
    const wanted = session([3])
    const created = await inStore((store) => store.create(wanted))
    const read = await inStore((store) => store.read(created.token))
    expect(read).toEqual(Option.some({ ...wanted, expiresAt: created.expiresAt }))
  })
})
