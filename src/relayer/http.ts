/**
 * Handlers of the relayer's endpoints.
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { Unavailable } from "../../schema/errors.js"
import type { IndexerHealth } from "../../schema/relayer.js"
import { ChainClient } from "../chain/ChainClient.js"
import { RelayerSettings } from "../config/relayer.js"
import { handleMetrics } from "../http/operator.js"
import { Indexer, type IndexerStatus } from "../indexer/Indexer.js"
import { AccountsFeed } from "./accounts.js"
import { RelayerApi } from "./api.js"

const indexerHealth = (s: IndexerStatus): IndexerHealth => ({
  state: s.state,
  ...(s.block === undefined ? {} : { block: s.block }),
  ...(s.block === undefined || s.head === undefined ? {} : { lag: Math.max(0, s.head - s.block) })
})

export const RelayerOperatorLive = HttpApiBuilder.group(RelayerApi, "operator", (handlers) =>
  Effect.gen(function* () {
    const chain = yield* ChainClient
    const settings = yield* RelayerSettings
    const indexer = yield* Indexer
    return handlers
      .handle("health", () =>
        Effect.all({ chainId: chain.chainId, block: chain.blockNumber, indexer: indexer.status }).pipe(
          Effect.map(({ chainId, block, indexer }) => ({
            ok: true as const,
            chainId,
            block: Number(block),
            indexer: indexerHealth(indexer)
          })),
          Effect.mapError(() => new Unavailable({ message: "the chain RPC is not answering" }))
        )
      )
      .handle("metrics", handleMetrics(settings.metricsToken))
  })
)

export const RelayerAccountsLive = HttpApiBuilder.group(RelayerApi, "accounts", (handlers) =>
  Effect.map(AccountsFeed, (feed) => handlers.handle("accounts", ({ headers }) => feed.respond(headers)))
)
