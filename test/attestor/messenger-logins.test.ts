/**
 * Messenger logins (src/attestor/logins/messenger/MessengerLogins.ts) on two replicas sharing a real database
 * (PGlite, and PostgreSQL when DATABASE_URL is set), the clock a test clock set to each replica's
 * reading in turn: a payload used once stays used on a replica whose clock runs a little behind the
 * one that pruned the used-login records, and for as long as any replica within the tolerance can
 * still accept it by age.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import { describe, expect, layer, type Vitest } from "@effect/vitest"
import { Effect, Either, Layer, Schema, TestClock } from "effect"
import type { MessengerAuth } from "../../schema/attestor.js"
import { Address } from "../../schema/primitives.js"
import { MessengerLogins } from "../../src/attestor/logins/messenger/MessengerLogins.js"
import {
  MESSENGER_SINGLE_USE_CLOCK_TOLERANCE_SECONDS,
  signWidgetPayload,
  widgetKey
} from "../../src/attestor/logins/messenger/messengerWidget.js"
import { makeSessionStore, SessionStore } from "../../src/attestor/logins/SessionStore.js"
import { migrate } from "../../src/store/migrations.js"
import { type TestDatabase, testDatabases } from "../support/database.js"

const key = widgetKey("1000000001:messenger-single-use-test")
const MAX_AGE = 300
const AUTH_DATE = 1_700_000_000
const stealthOwner = Schema.decodeSync(Address)("0x90f79bf6eb2c4f870365e785982e1f101e93b906")

/** A replica: its own session store (and so its own pruning schedule) on the shared database. */
const replica = Effect.gen(function* () {
  const store = yield* makeSessionStore({ ttlSeconds: 900, pruneIntervalSeconds: 60 })
  return yield* Effect.provide(
    MessengerLogins,
    MessengerLogins.layer({ key, maxAgeSeconds: MAX_AGE }).pipe(
      Layer.provide(Layer.succeed(SessionStore, store))
    )
  )
})

type Replica = Effect.Effect.Success<typeof replica>

/** Presents `auth` to `on` with its clock reading `at`: the session's user, or the refusal. */
const presentAt = (on: Replica, at: number, auth: MessengerAuth) =>
  Effect.gen(function* () {
    yield* TestClock.setTime(at * 1000)
    const answer = yield* Effect.either(on.verify({ auth, stealthOwner }))
    return Either.isRight(answer)
      ? `session of ${answer.right.userId}`
      : `${answer.left._tag}: ${answer.left.message}`
  })

const REPLAYED = "InvalidSession: this messenger login was already used: log in again"
const TOO_OLD = "InvalidSession: the messenger login is too old: log in again"

const payload = (id: number, authDate: number) => signWidgetPayload(key, { id, auth_date: authDate })

type Methods = Vitest.MethodsNonLive<SqlClient>

const cases = (it: Methods) => {
  it.effect("a replay to a replica 2 s behind the one that pruned the records is refused", () =>
    Effect.gen(function* () {
      const fast = yield* replica
      const slow = yield* replica
      const used = payload(7001, AUTH_DATE)
      expect(yield* presentAt(fast, AUTH_DATE + 10, used)).toBe("session of 7001")
      // The fast replica is past the payload's last accepted second; another login there prunes.
      expect(yield* presentAt(fast, AUTH_DATE + MAX_AGE + 1, payload(7002, AUTH_DATE + MAX_AGE))).toBe(
        "session of 7002"
      )
      // The slow replica's clock still reads the payload as young enough.
      expect(yield* presentAt(slow, AUTH_DATE + MAX_AGE - 1, used)).toBe(REPLAYED)
    })
  )

  it.effect("the record lasts until every replica within the tolerance refuses the payload by age", () =>
    Effect.gen(function* () {
      const fast = yield* replica
      const slow = yield* replica
      const used = payload(7101, AUTH_DATE)
      const tolerance = MESSENGER_SINGLE_USE_CLOCK_TOLERANCE_SECONDS
      expect(yield* presentAt(slow, AUTH_DATE, used)).toBe("session of 7101")
      // The fast replica, `tolerance` seconds ahead of the slow one, prunes at the last moment the
      // slow one still accepts the payload by age.
      const prunedAt = AUTH_DATE + MAX_AGE + tolerance
      expect(yield* presentAt(fast, prunedAt, payload(7102, prunedAt))).toBe("session of 7102")
      expect(yield* presentAt(slow, prunedAt - tolerance, used)).toBe(REPLAYED)
      // Once the record may go (the next pruning), every such replica refuses the payload by age.
      const later = prunedAt + 60
      expect(yield* presentAt(fast, later, payload(7103, later))).toBe("session of 7103")
      expect(yield* presentAt(slow, later - tolerance, used)).toBe(TOO_OLD)
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
