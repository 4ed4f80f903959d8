/** Handlers of the attestor's operator endpoints (src/attestor/operator/api.ts): health and metrics. */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { MetricsEndpoint } from "../../http/MetricsEndpoint.js"
import { AttestorApi } from "../api.js"
import { AttestorHealth } from "./AttestorHealth.js"

export const AttestorOperatorHandlers = HttpApiBuilder.group(AttestorApi, "operator", (handlers) =>
  Effect.all([AttestorHealth, MetricsEndpoint]).pipe(
    Effect.map(([health, metrics]) =>
      handlers.handle("health", () => health.current).handle("metrics", metrics.serve)
    )
  )
)
