/**
 * A value read from outside (an RPC, a facilitator) the first time it is needed and kept once the
 * read succeeded: callers arriving during a read wait for its answer; after a failure the next
 * caller tries again. Never read while a layer is built, so a service starts, and answers 503 where
 * it needs the value, while that outside party is down.
 */
import { Effect } from "effect"

export const keptOnceRead = <A, E, R>(read: Effect.Effect<A, E, R>): Effect.Effect<Effect.Effect<A, E, R>> =>
  Effect.map(Effect.makeSemaphore(1), (reading) => {
    let known: { readonly value: A } | undefined
    const readAndKeep = Effect.suspend(() =>
      known !== undefined
        ? Effect.succeed(known.value)
        : Effect.tap(read, (value) =>
            Effect.sync(() => {
              known = { value }
            })
          )
    )
    return Effect.suspend(() =>
      known !== undefined ? Effect.succeed(known.value) : reading.withPermits(1)(readAndKeep)
    )
  })
