/**
 * The chain id a service answers and signs for: the configured one (`CHAIN_ID`, or the deployment
 * file's), else the RPC's, read the first time it is needed and kept once it answered
 * (`keptOnceRead`).
 */
import { Context, Effect, Layer, Option } from "effect"
import type { Unavailable } from "../../schema/errors.js"
import { keptOnceRead } from "../background/once.js"
import { ChainClient, type ChainRequestError } from "./ChainClient.js"
import { chainUnavailable } from "./errors.js"

export const lazyChainId = (
  configured: Option.Option<number>
): Effect.Effect<Effect.Effect<number, ChainRequestError>, never, ChainClient> =>
  Option.match(configured, {
    onSome: (chainId) => Effect.succeed(Effect.succeed(chainId)),
    onNone: () => Effect.flatMap(ChainClient, (chain) => keptOnceRead(chain.chainId))
  })

export interface ChainIdShape {
  /** The chain id; 503 `unavailable` while it is not configured and the RPC does not answer. */
  readonly get: Effect.Effect<number, Unavailable>
}

/** The chain id of a service, read once, lazily (see the module header); provided once per service. */
export class ChainId extends Context.Tag("ChainId")<ChainId, ChainIdShape>() {
  static readonly layer = (configured: Option.Option<number>): Layer.Layer<ChainId, never, ChainClient> =>
    Layer.effect(
      ChainId,
      Effect.map(lazyChainId(configured), (read) => ({ get: Effect.mapError(read, chainUnavailable) }))
    )

  /** A known chain id, for tests. */
  static readonly test = (chainId: number): Layer.Layer<ChainId> =>
    Layer.succeed(ChainId, { get: Effect.succeed(chainId) })
}
