import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Exit, Option } from "effect"
import { ChainClient, ChainUnavailable } from "../../src/chain/ChainClient.js"
import { mockChainClient } from "../../src/chain/MockChainClient.js"

// A piece of logic above the chain, as a route or a background job would have it.
const headSummary = Effect.gen(function* () {
  const chain = yield* ChainClient
  const [chainId, block] = yield* Effect.all([chain.chainId, chain.blockNumber])
  return `${chainId}@${block}`
})

describe("mockChainClient", () => {
  it.effect("serves the stubbed operations", () =>
    Effect.gen(function* () {
      expect(yield* headSummary).toBe("31337@12")
      const chain = yield* ChainClient
      expect(yield* chain.getTransactionReceipt(`0x${"00".repeat(32)}`)).toEqual(Option.none())
    }).pipe(
      Effect.provide(
        mockChainClient({
          chainId: Effect.succeed(31337),
          blockNumber: Effect.succeed(12n),
          getTransactionReceipt: () => Effect.succeed(Option.none())
        })
      )
    )
  )

  it.effect("lets a stub fail with the typed errors", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(headSummary)
      expect(error).toBeInstanceOf(ChainUnavailable)
    }).pipe(
      Effect.provide(
        mockChainClient({
          chainId: Effect.succeed(31337),
          blockNumber: Effect.fail(
            new ChainUnavailable({
              operation: "eth_blockNumber",
              reason: "down",
              attempts: 3,
              cause: undefined
            })
          )
        })
      )
    )
  )

  it.effect("dies with a clear defect for an operation nobody stubbed", () =>
    Effect.gen(function* () {
      const chain = yield* ChainClient
      const value = yield* Effect.exit(Effect.asVoid(chain.blockNumber))
      const call = yield* Effect.exit(Effect.asVoid(chain.call({ to: `0x${"00".repeat(20)}`, data: "0x" })))
      for (const [exit, operation] of [
        [value, "blockNumber"],
        [call, "call"]
      ] as const) {
        expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
        if (Exit.isFailure(exit))
          expect(Cause.pretty(exit.cause)).toContain(`ChainClient.${operation} not stubbed`)
      }
    }).pipe(Effect.provide(mockChainClient({ chainId: Effect.succeed(1) })))
  )
})
