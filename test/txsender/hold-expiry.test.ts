/**
 * A hold of the hot key's lock whose RPC goes unanswered: the hold ends at the deadline and this
 * process steps back before it takes the lock again, including work of its own that was already
 * waiting for it (its next batch, its monitor). Otherwise each queued piece of work takes the lock
 * at once and hangs for the deadline again, and another replica's callers wait out their whole
 * wait (docs/operations.md, "A hung send RPC").
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Deferred, Duration, Effect, Either, Fiber, Layer } from "effect"
import { migrate } from "../../src/store/migrations.js"
import { advisoryKey, bounded, makeKeyLock } from "../../src/txsender/lock.js"
import { testDatabases } from "../support/database.js"

const DEADLINE_MS = 1_500

for (const database of testDatabases()) {
  describe(`a hold whose RPC went unanswered (${database.name})`, () => {
    const storage = Layer.effectDiscard(migrate).pipe(Layer.provideMerge(database.layer))
    const embedded = database.name === "pglite"

    // A live clock: the holds poll for the lock in real time.
    it.live(
      "ends at the deadline; work of this process already waiting steps back, and another replica takes the lock first",
      () =>
        Effect.gen(function* () {
          const key = advisoryKey(`hold-expiry-test:${Math.random()}`)
          const lockOf = () =>
            makeKeyLock({
              key,
              timeout: Duration.seconds(10),
              rpcDeadline: Duration.millis(DEADLINE_MS),
              embedded,
              semaphore: Effect.unsafeMakeSemaphore(1)
            })
          const hanging = yield* lockOf()
          const entries: Array<{ readonly who: string; readonly at: number }> = []
          const enter = (who: string) =>
            Effect.flatMap(Clock.currentTimeMillis, (at) => Effect.sync(() => entries.push({ who, at })))

          // The first hold's broadcast never answers.
          const inside = yield* Deferred.make<void>()
          const first = yield* Effect.fork(
            hanging(
              Effect.zipRight(
                Deferred.succeed(inside, undefined),
                bounded("eth_sendRawTransaction", Effect.never)
              )
            ).pipe(Effect.either)
          )
          yield* Deferred.await(inside)
          // This process's next piece of work queues behind it.
          const queued = yield* Effect.fork(hanging(enter("queued")))
          // On PostgreSQL, another replica (its own semaphore, the same key) waits for it too.
          const other = embedded ? undefined : yield* Effect.fork((yield* lockOf())(enter("other")))

          const expired = yield* Fiber.join(first)
          const expiredAt = yield* Clock.currentTimeMillis
          expect(Either.isLeft(expired) && expired.left._tag).toBe("HoldExpired")
          yield* Fiber.join(queued)
          if (other !== undefined) yield* Fiber.join(other)

          // The queued work entered only once the step back (one deadline, for a first expiry)
          // had passed, not at the next poll; the other replica entered before it.
          const queuedAt = entries.find((e) => e.who === "queued")!.at
          expect(queuedAt - expiredAt).toBeGreaterThanOrEqual(DEADLINE_MS - 50)
          expect(entries.map((e) => e.who)).toEqual(embedded ? ["queued"] : ["other", "queued"])
        }).pipe(Effect.provide(storage), Effect.scoped),
      120_000
    )
  })
}
