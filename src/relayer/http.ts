/**
 * Handlers of the relayer's endpoints.
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { Unavailable } from "../../schema/errors.js"
import { ChainClient } from "../chain/ChainClient.js"
import { RelayerSettings } from "../config/relayer.js"
import { handleMetrics } from "../http/operator.js"
import { RelayerApi } from "./api.js"

export const RelayerOperatorLive = HttpApiBuilder.group(RelayerApi, "operator", (handlers) =>
  Effect.gen(function* () {
    const chain = yield* ChainClient
    const settings = yield* RelayerSettings
    return handlers
      .handle("health", () =>
        Effect.all({ chainId: chain.chainId, block: chain.blockNumber }).pipe(
          Effect.map(({ chainId, block }) => ({ ok: true as const, chainId, block: Number(block) })),
          Effect.mapError(() => new Unavailable({ message: "the chain RPC is not answering" }))
        )
      )
      .handle("metrics", handleMetrics(settings.metricsToken))
  })
)
