/**
 * The devnet attestor's clock (`DEVNET_CHAIN_CLOCK`, docs/protocol.md §9 "The devnet's clock"):
 * the time of the devnet chain rather than this machine's. A test or example that skips a bind's
 * delay with `evm_increaseTime` moves anvil's clock ahead of the wall clock for good; an attestor
 * that kept signing deadlines by the wall clock would then sign deadlines already past on chain.
 *
 * Anvil's next block is stamped with the wall clock plus the total time it was moved forward, which
 * `evm_increaseTime(0)` answers without moving it; this clock is the wall clock plus that offset,
 * read in the background every `refreshMs`. Sleeping stays on the wall clock: only "now" follows the chain.
 * Production never sets it: the setting is refused on any chain but the devnet's.
 */
import { Clock, Duration, Effect, Layer, Schedule } from "effect"

/** Anvil's chain id: the only chain `DEVNET_CHAIN_CLOCK` is accepted on (docs/protocol.md §9). */
export const DEVNET_CHAIN_ID = 31_337

/** Asks anvil how far (seconds) its clock runs ahead of the wall clock, without moving it. */
export const readOffsetSeconds = async (rpcUrl: string, timeoutMs: number): Promise<number> => {
  const response = await fetch(rpcUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "evm_increaseTime", params: [0] }),
    signal: AbortSignal.timeout(timeoutMs)
  })
  const body = (await response.json()) as { result?: unknown }
  const offset = typeof body.result === "string" ? Number(body.result) : body.result
  if (typeof offset !== "number" || !Number.isFinite(offset)) throw new Error("not an offset")
  return offset
}

/**
 * A clock whose now is the devnet chain's: the wall clock plus anvil's offset, never behind the
 * wall clock. `offsetMs` is read by the layer below, in the background: a request reads the clock
 * without waiting on the RPC.
 */
const chainClock = (offsetMs: () => number): Clock.Clock => {
  const wall = Clock.make()
  const unsafeCurrentTimeMillis = () => wall.unsafeCurrentTimeMillis() + offsetMs()
  const unsafeCurrentTimeNanos = () => wall.unsafeCurrentTimeNanos() + BigInt(offsetMs()) * 1_000_000n
  return {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis,
    unsafeCurrentTimeNanos,
    currentTimeMillis: Effect.sync(unsafeCurrentTimeMillis),
    currentTimeNanos: Effect.sync(unsafeCurrentTimeNanos),
    sleep: (duration: Duration.Duration) => wall.sleep(duration)
  }
}

/**
 * How many whole seconds the clock a fiber runs on is ahead of this machine's: 0 in production, the
 * devnet chain's lead under `DEVNET_CHAIN_CLOCK`.
 */
export const clockLeadSeconds: Effect.Effect<number> = Effect.map(Clock.currentTimeMillis, (now) =>
  Math.max(0, Math.round((now - Date.now()) / 1000))
)

/**
 * Runs whatever is built with this layer on the devnet chain's clock. The offset is read once
 * before anything runs, then every `refreshMs` in a fiber of the layer's scope (on the wall clock);
 * a failed read keeps the last one.
 */
export const DevnetChainClock = {
  layer: (
    rpcUrl: string,
    options: { readonly refreshMs?: number; readonly timeoutMs?: number } = {}
  ): Layer.Layer<never> =>
    Layer.unwrapScoped(
      Effect.gen(function* () {
        let offsetMs = 0
        const read = Effect.tryPromise(() => readOffsetSeconds(rpcUrl, options.timeoutMs ?? 2_000)).pipe(
          Effect.tap((seconds) =>
            Effect.sync(() => {
              offsetMs = Math.max(0, seconds) * 1000
            })
          ),
          Effect.ignore
        )
        yield* read
        yield* read.pipe(
          Effect.repeat(Schedule.spaced(Duration.millis(options.refreshMs ?? 500))),
          Effect.forkScoped
        )
        return Layer.setClock(chainClock(() => offsetMs))
      })
    )
}
