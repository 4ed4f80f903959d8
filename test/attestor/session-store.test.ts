/**
 * The attestor's SessionStore on a real database (PGlite, and PostgreSQL when DATABASE_URL is
 * set): tokens of the SessionToken alphabet, only their SHA-256 in the database, sessions read
 * back exactly, expiry on the TestClock at the second it is due, single-use logins, a contest
 * ending the user's sessions made at or before the contesting one, a login started before the
 * user's last contest (an OAuth state, a fedsocial nonce, a messenger payload) refused, opportunistic
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
import { makeOAuthStates } from "../../src/attestor/logins/oauth/OAuthStates.js"
import {
  authenticate,
  LOGIN_BEFORE_CONTEST,
  LOGIN_SECRET_MISSING,
  LOGIN_SECRET_REFUSED,
  LOGIN_SECRET_UNEXPECTED,
  LoginAlreadyUsed,
  LoginStartedBeforeContest,
  makeSessionStore,
  SessionStore,
  storageDigest
} from "../../src/attestor/logins/SessionStore.js"
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
  it.effect(
    "a contest ends the user's sessions created at or before the contesting one, and only those: an older session's contest leaves a newer one, a newer one's ends the older",
    () =>
      Effect.gen(function* () {
        const store = yield* makeSessionStore({ ttlSeconds: TTL })
        const user = session()
        const older = [yield* store.create(user), yield* store.create({ ...user, ids: [id(7)] })]
        yield* TestClock.adjust(Duration.seconds(10))
        // The attacker's session, and one made in the same second (at or before: ended).
        const contester = yield* store.create(user)
        const sameSecond = yield* store.create(user)
        yield* TestClock.adjust(Duration.seconds(10))
        // The victim's fresh login after it.
        const newer = yield* store.create(user)
        // The same user id on another platform, and another user on the same platform.
        const otherPlatform = yield* store.create({ ...user, platform: "codehost" })
        const otherUser = yield* store.create(session())
        expect(yield* store.endOthers(user, contester.token, yield* now)).toBe(3)
        for (const ended of [...older, sameSecond])
          expect(yield* store.read(ended.token)).toEqual(Option.none())
        for (const alive of [contester, newer, otherPlatform, otherUser])
          expect(Option.isSome(yield* store.read(alive.token))).toBe(true)
        expect(yield* store.endOthers(user, contester.token, yield* now)).toBe(0)
        // The newer session's contest ends the older one.
        expect(yield* store.endOthers(user, newer.token, yield* now)).toBe(1)
        expect(yield* store.read(contester.token)).toEqual(Option.none())
        for (const alive of [newer, otherPlatform, otherUser])
          expect(Option.isSome(yield* store.read(alive.token))).toBe(true)
      })
  )

  it.effect(
    "a login started before the user's last contest makes no session, in the transaction that would store it; one started at or after it does",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient
        const store = yield* makeSessionStore({ ttlSeconds: TTL })
        const user = session()
        const sessionsOf = (userId: string) =>
          sql<{ n: number }>`SELECT count(*)::int AS n FROM attestor_sessions WHERE user_id = ${userId}`.pipe(
            Effect.map((rows) => rows[0]?.n)
          )
        const prepared = yield* now
        yield* TestClock.adjust(Duration.seconds(30))
        const contester = yield* store.create(user)
        const contestedAt = yield* now
        yield* store.endOthers(user, contester.token, contestedAt)
        yield* TestClock.adjust(Duration.seconds(5))
        const refused = yield* Effect.exit(store.create(user, { startedAt: prepared }))
        expect(refused).toEqual(Exit.fail(new LoginStartedBeforeContest()))
        const singleUse = { key: `prepared-${users}`, until: contestedAt + 300 }
        expect(yield* Effect.exit(store.create(user, { startedAt: contestedAt - 1, singleUse }))).toEqual(
          Exit.fail(new LoginStartedBeforeContest())
        )
        expect(yield* sessionsOf(user.userId)).toBe(1)
        // Started in the contest's second or later: a session (the single-use key was not spent).
        yield* store.create(user, { startedAt: contestedAt, singleUse })
        yield* store.create(user, { startedAt: contestedAt + 3 })
        expect(yield* sessionsOf(user.userId)).toBe(3)
        // Another user, and the same user id on another platform, are not concerned.
        const other = session()
        yield* store.create(other, { startedAt: prepared })
        yield* store.create({ ...user, platform: "codehost" }, { startedAt: prepared })
        expect(yield* sessionsOf(other.userId)).toBe(1)
        // The last contest counts: a contest recorded with an earlier time does not move it back.
        yield* store.endOthers(user, contester.token, prepared)
        expect(yield* Effect.exit(store.create(user, { startedAt: contestedAt - 1 }))).toEqual(
          Exit.fail(new LoginStartedBeforeContest())
        )
        expect(new LoginStartedBeforeContest().message).toBe(LOGIN_BEFORE_CONTEST)
      })
  )

  it.effect(
    "each login kind's start: an OAuth state or fedsocial nonce made, or a messenger payload signed, before the contest makes no session after it",
    () =>
      Effect.gen(function* () {
        const store = yield* makeSessionStore({ ttlSeconds: TTL })
        const states = yield* makeOAuthStates({
          ttlSeconds: 600,
          maxPerClient: 10,
          maxTotal: 100_000,
          clientDigestKey: new Uint8Array(32)
        })
        const intent = { stealthOwner: owner, ids: [], codeVerifier: undefined, loginChallenge: undefined }
        /** A contest of `user` now, by a session of its own. */
        const contest = (user: Session) =>
          Effect.gen(function* () {
            yield* TestClock.adjust(Duration.seconds(20))
            const contester = yield* store.create(user)
            yield* store.endOthers(user, contester.token, yield* now)
            yield* TestClock.adjust(Duration.seconds(20))
          })
        // OAuth and fedsocial: the login started when its state (the nonce) was made; `take`
        // says when.
        for (const platform of ["codehost", "fedsocial"] as const) {
          const user: Session = { ...session(), platform }
          const before = yield* states.put(
            { ...intent, platform, redirect: undefined },
            { client: "192.0.2.1" }
          )
          yield* contest(user)
          const after = yield* states.put(
            { ...intent, platform, redirect: undefined },
            { client: "192.0.2.1" }
          )
          const startedAt = (state: string) =>
            Effect.map(states.take(state, platform), (taken) => Option.getOrThrow(taken).startedAt)
          expect(
            yield* Effect.exit(store.create(user, { startedAt: yield* startedAt(before.state) }))
          ).toEqual(Exit.fail(new LoginStartedBeforeContest()))
          yield* store.create(user, { startedAt: yield* startedAt(after.state) })
        }
        // messenger: the login started when the payload was signed (its auth_date).
        const user = session()
        const signedBefore = yield* now
        yield* contest(user)
        expect(yield* Effect.exit(store.create(user, { startedAt: signedBefore }))).toEqual(
          Exit.fail(new LoginStartedBeforeContest())
        )
        yield* store.create(user, { startedAt: yield* now })
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
