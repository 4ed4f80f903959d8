/**
 * The loop of the followers that watch another index (the hint index and the veto watcher follow
 * the vault indexer's projection): look every `pollInterval`, act when what is seen changed, and
 * at least every `resyncInterval` anyway. Time comes from the `Clock`.
 */
import { Clock, Duration, Effect } from "effect"

export interface PollForChanges<A, E, R> {
  /** What there is to see now; none until there is anything. */
  readonly read: Effect.Effect<A | undefined, E, R>
  /** What identifies a state of `read`: a change of it is a change. */
  readonly keyOf: (seen: A) => string
  readonly onChange: (seen: A) => Effect.Effect<void, E, R>
  readonly pollInterval: Duration.DurationInput
  readonly resyncInterval: Duration.DurationInput
}

/** Runs until interrupted or until `read` or `onChange` fails. */
export const pollForChanges = <A, E, R>(options: PollForChanges<A, E, R>): Effect.Effect<never, E, R> =>
  Effect.gen(function* () {
    const resyncMs = Duration.toMillis(options.resyncInterval)
    let seenKey: string | undefined
    let lastRun = Number.NEGATIVE_INFINITY
    while (true) {
      const seen = yield* options.read
      if (seen !== undefined) {
        const key = options.keyOf(seen)
        const now = yield* Clock.currentTimeMillis
        if (key !== seenKey || now - lastRun >= resyncMs) {
          yield* options.onChange(seen)
          seenKey = key
          lastRun = yield* Clock.currentTimeMillis
        }
      }
      yield* Effect.sleep(options.pollInterval)
    }
  })
