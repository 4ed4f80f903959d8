/**
 * Handlers of the attestor's operator endpoints: health (with the vault indexer's and the hint
 * index's progress and the veto watcher's state, never account data) and metrics.
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { AttestorSettings } from "../config/attestor.js"
import { handleMetrics } from "../http/operator.js"
import { indexerHealth } from "../indexer/health.js"
import { Indexer } from "../indexer/Indexer.js"
import { AttestorApi } from "./api.js"
import { HintIndex } from "./hintIndex.js"
import { VetoWatcher } from "./VetoWatcher.js"

export const AttestorOperatorLive = HttpApiBuilder.group(AttestorApi, "operator", (handlers) =>
  Effect.gen(function* () {
    const settings = yield* AttestorSettings
    const indexer = yield* Indexer
    const hints = yield* HintIndex
    const watcher = yield* VetoWatcher
    return handlers
      .handle("health", () =>
        Effect.all({ indexer: indexer.status, hints: hints.status, veto: watcher.status }).pipe(
          Effect.map(({ indexer, hints, veto }) => ({
            ok: true as const,
            indexer: indexerHealth(indexer),
            hints: { state: hints.state, ...(hints.block === undefined ? {} : { block: hints.block }) },
            vetoWatcher: {
              state: veto.state,
              autoVeto: veto.autoVeto,
              ...(veto.block === undefined ? {} : { block: veto.block })
            }
          }))
        )
      )
      .handle("metrics", handleMetrics(settings.metricsToken))
  })
)
