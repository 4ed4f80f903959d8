/**
 * Handlers of the relayer's operator endpoints (src/relayer/api/operator.ts): health (the chain,
 * the indexer's progress and the hot key's state) and metrics.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import type { Address } from "../../../schema/primitives.js"
import { ChainClient } from "../../chain/ChainClient.js"
import { chainUnavailable } from "../../chain/errors.js"
import { RelayerSettings } from "../../config/relayer.js"
import { handleMetrics } from "../../http/operator.js"
import { indexerHealth } from "../../indexer/health.js"
import { Indexer } from "../../indexer/Indexer.js"
import { HotKeyState } from "../../txsender/TxSender.js"
import { RelayerApi } from "../api/index.js"

export const RelayerOperatorHandlers = HttpApiBuilder.group(RelayerApi, "operator", (handlers) =>
  Effect.gen(function* () {
    const chain = yield* ChainClient
    const settings = yield* RelayerSettings
    const indexer = yield* Indexer
    const hotKey = yield* HotKeyState
    return handlers
      .handle("health", () =>
        Effect.all({
          chainId: chain.chainId,
          block: chain.blockNumber,
          indexer: indexer.status
        }).pipe(
          Effect.mapError(chainUnavailable),
          Effect.zip(hotKey.state),
          Effect.map(([{ chainId, block, indexer }, sender]) => ({
            ok: true as const,
            chainId,
            block: Number(block),
            // Lag against the head just read, not the indexer's own (as old as a failing step).
            // With the chain not answering the whole answer is 503: docs/relayer.md's body needs `block`.
            indexer: indexerHealth(indexer, { _tag: "Answered", head: Number(block) }),
            // The hot key's address comes checksummed from its private key.
            sender: { ...sender, address: sender.address as Address }
          }))
        )
      )
      .handle("metrics", handleMetrics(settings.metricsToken))
  })
)
