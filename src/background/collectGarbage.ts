/**
 * One full garbage collection after a projection was read up from the store's start block (the
 * start-up replay, or a rebuild after a rewind deeper than the undo journal). Decoding every
 * stored event leaves tens of MiB of garbage in V8's old generation at 100k events; left to itself
 * V8 keeps those pages resident for as long as the process runs, since a service at rest seldom
 * reaches its next full collection.
 *
 * Needs `--expose-gc` (src/bin/processTuning.ts); without it this does nothing. Small replays are
 * left alone: the collection stops the event loop for a few tens of ms.
 */
import { Duration, Effect } from "effect"

/** Fewer events than this leave too little garbage to be worth a pause. */
export const REPLAY_COLLECTION_THRESHOLD = 10_000

const exposedGc = (): (() => void) | undefined => {
  const gc = (globalThis as { gc?: unknown }).gc
  return typeof gc === "function" ? (gc as () => void) : undefined
}

/** Collects once if a replay applied at least the threshold's events and `gc` is exposed. */
export const collectReplayGarbage = (outcome: {
  readonly replayed: boolean
  readonly applied: number
}): Effect.Effect<void> =>
  Effect.suspend(() => {
    const gc = exposedGc()
    if (gc === undefined || !outcome.replayed || outcome.applied < REPLAY_COLLECTION_THRESHOLD)
      return Effect.void
    return Effect.sync(gc).pipe(
      Effect.timed,
      Effect.flatMap(([took]) =>
        Effect.logDebug("collected a replay's garbage").pipe(
          Effect.annotateLogs({ events: outcome.applied, took_ms: Math.round(Duration.toMillis(took)) })
        )
      )
    )
  })
