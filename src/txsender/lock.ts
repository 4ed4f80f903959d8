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
 *
 * A hold is bounded at both ends (docs/operations.md, "A hung send RPC"). Waiting for it, in this
 * process and then for another replica, takes at most the caller's wait (`TX_LOCK_WAIT_MS`);
 * then `LockTimeout`, which the caller answers 503. Holding it, every RPC the work makes goes
 * through `KeyHold.bounded`, which fails with `HoldExpired` once the operation, its retries
 * included, has gone unanswered for `TX_HOLD_RPC_TIMEOUT_MS`: the work ends, the lock is let
 * go, and what was stored is left to the monitor of whoever holds the lock next. A replica whose
 * hold expired steps back before it takes the lock again (for as long as the deadline, doubled
 * for each expiry in a row, at most 30 s), so that a replica whose RPC answers gets it, however
 * busy this one is; its own callers are refused once their wait has passed.
 */

import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Context, Data, Duration, Effect, Option, Schedule } from "effect"
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

/** An RPC made holding the key's lock went unanswered for the hold's deadline: the hold ended. */
export class HoldExpired extends Data.TaggedError("HoldExpired")<{ readonly operation: string }> {
  override get message() {
    return `${this.operation} went unanswered while holding the hot key's lock`
  }
}

/** The hold of the key's lock that the current work runs under. */
export interface KeyHoldShape {
  /** Fails with `LockLost` unless the lock is still held; asked before every broadcast. */
  readonly check: Effect.Effect<void, LockLost>
  /**
   * `effect`, an RPC named `operation`, within the hold's deadline; past it, `HoldExpired` (the
   * RPC is interrupted) and the hold ends.
   */
  readonly bounded: <A, E, R>(
    operation: string,
    effect: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | HoldExpired, R>
}

export class KeyHold extends Context.Tag("KeyHold")<KeyHold, KeyHoldShape>() {}

/** The hold on an embedded database without a deadline: the process's semaphore, which cannot be lost. */
export const semaphoreHold: KeyHoldShape = { check: Effect.void, bounded: (_, effect) => effect }

/** An RPC of the current hold, within its deadline (`KeyHoldShape.bounded`). */
export const bounded = <A, E, R>(
  operation: string,
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E | HoldExpired, R | KeyHold> =>
  Effect.flatMap(KeyHold, (hold) => hold.bounded(operation, effect))

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

const DEFAULT_HOLD_RPC_TIMEOUT = Duration.seconds(5)
/** The longest a replica whose holds keep expiring leaves the lock to the others. */
const MAX_STEP_BACK_MS = 30_000

export interface KeyLockOptions {
  readonly key: string
  /** How long a caller waits for the lock (this process's senders, then another replica's). */
  readonly timeout: Duration.DurationInput
  /** How long an RPC made holding the lock may go unanswered, retries included. Default 5 s. */
  readonly rpcDeadline?: Duration.DurationInput
  /** Excludes within this process; the process-wide one of `key` unless a test gives its own. */
  readonly semaphore?: Effect.Semaphore
  /** On embedded PGlite the semaphore is the whole lock. */
  readonly embedded: boolean
  /** Runs once when a hold finds the lock lost (the sender's metric). */
  readonly onLost?: Effect.Effect<void>
  /** Runs when a hold expires, with the operation that went unanswered (the sender's metric). */
  readonly onExpired?: (operation: string) => Effect.Effect<void>
  /** Runs when a caller gave up waiting for the lock (the sender's metric). */
  readonly onTimeout?: Effect.Effect<void>
}

/**
 * Runs work that needs the key (its `KeyHold`) while holding both locks, waiting for them at most
 * `waitMs` (the lock's `timeout` by default).
 */
export type KeyLock = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  waitMs?: number
) => Effect.Effect<A, E | LockTimeout | SqlError, Exclude<R, KeyHold>>

/** Runs effects while holding both locks of `key`; released even on failure or interruption. */
export const makeKeyLock = (options: KeyLockOptions) =>
  Effect.map(SqlClient, (sql): KeyLock => {
    const semaphore = options.semaphore ?? processLock(options.key)
    const timeoutMs = Duration.toMillis(Duration.decode(options.timeout))
    const deadline = Duration.decode(options.rpcDeadline ?? DEFAULT_HOLD_RPC_TIMEOUT)
    const onLost = options.onLost ?? Effect.void
    const onExpired = options.onExpired ?? (() => Effect.void)
    const onTimeout = options.onTimeout ?? Effect.void
    // Polling `pg_try_advisory_lock` rather than waiting in `pg_advisory_lock`: an interrupted
    // wait could otherwise be granted after the caller left and stay held on a pooled connection.
    // The semaphore is polled too, so that the wait for it is bounded as well.
    const poll = (waitMs: number) =>
      Schedule.exponential("5 millis", 2).pipe(
        Schedule.modifyDelay((_, delay) => Duration.min(delay, Duration.millis(200))),
        Schedule.upTo(Duration.millis(waitMs))
      )
    /** Until when this process leaves the lock to others after a hold of its own expired. */
    let stepBackUntil = 0
    /** Whether the last hold expired: one warning when holds start expiring, not one each. */
    let expiring = false
    let expiredInARow = 0

    const bounded = <A, E, R>(
      operation: string,
      effect: Effect.Effect<A, E, R>
    ): Effect.Effect<A, E | HoldExpired, R> =>
      effect.pipe(
        Effect.timeoutFail({ duration: deadline, onTimeout: () => new HoldExpired({ operation }) }),
        Effect.tapError((error) =>
          error instanceof HoldExpired
            ? Effect.gen(function* () {
                // Doubled for each hold in a row that expired: a replica whose RPC stays silent
                // soon leaves the lock to the others nearly all the time.
                expiredInARow++
                const stepBack = Math.min(
                  Duration.toMillis(deadline) * 2 ** Math.min(expiredInARow - 1, 16),
                  MAX_STEP_BACK_MS
                )
                stepBackUntil = (yield* Clock.currentTimeMillis) + stepBack
                yield* onExpired(operation)
                if (expiring)
                  return yield* Effect.logDebug(
                    "tx sender: an RPC under the hot key's lock is still unanswered"
                  )
                expiring = true
                yield* Effect.logWarning(
                  "tx sender: an RPC went unanswered while holding the hot key's lock; the lock is released and what was stored is left to the monitor"
                ).pipe(Effect.annotateLogs({ operation, deadlineMs: Duration.toMillis(deadline) }))
              })
            : Effect.void
        ),
        Effect.tap(() =>
          Effect.suspend(() => {
            expiredInARow = 0
            if (!expiring) return Effect.void
            expiring = false
            return Effect.logInfo("tx sender: RPCs under the hot key's lock are answered again")
          })
        )
      )

    /** Runs `hold` once both locks are had, polling them until `waitMs` has passed since `start`. */
    const acquire = <A, E, R>(
      waitMs: number | undefined,
      hold: (remainingMs: number) => Effect.Effect<A, E | Busy, R>
    ) =>
      Effect.gen(function* () {
        const wait = waitMs ?? timeoutMs
        const start = yield* Clock.currentTimeMillis
        // Stepping back: another replica may take the lock meanwhile (see the module header).
        const stepBack = Math.min(stepBackUntil - start, wait)
        if (stepBack > 0) yield* Effect.sleep(Duration.millis(stepBack))
        const remaining = Effect.map(Clock.currentTimeMillis, (now) => Math.max(0, wait - (now - start)))
        // A caller already waiting when a hold of this process expired steps back too: otherwise
        // this process's queue (its next batch, its monitor) takes the lock again at once, each
        // hanging for the deadline, and the other replicas wait out their callers' whole wait.
        const steppingBack = Effect.map(Clock.currentTimeMillis, (now) => now < stepBackUntil)
        const entered = Effect.if(steppingBack, {
          onTrue: () => Effect.fail(new Busy()),
          onFalse: () =>
            semaphore
              .withPermitsIfAvailable(1)(Effect.flatMap(remaining, hold))
              .pipe(
                Effect.flatMap(
                  Option.match({ onNone: () => Effect.fail(new Busy()), onSome: Effect.succeed })
                )
              )
        })
        return yield* entered.pipe(
          Effect.retry({
            schedule: poll(Math.max(0, wait - Math.max(0, stepBack))),
            while: (e) => e instanceof Busy
          }),
          Effect.catchIf(
            (e): e is Busy => e instanceof Busy,
            () => onTimeout.pipe(Effect.zipRight(Effect.fail(new LockTimeout({ waitedMs: wait }))))
          )
        )
      })

    if (options.embedded) {
      const hold: KeyHoldShape = { check: Effect.void, bounded }
      return <A, E, R>(effect: Effect.Effect<A, E, R>, waitMs?: number) =>
        acquire(waitMs, () => Effect.provideService(effect, KeyHold, hold)) as Effect.Effect<
          A,
          E | LockTimeout,
          Exclude<R, KeyHold>
        >
    }
    return <A, E, R>(effect: Effect.Effect<A, E, R>, waitMs?: number) =>
      acquire(waitMs, (remainingMs) =>
        Effect.scoped(
          Effect.gen(function* () {
            const lock = yield* sessionLock(sql, options.key)
            const tryLock = Effect.flatMap(lock.tryLock, (locked) =>
              locked ? Effect.void : Effect.fail(new Busy())
            )
            // The semaphore is had: the rest of the wait goes to the other replicas' lock.
            yield* tryLock.pipe(
              Effect.retry({ schedule: poll(remainingMs), while: (e) => e._tag === "Busy" }),
              Effect.catchTag("Busy", () =>
                onTimeout.pipe(
                  Effect.zipRight(Effect.fail(new LockTimeout({ waitedMs: waitMs ?? timeoutMs })))
                )
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
            return yield* Effect.provideService(effect, KeyHold, { check, bounded })
          })
        )
      ) as Effect.Effect<A, E | LockTimeout | SqlError, Exclude<R, KeyHold>>
  })
