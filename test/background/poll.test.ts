/**
 * `pollForChanges`, the loop of the hint index and the veto watcher: nothing until there is
 * something to see, a run at once on first sight and on every change, none while nothing changes
 * until the resync interval has passed, and a failure ends the loop (for its supervisor). On the
 * test clock.
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, TestClock } from "effect"
import { pollForChanges } from "../../src/background/poll.js"

describe("pollForChanges", () => {
  it.effect("runs on first sight and on change, and on resync only after the interval", () =>
    Effect.gen(function* () {
      let current: string | undefined
      const runs: Array<string> = []
      const fiber = yield* Effect.fork(
        pollForChanges({
          read: Effect.sync(() => current),
          keyOf: (seen) => seen,
          onChange: (seen) => Effect.sync(() => void runs.push(seen)),
          pollInterval: Duration.millis(100),
          resyncInterval: Duration.seconds(5)
        })
      )
      yield* TestClock.adjust(Duration.millis(300))
      expect(runs).toEqual([])
      current = "a"
      yield* TestClock.adjust(Duration.millis(100))
      expect(runs).toEqual(["a"])
      yield* TestClock.adjust(Duration.seconds(4))
      expect(runs).toEqual(["a"])
      current = "b"
      yield* TestClock.adjust(Duration.millis(100))
      expect(runs).toEqual(["a", "b"])
      // Nothing changes: one more run once the resync interval has passed since the last.
      yield* TestClock.adjust(Duration.millis(4_800))
      expect(runs).toEqual(["a", "b"])
      yield* TestClock.adjust(Duration.millis(200))
      expect(runs).toEqual(["a", "b", "b"])
      yield* Fiber.interrupt(fiber)
    })
  )

  it.effect("ends with the failure of a run", () =>
    Effect.gen(function* () {
      const fiber = yield* Effect.fork(
        pollForChanges({
          read: Effect.succeed("x"),
          keyOf: (seen) => seen,
          onChange: () => Effect.fail("refused" as const),
          pollInterval: Duration.millis(100),
          resyncInterval: Duration.seconds(5)
        })
      )
      const exit = yield* Fiber.await(fiber)
      expect(exit).toEqual(Exit.fail("refused"))
    })
  )
})
