/**
 * Exclusive use of one hot key. Replicas sharing one PostgreSQL take a session advisory lock,
 * held on a reserved connection only while they allocate nonces and broadcast, so every replica
 * can send, one at a time; a process-wide semaphore per key keeps this process's own senders in
 * line first. PGlite served over pglite-socket multiplexes every connection onto one session,
 * where advisory locks are re-entrant and exclude nothing, so there the semaphore alone excludes
 * (an embedded database belongs to one process) and no connection is held for it. The advisory
 * lock itself, and its release after an interrupted request, is `store/advisoryLock.ts`.
 */

import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Data, Duration, Effect, Schedule } from "effect"
import { sessionLock } from "../store/advisoryLock.js"

export class LockTimeout extends Data.TaggedError("LockTimeout")<{ readonly waitedMs: number }> {
  override get message() {
    return `the hot key stayed locked by another sender for ${this.waitedMs} ms`
  }
}

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
}

export type KeyLock = <A, E, R>(
  effect: Effect.Effect<A, E, R>
) => Effect.Effect<A, E | LockTimeout | SqlError, R>

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
    if (options.embedded) return <A, E, R>(effect: Effect.Effect<A, E, R>) => semaphore.withPermits(1)(effect)
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
            return yield* effect
          })
        )
      )
  })
