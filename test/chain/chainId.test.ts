/**
 * The lazily read chain id: the configured one without asking the chain; else the RPC's, asked
 * only when first needed, asked again after a failure, and kept once it answered (one read in
 * flight for concurrent callers).
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Either, Fiber, Option } from "effect"
import { ChainUnavailable } from "../../src/chain/ChainClient.js"
import { lazyChainId } from "../../src/chain/chainId.js"
import { mockChainClient } from "../../src/chain/MockChainClient.js"

describe("lazyChainId", () => {
  it.effect("uses the configured id and never asks the chain", () =>
    Effect.gen(function* () {
      const chainId = yield* lazyChainId(Option.some(56))
      expect(yield* chainId).toBe(56)
    }).pipe(Effect.provide(mockChainClient({})))
  )

  it.effect("asks the chain on first use, again after a failure, and not once it answered", () =>
    Effect.gen(function* () {
      let reads = 0
      let up = false
      const gate = yield* Deferred.make<void>()
      const chain = mockChainClient({
        chainId: Effect.suspend(() => {
          reads++
          return up
            ? Effect.as(Deferred.await(gate), 31337)
            : Effect.fail(
                new ChainUnavailable({ operation: "eth_chainId", reason: "down", attempts: 1, cause: null })
              )
        })
      })
      const chainId = yield* lazyChainId(Option.none()).pipe(Effect.provide(chain))
      expect(reads).toBe(0)
      expect(Either.isLeft(yield* Effect.either(chainId))).toBe(true)
      expect(reads).toBe(1)
      up = true
      // Three callers while the first answer is on its way: one read.
      const callers = yield* Effect.fork(
        Effect.all([chainId, chainId, chainId], { concurrency: "unbounded" })
      )
      yield* Effect.yieldNow()
      yield* Deferred.succeed(gate, undefined)
      expect(yield* Fiber.join(callers)).toEqual([31337, 31337, 31337])
      expect(reads).toBe(2)
      expect(yield* chainId).toBe(31337)
      expect(reads).toBe(2)
    })
  )
})
