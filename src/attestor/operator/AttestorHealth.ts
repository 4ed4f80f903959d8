/**
 * The body of the attestor's `GET /v1/health` (docs/attestor.md §4): whether the chain answers,
 * the vault indexer's and the hint index's progress, the veto watcher's state and, with
 * `AUTO_VETO`, the attestor key's sender. Never account data.
 */
import { Context, Effect, Layer, Option } from "effect"
import type { AttestorHealthResponse } from "../../../schema/attestor.js"
import type { Address } from "../../../schema/primitives.js"
import { ChainClient } from "../../chain/ChainClient.js"
import { chainReach, checkChain } from "../../indexer/freshness.js"
import { indexerHealth } from "../../indexer/health.js"
import { Indexer } from "../../indexer/Indexer.js"
import { HotKeyState } from "../../txsender/TxSender.js"
import { HintIndex } from "../hints/HintIndex.js"
import { VetoWatcher } from "../veto/VetoWatcher.js"

export interface AttestorHealthShape {
  readonly current: Effect.Effect<AttestorHealthResponse>
}

export class AttestorHealth extends Context.Tag("AttestorHealth")<AttestorHealth, AttestorHealthShape>() {
  static readonly layer: Layer.Layer<AttestorHealth, never, Indexer | HintIndex | VetoWatcher | ChainClient> =
    Layer.effect(
      AttestorHealth,
      Effect.gen(function* () {
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
        const current = Effect.all({
          indexer: indexer.status,
          hints: hints.status,
          veto: watcher.status,
          sender
        }).pipe(
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
        return { current }
      })
    )
}
