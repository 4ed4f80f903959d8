/**
 * `superviseForever`, the restart loop of the indexer, the hint index, the veto watcher and the tx
 * sender's fibers: delays double per consecutive failure up to the cap, a run that lasted over a
 * minute starts the backoff over, and interruption stops it. On the test clock.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Duration, Effect, Exit, Fiber, Option, TestClock } from "effect"
import { superviseForever } from "../../src/background/supervised.js"

const BASE = 100
const MAX = 1_000

describe("superviseForever", () => {
  it.effect("backs off per consecutive failure and starts over after a long run", () =>
    Effect.gen(function* () {
      const delays: Array<number> = []
      const causes: Array<Cause.Cause<unknown>> = []
      let runs = 0
      // Six quick failures, one after two minutes of running, then two quick ones again.
      const work = Effect.suspend(() => {
        runs++
        const lasting = runs === 7 ? Effect.sleep(Duration.minutes(2)) : Effect.void
        return Effect.zipRight(lasting, Effect.fail(`run ${runs}`))
      })
      const fiber = yield* Effect.fork(
        superviseForever(work, {
          baseDelayMs: BASE,
          maxDelayMs: MAX,
          onRestart: (cause, delay) =>
            Effect.sync(() => {
              causes.push(cause)
              delays.push(delay)
            })
        })
      )
      while (runs < 9) yield* TestClock.adjust(Duration.millis(500))
      yield* Fiber.interrupt(fiber)

      // Jittered within half to all of base * 2^(n-1), capped.
      const within = (delay: number | undefined, nominal: number) => {
        expect(delay).toBeGreaterThanOrEqual(nominal / 2)
        expect(delay).toBeLessThanOrEqual(nominal)
      }
      within(delays[0], BASE)
      within(delays[1], BASE * 2)
      within(delays[2], BASE * 4)
      within(delays[3], BASE * 8)
      within(delays[4], MAX)
      within(delays[5], MAX)
      // The seventh run lasted two minutes: its failure is the first of a new series.
      within(delays[6], BASE)
      within(delays[7], BASE * 2)
      expect(Option.getOrUndefined(Cause.failureOption(causes[6] as Cause.Cause<unknown>))).toBe("run 7")
    })
  )

  it.effect("stops when interrupted, and runs the work again when it ends", () =>
    Effect.gen(function* () {
      let runs = 0
      const fiber = yield* Effect.fork(
        superviseForever(
          Effect.suspend(() => {
            runs++
            return Effect.sleep(Duration.seconds(1))
          }),
          { onRestart: () => Effect.die("no failure expected") }
        )
      )
      yield* TestClock.adjust(Duration.millis(3_500))
      expect(runs).toBe(4)
      const exit = yield* Fiber.interrupt(fiber)
      expect(Exit.isInterrupted(exit)).toBe(true)
    })
  )
})
