/**
 * The body of the relayer's `GET /v1/health` (docs/relayer.md): the chain, the indexer's progress
 * and the hot key's state. With the chain not answering it is 503 `unavailable`: the body needs
 * `block`.
 */
import { Context, Effect, Layer } from "effect"
import type { Unavailable } from "../../schema/errors.js"
import type { Address } from "../../schema/primitives.js"
import type { HealthResponse } from "../../schema/relayer.js"
import { ChainClient } from "../chain/ChainClient.js"
import { chainUnavailable } from "../chain/errors.js"
import { indexerHealth } from "../indexer/health.js"
import { Indexer } from "../indexer/Indexer.js"
import { HotKeyState } from "../txsender/TxSender.js"

export interface RelayerHealthShape {
  readonly current: Effect.Effect<HealthResponse, Unavailable>
}

export class RelayerHealth extends Context.Tag("RelayerHealth")<RelayerHealth, RelayerHealthShape>() {
  static readonly layer: Layer.Layer<RelayerHealth, never, ChainClient | Indexer | HotKeyState> =
    Layer.effect(
      RelayerHealth,
      Effect.gen(function* () {
        const chain = yield* ChainClient
        const indexer = yield* Indexer
        const hotKey = yield* HotKeyState
        const current = Effect.all({
          chainId: chain.chainId,
          block: chain.blockNumber,
          indexer: indexer.status
        }).pipe(
          Effect.mapError(chainUnavailable),
          Effect.zip(hotKey.state),
          Effect.map(
            ([{ chainId, block, indexer }, sender]): HealthResponse => ({
              ok: true as const,
              chainId,
              block: Number(block),
              // Lag against the head just read, not the indexer's own (as old as a failing step).
              indexer: indexerHealth(indexer, { _tag: "Answered", head: Number(block) }),
              // The hot key's address comes checksummed from its private key.
              sender: { ...sender, address: sender.address as Address }
            })
          )
        )
        return { current }
      })
    )
}
