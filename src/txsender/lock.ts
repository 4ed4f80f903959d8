/**
 * Exclusive use of one hot key. Replicas sharing one PostgreSQL take a session advisory lock,
 * held on a reserved connection only while they allocate nonces and broadcast, so every replica
 * can send, one at a time; a process-wide semaphore per key keeps this process's own senders in
 * line first. PGlite served over pglite-socket multiplexes every connection onto one session,
 * where advisory locks are re-entrant and exclude nothing, so there the semaphore alone excludes
 * (an embedded database belongs to one process) and no connection is held for it. The advisory
 * lock itself, and its release after an interrupted request, is `store/advisoryLock.ts`.
 *
 * The lock lives as long as its session. Should that session end while the lock is held (an idle
 * timeout, a proxy closing the connection), another replica can take the lock while this one is
 * still at work; so the work under the lock runs with a `KeyHold` whose `check` asks the database
 * whether this session still holds it, and every broadcast checks first (src/txsender/core.ts).
 * Once lost, the work ends with `LockLost` before its next send; what it stored is sent by
 * whoever holds the lock next.
 */

import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Data, Duration, Effect, Schedule } from "effect"
import { sessionLock } from "../store/advisoryLock.js"

export class LockTimeout extends Data.TaggedError("LockTimeout")<{ readonly waitedMs: number }> {
  override get message() {
    return `the hot key stayed locked by another sender for ${this.waitedMs} ms`
  }
}

/** The key's lock was lost while held: its session ended, and another replica may hold it now. */
export class LockLost extends Data.TaggedError("LockLost")<{}> {
  override get message() {
    return "the hot key's lock was lost: the database session that held it ended"
  }
}

/** The hold of the key's lock that the current work runs under. */
export interface KeyHoldShape {
  /** Fails with `LockLost` unless the lock is still held; asked before every broadcast. */
  readonly check: Effect.Effect<void, LockLost>
}

export class KeyHold extends Context.Tag("KeyHold")<KeyHold, KeyHoldShape>() {}

/** The hold on an embedded database: the process's semaphore, which cannot be lost. */
export const semaphoreHold: KeyHoldShape = { check: Effect.void }

const processLocks = new Map<string, Effect.Semaphore>()

/** The one semaphore of this process for `key`. */
export const processLock = (key: string): Effect.Semaphore => {
  const known = processLocks.get(key)
  if (known !== undefined) return known
  const made = Effect.unsafeMakeSemaphore(1)
  processLocks.set(key, made)
  return made
}

export { advisoryKey, isEmbeddedDatabase } from "../store/advisoryLock.js"

/** Serializes this process's statements on an embedded database. */
export const embeddedStatements: Effect.Semaphore = Effect.unsafeMakeSemaphore(1)

class Busy extends Data.TaggedError("Busy")<{}> {}

export interface KeyLockOptions {
  readonly key: string
  /** How long a caller waits for another replica before giving up. */
  readonly timeout: Duration.DurationInput
  /** Excludes within this process; the process-wide one of `key` unless a test gives its own. */
  readonly semaphore?: Effect.Semaphore
  /** On embedded PGlite the semaphore is the whole lock. */
  readonly embedded: boolean
  /** Runs once when a hold finds the lock lost (the sender's metric). */
  readonly onLost?: Effect.Effect<void>
}

/** Runs work that needs the key (its `KeyHold`) while holding both locks. */
export type KeyLock = <A, E, R>(
  effect: Effect.Effect<A, E, R>
) => Effect.Effect<A, E | LockTimeout | SqlError, Exclude<R, KeyHold>>

/** Runs effects while holding both locks of `key`; released even on failure or interruption. */
export const makeKeyLock = (options: KeyLockOptions) =>
  Effect.map(SqlClient, (sql): KeyLock => {
    const semaphore = options.semaphore ?? processLock(options.key)
    const timeout = Duration.decode(options.timeout)
    // Polling `pg_try_advisory_lock` rather than waiting in `pg_advisory_lock`: an interrupted
    // wait could otherwise be granted after the caller left and stay held on a pooled connection.
    const poll = Schedule.exponential("5 millis", 2).pipe(
      Schedule.modifyDelay((_, delay) => Duration.min(delay, Duration.millis(200))),
      Schedule.upTo(timeout)
    )
    if (options.embedded)
      return <A, E, R>(effect: Effect.Effect<A, E, R>) =>
        semaphore.withPermits(1)(Effect.provideService(effect, KeyHold, semaphoreHold))
    const onLost = options.onLost ?? Effect.void
    return <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      semaphore.withPermits(1)(
        Effect.scoped(
          Effect.gen(function* () {
            const lock = yield* sessionLock(sql, options.key)
            const tryLock = Effect.flatMap(lock.tryLock, (locked) =>
              locked ? Effect.void : Effect.fail(new Busy())
            )
            yield* tryLock.pipe(
              Effect.retry({ schedule: poll, while: (e) => e._tag === "Busy" }),
              Effect.catchTag("Busy", () =>
                Effect.fail(new LockTimeout({ waitedMs: Duration.toMillis(timeout) }))
              )
            )
            // Once lost, lost for this hold: the next one takes the lock again, or waits.
            let lost = false
            const check = Effect.suspend(() =>
              lost
                ? Effect.fail(new LockLost())
                : lock.held.pipe(
                    // An unanswered question proves nothing either: no broadcast without the lock.
                    Effect.orElseSucceed(() => false),
                    Effect.flatMap((held) => {
                      if (held) return Effect.void
                      lost = true
                      return Effect.logWarning(
                        "tx sender: the hot key's lock was lost (its database session ended); sending stops until it is taken again"
                      ).pipe(Effect.zipRight(onLost), Effect.zipRight(Effect.fail(new LockLost())))
                    })
                  )
            )
            return yield* Effect.provideService(effect, KeyHold, { check })
          })
        )
      )
  })
