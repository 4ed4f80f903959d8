/**
 * The collection after a replay (src/background/collectGarbage.ts): once after a replay of at least
 * the threshold's events, never after the writer's own commits or a small replay, and nothing at
 * all when the process runs without `--expose-gc`.
 */
import { Effect } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { collectReplayGarbage, REPLAY_COLLECTION_THRESHOLD } from "../../src/background/collectGarbage.js"

const global = globalThis as { gc?: unknown }
const original = global.gc

afterEach(() => {
  if (original === undefined) delete global.gc
  else global.gc = original
})

/** Counts the collections asked for while `gc` is exposed. */
const exposeCountingGc = () => {
  const calls = { count: 0 }
  global.gc = () => {
    calls.count++
  }
  return calls
}

describe("collectReplayGarbage", () => {
  it("collects once per replay of at least the threshold's events", () => {
    const calls = exposeCountingGc()
    Effect.runSync(collectReplayGarbage({ replayed: true, applied: REPLAY_COLLECTION_THRESHOLD }))
    expect(calls.count).toBe(1)
    Effect.runSync(collectReplayGarbage({ replayed: true, applied: 100_000 }))
    expect(calls.count).toBe(2)
  })

  it("leaves small replays and syncs that are not replays alone", () => {
    const calls = exposeCountingGc()
    Effect.runSync(collectReplayGarbage({ replayed: true, applied: REPLAY_COLLECTION_THRESHOLD - 1 }))
    Effect.runSync(collectReplayGarbage({ replayed: false, applied: 100_000 }))
    expect(calls.count).toBe(0)
  })

  it("does nothing without --expose-gc, or when a global `gc` is not the collector", () => {
    const replay = collectReplayGarbage({ replayed: true, applied: 100_000 })
    delete global.gc
    expect(() => Effect.runSync(replay)).not.toThrow()
    global.gc = { collect: true }
    expect(() => Effect.runSync(replay)).not.toThrow()
  })
})
