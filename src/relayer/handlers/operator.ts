/** Handlers of the relayer's operator endpoints (src/relayer/api/operator.ts): health and metrics. */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { MetricsEndpoint } from "../../http/MetricsEndpoint.js"
import { RelayerApi } from "../api/index.js"
import { RelayerHealth } from "../RelayerHealth.js"

export const RelayerOperatorHandlers = HttpApiBuilder.group(RelayerApi, "operator", (handlers) =>
  Effect.all([RelayerHealth, MetricsEndpoint]).pipe(
    Effect.map(([health, metrics]) =>
      handlers.handle("health", () => health.current).handle("metrics", metrics.serve)
    )
  )
)
