/**
 * The shared freshness rule (`src/indexer/freshness.ts`) and how health reads it: the chain is
 * asked only for a stale index, and a lag is never made up from a head as old as the index.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { ChainUnavailable } from "../../src/chain/errors.js"
import { mockChainClient } from "../../src/chain/MockChainClient.js"
import { chainReach, checkChain, isStale, requireServable } from "../../src/indexer/freshness.js"
import { indexerHealth } from "../../src/indexer/health.js"
import type { IndexerStatus } from "../../src/indexer/Indexer.js"

const down = mockChainClient({
  blockNumber: Effect.fail(
    new ChainUnavailable({ operation: "eth_blockNumber", reason: "no answer", attempts: 3, cause: undefined })
  )
})
const up = mockChainClient({ blockNumber: Effect.succeed(40n) })
// Asking it dies: proves a fresh index is served without a chain read.
const unasked = mockChainClient({})

const status = (state: IndexerStatus["state"], freshUntil?: number): IndexerStatus => ({
  state,
  block: 30,
  head: 30,
  leader: true,
  ...(freshUntil === undefined ? {} : { freshUntil })
})

describe("isStale", () => {
  it("is stale after a failed step or past the head's freshness window", () => {
    expect(isStale(status("retrying"), 0)).toBe(true)
    expect(isStale(status("following", 100), 100)).toBe(false)
    expect(isStale(status("following", 100), 101)).toBe(true)
    expect(isStale(status("standby"), 10_000)).toBe(false)
  })
})

describe("checkChain", () => {
  it.effect("does not ask the chain for fresh indexes", () =>
    Effect.gen(function* () {
      expect(yield* checkChain([status("following")])).toEqual({ _tag: "Fresh" })
      expect(yield* checkChain([])).toEqual({ _tag: "Fresh" })
    }).pipe(Effect.provide(unasked))
  )

  it.effect("asks once for a stale index: answered or unreachable", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(5_000)
      expect(yield* checkChain([status("following", 4_000)]).pipe(Effect.provide(up))).toEqual({
        _tag: "Answered",
        head: 40
      })
      const check = yield* checkChain([status("retrying")]).pipe(Effect.provide(down))
      expect(check).toEqual({ _tag: "Unreachable" })
      expect(chainReach(check)).toBe("unreachable")
      const refused = yield* Effect.flip(
        requireServable([status("retrying")], "stale").pipe(Effect.provide(down))
      )
      expect(refused._tag).toBe("Unavailable")
    })
  )
})

describe("indexerHealth", () => {
  it("measures lag against the freshest head and leaves it out when unknown", () => {
    expect(indexerHealth(status("following"))).toEqual({ state: "following", block: 30, lag: 0 })
    expect(indexerHealth(status("retrying"), { _tag: "Answered", head: 45 })).toEqual({
      state: "retrying",
      block: 30,
      lag: 15
    })
    // The head a failing indexer remembers is as old as its block: no lag 0 from it.
    expect(indexerHealth(status("retrying"))).toEqual({ state: "retrying", block: 30 })
    expect(indexerHealth(status("retrying"), { _tag: "Unreachable" })).toEqual({
      state: "retrying",
      block: 30
    })
  })
})
