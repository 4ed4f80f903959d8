/**
 * How every long-running fiber of both services runs (the vault indexer, the hint index, the veto
 * watcher, the transaction sender's fibers, the fee refresher): for the lifetime of its scope,
 * restarted after a failure with jittered exponential backoff that starts over once a run lasted a
 * minute, each restart logged by its description (never a cause's text, which may quote a node's
 * URL: src/logging.ts) and left to the caller to count and show in health.
 */
import { Cause, Clock, Duration, Effect, Exit } from "effect"
import { describeFailure } from "../logging.js"

export interface SuperviseOptions {
  /** First restart delay after a failure; doubles per consecutive failure. Default 500 ms. */
  readonly baseDelayMs?: number | undefined
  /** Longest restart delay. Default 30 s. */
  readonly maxDelayMs?: number | undefined
  /** Runs before each restart's delay: count it, set the state. */
  readonly onRestart?: ((cause: Cause.Cause<unknown>, delayMs: number) => Effect.Effect<void>) | undefined
}

/**
 * Runs `work` for the lifetime of the calling fiber: again when it ends, and after a failure
 * once a jittered exponential delay has passed. A run that lasted over a minute before failing
 * starts the backoff over. Only interruption stops it. Time comes from the `Clock`.
 */
export const superviseForever = <E, R>(work: Effect.Effect<void, E, R>, options: SuperviseOptions = {}) =>
  Effect.gen(function* () {
    const base = options.baseDelayMs ?? 500
    const max = options.maxDelayMs ?? 30_000
    let failures = 0
    while (true) {
      const started = yield* Clock.currentTimeMillis
      const exit = yield* Effect.exit(work)
      if (Exit.isSuccess(exit)) continue
      if (Cause.isInterruptedOnly(exit.cause)) return yield* Effect.interrupt
      failures = (yield* Clock.currentTimeMillis) - started > 60_000 ? 1 : failures + 1
      const delay = Math.min(max, base * 2 ** Math.min(failures - 1, 20)) * (0.5 + Math.random() / 2)
      if (options.onRestart !== undefined) yield* options.onRestart(exit.cause, delay)
      yield* Effect.sleep(Duration.millis(delay))
    }
  })

/**
 * `superviseForever` with the restart logged as `<name> failed; restarting`, with the failure's
 * description and the delay before the next run.
 */
export const supervised = <E, R>(
  name: string,
  work: Effect.Effect<void, E, R>,
  options: SuperviseOptions = {}
) =>
  superviseForever(work, {
    ...options,
    onRestart: (cause, delayMs) =>
      Effect.zipRight(
        options.onRestart?.(cause, delayMs) ?? Effect.void,
        Effect.logWarning(`${name} failed; restarting`).pipe(
          Effect.annotateLogs({ failure: describeFailure(cause), retry_in_ms: Math.round(delayMs) })
        )
      )
  })
