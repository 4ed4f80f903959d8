/**
 * OAuth states on a real database (PGlite, and PostgreSQL when DATABASE_URL is set): a state is
 * 43 URL-safe characters, only its SHA-256 is stored, the intent comes back exactly and once, an
 * expired state reads as unknown on the TestClock at the second it is due, concurrent takers of one
 * state get it once between them, peeking leaves a state, and expired rows are pruned. Live states
 * are bounded per client address and in total: past a bound nothing is stored and the refusal says
 * when the first counted state expires; expired and used states no longer count; concurrent starts
 * of one client never pass its bound; the address is kept only as a keyed digest.
 */
import { createHash } from "node:crypto"
import { SqlClient } from "@effect/sql/SqlClient"
import { describe, expect, layer, type Vitest } from "@effect/vitest"
import { Duration, Effect, Either, Layer, Option, Schema, TestClock } from "effect"
import { OAuthState } from "../../schema/attestor.js"
import { Address, Bytes32 } from "../../schema/primitives.js"
import {
  clientDigestKey,
  makeOAuthStates,
  type OAuthIntent,
  type OAuthStatesConfig,
  OAuthStatesFull
} from "../../src/attestor/logins/oauth/OAuthStates.js"
import { migrate } from "../../src/store/migrations.js"
import { type TestDatabase, testDatabases } from "../support/database.js"

const owner = Schema.decodeSync(Address)("0x90f79bf6eb2c4f870365e785982e1f101e93b906")
const id = (n: number) => Schema.decodeSync(Bytes32)(`0x${n.toString(16).padStart(64, "0")}`)
const sha256 = (s: string) => createHash("sha256").update(s, "utf8").digest("hex")

const TTL = 600
const CLIENT = "203.0.113.7"

/** Bounds no test but the bounds' own comes near. */
const config = (overrides: Partial<OAuthStatesConfig> = {}): OAuthStatesConfig => ({
  ttlSeconds: TTL,
  maxPerClient: 1_000,
  maxTotal: 100_000,
  clientDigestKey: clientDigestKey(new Uint8Array(32).fill(0x33)),
  ...overrides
})

const intent = (overrides: Partial<OAuthIntent> = {}): OAuthIntent => ({
  platform: "microblog",
  stealthOwner: owner,
  ids: [id(1), id(2)],
  redirect: "http://localhost:5173/after-login",
  codeVerifier: "a".repeat(43),
  loginChallenge: id(99),
  ...overrides
})

const rows = (stateHash: string) =>
  Effect.flatMap(
    SqlClient,
    (sql) =>
      sql<{
        readonly n: number
      }>`SELECT count(*)::int AS n FROM attestor_oauth_states WHERE state_hash = ${stateHash}`
  ).pipe(Effect.map((r) => r[0]?.n ?? 0))

const allRows = Effect.flatMap(
  SqlClient,
  (sql) => sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM attestor_oauth_states`
).pipe(Effect.map((r) => r[0]?.n ?? 0))

type Methods = Vitest.MethodsNonLive<SqlClient>

const cases = (it: Methods) => {
  it.effect("stores an intent under a fresh URL-safe state, keeping only its digest", () =>
    Effect.gen(function* () {
      const states = yield* makeOAuthStates(config())
      yield* TestClock.adjust(Duration.seconds(1_700_000_000))
      const { state, expiresAt } = yield* states.put(intent(), { client: CLIENT })
      expect(state).toMatch(/^[A-Za-z0-9_-]{43}$/)
      expect(() => Schema.decodeSync(OAuthState)(state)).not.toThrow()
      expect(expiresAt).toBe(1_700_000_000 + TTL)
      expect(yield* rows(sha256(state))).toBe(1)
      const sql = yield* SqlClient
      const stored = yield* sql<{ readonly state_hash: string }>`SELECT state_hash FROM attestor_oauth_states`
      expect(stored.map((r) => r.state_hash)).not.toContain(state)
      const other = yield* states.put(intent(), { client: CLIENT })
      expect(other.state).not.toBe(state)
    })
  )

  it.effect("gives the intent back exactly, once", () =>
    Effect.gen(function* () {
      const states = yield* makeOAuthStates(config())
      const wanted = intent({ platform: "community", ids: [], redirect: undefined })
      const { state, expiresAt } = yield* states.put(wanted, { client: CLIENT })
      // With the end start announced, so a message can be held to it, and when it was made.
      expect(yield* states.take(state, "community")).toEqual(
        Option.some({ ...wanted, startedAt: expiresAt - TTL, expiresAt })
      )
      expect(yield* states.take(state, "community")).toEqual(Option.none())
      expect(yield* rows(sha256(state))).toBe(0)
      const codehost = intent({ platform: "codehost", codeVerifier: undefined })
      const second = yield* states.put(codehost, { client: CLIENT })
      expect(yield* states.take(second.state, "codehost")).toEqual(
        Option.some({ ...codehost, startedAt: second.expiresAt - TTL, expiresAt: second.expiresAt })
      )
    })
  )

  it.effect("an unknown state reads as none", () =>
    Effect.gen(function* () {
      const states = yield* makeOAuthStates(config())
      expect(yield* states.take("x".repeat(43), "microblog")).toEqual(Option.none())
    })
  )

  it.effect("a state presented for another platform reads as none and stays for its own login", () =>
    Effect.gen(function* () {
      const states = yield* makeOAuthStates(config())
      // A fedsocial nonce, which a relay sees, presented at an OAuth callback.
      const { state } = yield* states.put(intent({ platform: "fedsocial", codeVerifier: undefined }), {
        client: CLIENT
      })
      expect(yield* states.take(state, "microblog")).toEqual(Option.none())
      expect(yield* rows(sha256(state))).toBe(1)
      expect(Option.isSome(yield* states.take(state, "fedsocial"))).toBe(true)
    })
  )

  it.effect("peeking gives a live state's times and leaves it; none when take would find none", () =>
    Effect.gen(function* () {
      const states = yield* makeOAuthStates(config())
      const { state, expiresAt } = yield* states.put(
        intent({ platform: "fedsocial", codeVerifier: undefined }),
        { client: CLIENT }
      )
      const times = Option.some({ startedAt: expiresAt - TTL, expiresAt })
      expect(yield* states.peek(state, "fedsocial")).toEqual(times)
      expect(yield* states.peek(state, "fedsocial")).toEqual(times)
      expect(yield* rows(sha256(state))).toBe(1)
      expect(yield* states.peek(state, "microblog")).toEqual(Option.none())
      expect(yield* states.peek("x".repeat(43), "fedsocial")).toEqual(Option.none())
      expect(Option.isSome(yield* states.take(state, "fedsocial"))).toBe(true)
      expect(yield* states.peek(state, "fedsocial")).toEqual(Option.none())
      const expiring = yield* states.put(intent(), { client: CLIENT })
      yield* TestClock.adjust(Duration.seconds(TTL - 1))
      expect(Option.isSome(yield* states.peek(expiring.state, "microblog"))).toBe(true)
      yield* TestClock.adjust(Duration.seconds(1))
      expect(yield* states.peek(expiring.state, "microblog")).toEqual(Option.none())
    })
  )

  it.effect("expires at the second it is due", () =>
    Effect.gen(function* () {
      const states = yield* makeOAuthStates(config())
      const kept = yield* states.put(intent(), { client: CLIENT })
      const expiring = yield* states.put(intent(), { client: CLIENT })
      yield* TestClock.adjust(Duration.seconds(TTL - 1))
      expect(Option.isSome(yield* states.take(kept.state, "microblog"))).toBe(true)
      yield* TestClock.adjust(Duration.seconds(1))
      expect(yield* states.take(expiring.state, "microblog")).toEqual(Option.none())
    })
  )

  it.effect("concurrent takers of one state get it once between them", () =>
    Effect.gen(function* () {
      const states = yield* makeOAuthStates(config())
      const { state } = yield* states.put(intent(), { client: CLIENT })
      const taken = yield* Effect.all(
        Array.from({ length: 8 }, () => states.take(state, "microblog")),
        { concurrency: "unbounded" }
      )
      expect(taken.filter(Option.isSome)).toHaveLength(1)
    })
  )

  it.effect("a client at its bound is refused until its first state expires, and nothing is stored", () =>
    Effect.gen(function* () {
      const states = yield* makeOAuthStates(config({ maxPerClient: 3 }))
      const client = "198.51.100.31"
      yield* states.put(intent(), { client })
      yield* TestClock.adjust(Duration.seconds(100))
      yield* states.put(intent({ platform: "fedsocial", codeVerifier: undefined }), { client })
      yield* states.put(intent(), { client })
      const before = yield* allRows
      // An OAuth state and a fedsocial nonce count alike.
      for (const platform of ["codehost", "fedsocial"] as const)
        expect(yield* Effect.flip(states.put(intent({ platform }), { client }))).toEqual(
          new OAuthStatesFull({ bound: "client", retryAfterSeconds: TTL - 100 })
        )
      expect(yield* allRows).toBe(before)
      // Another address is counted apart.
      yield* states.put(intent(), { client: "198.51.100.32" })
      // Its first state expired: it no longer counts.
      yield* TestClock.adjust(Duration.seconds(TTL - 100))
      yield* states.put(intent(), { client })
      expect(yield* Effect.flip(states.put(intent(), { client }))).toMatchObject({ bound: "client" })
    })
  )

  it.effect("a used state no longer counts against its client", () =>
    Effect.gen(function* () {
      const states = yield* makeOAuthStates(config({ maxPerClient: 1 }))
      const client = "198.51.100.41"
      const { state } = yield* states.put(intent(), { client })
      expect(yield* Effect.flip(states.put(intent(), { client }))).toMatchObject({ bound: "client" })
      expect(Option.isSome(yield* states.take(state, "microblog"))).toBe(true)
      yield* states.put(intent(), { client })
    })
  )

  it.effect("all clients together are bounded too; expired states no longer count", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient
      yield* sql`DELETE FROM attestor_oauth_states`
      const states = yield* makeOAuthStates(config({ maxPerClient: 2, maxTotal: 4 }))
      for (const n of [1, 2, 3, 4]) yield* states.put(intent(), { client: `192.0.2.${n}` })
      expect(yield* Effect.flip(states.put(intent(), { client: "192.0.2.5" }))).toEqual(
        new OAuthStatesFull({ bound: "total", retryAfterSeconds: TTL })
      )
      expect(yield* allRows).toBe(4)
      yield* TestClock.adjust(Duration.seconds(TTL))
      yield* states.put(intent(), { client: "192.0.2.5" })
    })
  )

  it.effect("concurrent starts of one client never pass its bound", () =>
    Effect.gen(function* () {
      const states = yield* makeOAuthStates(config({ maxPerClient: 3 }))
      const client = "198.51.100.51"
      const outcomes = yield* Effect.all(
        Array.from({ length: 12 }, () => Effect.either(states.put(intent(), { client }))),
        { concurrency: "unbounded" }
      )
      expect(outcomes.filter(Either.isRight)).toHaveLength(3)
    })
  )

  it.effect("keeps the client address only as a keyed digest", () =>
    Effect.gen(function* () {
      const states = yield* makeOAuthStates(config())
      const { state } = yield* states.put(intent(), { client: "198.51.100.61" })
      const sql = yield* SqlClient
      const stored = yield* sql<{ readonly client_digest: string }>`
        SELECT client_digest FROM attestor_oauth_states WHERE state_hash = ${sha256(state)}`
      expect(stored[0]?.client_digest).toMatch(/^[0-9a-f]{64}$/)
      expect(stored[0]?.client_digest).not.toBe(sha256("198.51.100.61"))
      // Every replica (same pepper) stores an address alike.
      const again = yield* (yield* makeOAuthStates(config())).put(intent(), { client: "198.51.100.61" })
      const other = yield* sql<{ readonly client_digest: string }>`
        SELECT client_digest FROM attestor_oauth_states WHERE state_hash = ${sha256(again.state)}`
      expect(other[0]?.client_digest).toBe(stored[0]?.client_digest)
    })
  )

  it.effect("each state stored deletes expired rows besides, between prunings", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient
      yield* sql`DELETE FROM attestor_oauth_states`
      const states = yield* makeOAuthStates(config({ ttlSeconds: 10, pruneIntervalSeconds: 3_600 }))
      for (const n of [1, 2, 3, 4, 5, 6]) yield* states.put(intent(), { client: `192.0.2.${n}` })
      yield* TestClock.adjust(Duration.seconds(10))
      // The periodic pruning is not due: each new state deletes two expired ones.
      yield* states.put(intent(), { client: CLIENT })
      expect(yield* allRows).toBe(1 + 4)
      yield* states.put(intent(), { client: CLIENT })
      expect(yield* allRows).toBe(2 + 2)
    })
  )

  it.effect("prunes expired rows when states are stored, at most once a minute", () =>
    Effect.gen(function* () {
      const states = yield* makeOAuthStates(config({ ttlSeconds: 10, pruneIntervalSeconds: 60 }))
      const old = yield* states.put(intent(), { client: CLIENT })
      yield* TestClock.adjust(Duration.seconds(61))
      yield* states.put(intent(), { client: CLIENT })
      expect(yield* rows(sha256(old.state))).toBe(0)
    })
  )
}

const withMigrations = (database: TestDatabase) =>
  Layer.effectDiscard(migrate).pipe(Layer.provideMerge(database.layer))

for (const database of testDatabases()) {
  describe(database.name, () => {
    layer(withMigrations(database), { timeout: 60_000 })((it) => cases(it))
  })
}
