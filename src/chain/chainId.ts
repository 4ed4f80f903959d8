/**
 * The chain id a service answers and signs for: the configured one (`CHAIN_ID`, or the deployment
 * file's), else the RPC's, read the first time it is needed and kept once it answered. Never read
 * while a layer is built, so a service starts, and answers 503 where it needs the id, while its
 * RPC is down.
 */
import { Effect, Option } from "effect"
import { ChainClient, type ChainRequestError } from "./ChainClient.js"

export const lazyChainId = (
  configured: Option.Option<number>
): Effect.Effect<Effect.Effect<number, ChainRequestError>, never, ChainClient> =>
  Option.match(configured, {
    onSome: (chainId) => Effect.succeed(Effect.succeed(chainId)),
    onNone: () =>
      Effect.gen(function* () {
        const chain = yield* ChainClient
        // One read at a time: callers arriving meanwhile take its answer, or try again after it failed.
        const reading = yield* Effect.makeSemaphore(1)
        let known: number | undefined
        const cached = Effect.suspend(() =>
          known === undefined
            ? Effect.tap(chain.chainId, (chainId) =>
                Effect.sync(() => {
                  known = chainId
                })
              )
            : Effect.succeed(known)
        )
        return Effect.suspend(() =>
          known === undefined ? reading.withPermits(1)(cached) : Effect.succeed(known)
        )
      })
  })
