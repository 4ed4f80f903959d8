/**
 * Housekeeping that runs at most once per interval per process (pruning expired sessions, OAuth
 * states): the first call runs it, later calls within `intervalSeconds` of the last run skip it.
 * `now` is the caller's (unix seconds of its `Clock`), so tests move it with the test clock.
 */
import { Effect, Ref } from "effect"

export const atMostEvery = (intervalSeconds: number) =>
  Effect.map(
    Ref.make<number | undefined>(undefined),
    (last) =>
      <E, R>(now: number, work: Effect.Effect<void, E, R>): Effect.Effect<void, E, R> =>
        Effect.flatMap(
          Ref.modify(last, (at) =>
            at === undefined || now - at >= intervalSeconds ? [true, now] : [false, at]
          ),
          (due) => (due ? work : Effect.void)
        )
  )
