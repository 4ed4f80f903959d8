/**
 * Unix seconds on the Effect clock: the one the tests' TestClock and the devnet chain's clock
 * (src/chain/DevnetChainClock.ts) replace. Every deadline and expiry the services sign, store or
 * check is read through it, never through `Date.now()`.
 */
import { Clock, Effect } from "effect"

export const nowSeconds: Effect.Effect<number> = Effect.map(Clock.currentTimeMillis, (ms) =>
  Math.floor(ms / 1000)
)
