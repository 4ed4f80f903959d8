/**
 * Handlers of the attestor's endpoints.
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { AttestorSettings } from "../config/attestor.js"
import { handleMetrics } from "../http/operator.js"
import { AttestorApi } from "./api.js"

export const AttestorOperatorLive = HttpApiBuilder.group(AttestorApi, "operator", (handlers) =>
  Effect.map(AttestorSettings, (settings) =>
    handlers
      .handle("health", () => Effect.succeed({ ok: true as const }))
      .handle("metrics", handleMetrics(settings.metricsToken))
  )
)
