/**
 * Handlers of the attestor's operator endpoints (src/attestor/api/operator.ts): health (whether the chain answers, the vault
 * indexer's and the hint index's progress, the veto watcher's state and, with `AUTO_VETO`, the
 * attestor key's sender; never account data) and metrics.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Option } from "effect"
import type { Address } from "../../../schema/primitives.js"
import { ChainClient } from "../../chain/ChainClient.js"
import { AttestorSettings } from "../../config/attestor.js"
import { handleMetrics } from "../../http/operator.js"
import { chainReach, checkChain } from "../../indexer/freshness.js"
import { indexerHealth } from "../../indexer/health.js"
import { Indexer } from "../../indexer/Indexer.js"
import { HotKeyState } from "../../txsender/TxSender.js"
import { AttestorApi } from "../api/index.js"
import { HintIndex } from "../hintIndex.js"
import { VetoWatcher } from "../VetoWatcher.js"

export const AttestorOperatorLive = HttpApiBuilder.group(AttestorApi, "operator", (handlers) =>
  Effect.gen(function* () {
    const settings = yield* AttestorSettings
    const indexer = yield* Indexer
    const hints = yield* HintIndex
    const watcher = yield* VetoWatcher
    const chain = yield* ChainClient
    // Provided with AUTO_VETO only (layers/attestor.ts). Unlike the relayer's, its state not
    // answering leaves it out rather than failing health: `ok` says the process serves.
    const sender = Option.match(yield* Effect.serviceOption(HotKeyState), {
      onNone: () => Effect.succeed(Option.none()),
      onSome: (key) => Effect.option(key.state)
    })
    return handlers
      .handle("health", () =>
        Effect.all({ indexer: indexer.status, hints: hints.status, veto: watcher.status, sender }).pipe(
          Effect.bindTo("s"),
          // The chain is asked only when an index is stale (the rule of /v1/escrows); a fresh
          // index read the head within a few poll intervals. No indexer, no evidence: no `chain`.
          Effect.bind("check", ({ s }) =>
            checkChain(s.indexer.state === "disabled" ? [] : [s.indexer, s.hints]).pipe(
              Effect.provideService(ChainClient, chain)
            )
          ),
          Effect.map(({ s: { indexer: status, hints, veto, sender }, check }) => ({
            // `ok` stays true with the chain gone: commitments, logins and /v1/info need no
            // chain; `chain` and the indexes tell what does not work (docs/attestor.md: `{ ok: true }`).
            ok: true as const,
            ...(status.state === "disabled" ? {} : { chain: chainReach(check) }),
            indexer: indexerHealth(status, check),
            hints: { state: hints.state, ...(hints.block === undefined ? {} : { block: hints.block }) },
            vetoWatcher: {
              state: veto.state,
              autoVeto: veto.autoVeto,
              ...(veto.block === undefined ? {} : { block: veto.block })
            },
            // The key's address comes checksummed from its private key.
            ...Option.match(sender, {
              onNone: () => ({}),
              onSome: (state) => ({ sender: { ...state, address: state.address as Address } })
            })
          }))
        )
      )
      .handle("metrics", handleMetrics(settings.metricsToken))
  })
)
