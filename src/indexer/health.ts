/**
 * How the indexers (the vault indexer, the attestor's hint index) report themselves: their state
 * in `/v1/health`, and their failures in log lines, both without account data.
 */
import { Cause, Clock, Duration, Effect, Exit } from "effect"
import type { IndexerHealth } from "../../schema/relayer.js"
import type { ChainCheck } from "./freshness.js"
import type { IndexerStatus } from "./Indexer.js"

/**
 * `lag` is measured against the freshest head there is: the one `check` just read, else the
 * indexer's own. It is absent (unknown) when the chain did not answer, and when the indexer's
 * last step failed with no fresh head to compare: its remembered head is as old as its block, so
 * the difference would say 0 exactly when the index is falling behind.
 */
export const indexerHealth = (s: IndexerStatus, check: ChainCheck = { _tag: "Fresh" }): IndexerHealth => {
  const head =
    check._tag === "Answered"
      ? check.head
      : check._tag === "Unreachable" || s.state === "retrying"
        ? undefined
        : s.head
  return {
    state: s.state,
    ...(s.block === undefined ? {} : { block: s.block }),
    ...(s.block === undefined || head === undefined ? {} : { lag: Math.max(0, head - s.block) })
  }
}

/** A failure for the log, never with a URL, a request body or a node's text (`src/logging.ts`). */
export { describeFailure } from "../logging.js"

export interface SuperviseOptions {
  /** First restart delay after a failure; doubles per consecutive failure. Default 500 ms. */
  readonly baseDelayMs?: number | undefined
  /** Longest restart delay. Default 30 s. */
  readonly maxDelayMs?: number | undefined
  /** Runs before each restart's delay: count it, set the state, log `describeFailure(cause)`. */
  readonly onRestart: (cause: Cause.Cause<unknown>, delayMs: number) => Effect.Effect<void>
}

/**
 * Runs `work` for the lifetime of the calling fiber: again when it ends, and after a failure
 * once a jittered exponential delay has passed. A run that lasted over a minute before failing
 * starts the backoff over. Only interruption stops it.
 */
export const superviseForever = <E, R>(work: Effect.Effect<void, E, R>, options: SuperviseOptions) =>
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
      yield* options.onRestart(exit.cause, delay)
      yield* Effect.sleep(Duration.millis(delay))
    }
  })
