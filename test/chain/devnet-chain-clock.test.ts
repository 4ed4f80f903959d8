/**
 * The devnet attestor's clock (DEVNET_CHAIN_CLOCK, docs/protocol.md §9): this machine's time plus
 * how far anvil's clock was moved forward, read in the background from a JSON-RPC server on
 * loopback that answers `evm_increaseTime(0)` as anvil does (a hex number of seconds).
 */
import { createServer } from "node:http"
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Layer } from "effect"
import { DevnetChainClock } from "../../src/chain/DevnetChainClock.js"

/** A node whose clock runs `offset.seconds` ahead; `offset.failing` makes it answer 500. */
const fakeAnvil = Effect.acquireRelease(
  Effect.promise(async () => {
    const offset = { seconds: 3_600, failing: false }
    const server = createServer((request, response) => {
      request.resume()
      request.on("end", () => {
        if (offset.failing) {
          response.writeHead(500).end()
          return
        }
        response.writeHead(200, { "content-type": "application/json" })
        response.end(JSON.stringify({ jsonrpc: "2.0", id: 1, result: `0x${offset.seconds.toString(16)}` }))
      })
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
    const { port } = server.address() as { port: number }
    return { url: `http://127.0.0.1:${port}`, offset, server }
  }),
  ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
)

/** Seconds the clock inside `layer` runs ahead of this machine's. */
const leadSeconds = Effect.map(Clock.currentTimeMillis, (now) => Math.round((now - Date.now()) / 1000))

describe("the devnet chain's clock", () => {
  it.live("runs ahead by anvil's offset from the start, follows it, keeps it through a failed read", () =>
    Effect.gen(function* () {
      const anvil = yield* fakeAnvil
      const context = yield* Layer.build(DevnetChainClock.layer(anvil.url, { refreshMs: 50 }))
      const lead = leadSeconds.pipe(Effect.provide(context))
      // Read before anything runs on it: the first request is already on the chain's time.
      expect(yield* lead).toBe(3_600)
      anvil.offset.seconds = 7_200
      yield* Effect.sleep("300 millis")
      expect(yield* lead).toBe(7_200)
      // The node stops answering: the last offset stands.
      anvil.offset.failing = true
      yield* Effect.sleep("300 millis")
      expect(yield* lead).toBe(7_200)
      // The offset gone again (a fresh node): the clock is this machine's.
      anvil.offset.failing = false
      anvil.offset.seconds = 0
      yield* Effect.sleep("300 millis")
      expect(yield* lead).toBe(0)
    }).pipe(Effect.scoped)
  )

  it.live("a node that never answers leaves the wall clock", () =>
    Effect.gen(function* () {
      const context = yield* Layer.build(DevnetChainClock.layer("http://127.0.0.1:1", { refreshMs: 50 }))
      expect(yield* leadSeconds.pipe(Effect.provide(context))).toBe(0)
    }).pipe(Effect.scoped)
  )
})
