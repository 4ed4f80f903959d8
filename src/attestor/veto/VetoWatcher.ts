/**
 * The veto watcher (docs/attestor.md §1, §3 veto and contest rows, §6): a supervised fiber that
 * judges every pending bind proposal of the indexed vault and, with `AUTO_VETO`, sends
 * `vetoBind(id)` from the attestor's key for the ones this attestor did not attest. Its decisions
 * are pure (`vetoVerdicts.ts`: the verdicts and what to do with them); its record of judged
 * proposals is `ProposalStore`; this module is the loop that reads, decides and acts.
 *
 * Proposals. The vault indexer folds the canonical `BindProposed` events (and the
 * `BindFinalized` / `BindCancelled` that end them, following reorgs) into the account projection:
 * an account with a pending owner is a proposal still pending, `(id, pendingOwner, bindNonce - 1)`
 * (`proposeBind` consumed the bind nonce the `BindOwner` signatures were made for, docs/protocol.md §4,
 * and nothing else moves it while the bind is pending). Reading them there rather than from a
 * cursor of its own over the event store makes "still pending" and reorgs the indexer's business.
 * While the hint index lags behind the indexer, an id it does not know yet is left for a later
 * pass rather than judged `unknown_id`.
 *
 * Record (`ProposalStore`): a claimed veto that could not be handed to the transaction sender
 * (nothing sent) is released and tried on the next pass; a claim left `sending` (a stop, a store
 * that did not answer) stored nothing, and is taken again once stale. A `sent` veto whose
 * transaction reverted or was dropped while the index still has the proposal pending (a reorg put
 * it back) is sent again.
 *
 * Veto: `eth_call` of `vetoBind(id)` from the attestor's address first (a proposal cancelled or
 * finalized meanwhile, a node behind the indexer, or a key that is not an attestor, reverts:
 * nothing sent, counted `skipped` once, tried again on the next pass while the proposal is
 * pending in the index), then gas estimation (x1.2) and the durable `TxSender` of the attestor
 * key (provided by the attestor's wiring only with `AUTO_VETO`, layers/attestor.ts), which signs,
 * stores, broadcasts and replaces stuck attempts.
 *
 * Passes run whenever the indexer's projection changes and at least every `resyncIntervalMs`
 * (a contest changes attestations and contests, not the projection). A failed pass is logged without account
 * data, counted (`attestor_veto_watcher_restarts_total`) and restarted with jittered exponential
 * backoff. Metrics `attestor_bind_proposals_total{verdict}`, `attestor_vetoes_total{outcome}`.
 * No id, owner, address or hash reaches a log line or a label.
 */

import { Context, Duration, Effect, Layer, Metric, Option, Ref } from "effect"
import { type Address, encodeFunctionData } from "viem"
import { feeVaultAbi } from "../../../contracts/abi.js"
import { pollForChanges } from "../../background/poll.js"
import { supervised } from "../../background/supervised.js"
import { ChainClient } from "../../chain/ChainClient.js"
import { nowSeconds } from "../../clock.js"
import { AttestorSettings } from "../../config/attestor.js"
import { counter, type SeriesAtZero, valuesOf } from "../../http/metrics.js"
import { Indexer } from "../../indexer/Indexer.js"
import { TxSender, type TxSenderShape } from "../../txsender/TxSender.js"
import { AttestationStore } from "../binds/AttestationStore.js"
import { HintIndex } from "../hints/HintIndex.js"
import { ProposalStore, type ProposalStoreShape } from "./ProposalStore.js"
import { ownSignatureOf } from "./proposalSignatures.js"
import {
  committeeVerdict,
  decide,
  type Handled,
  needsOwnSignature,
  type OwnSignature,
  type Proposal,
  pendingProposals,
  type Verdict,
  type VetoRule,
  verdictOf,
  vetoDelaySeconds,
  withGasMargin
} from "./vetoVerdicts.js"

// ---------------------------------------------------------------------------------------------
// The watcher
// ---------------------------------------------------------------------------------------------

export type VetoWatcherState = "starting" | "ready" | "retrying" | "disabled"

export interface VetoWatcherStatus {
  readonly state: VetoWatcherState
  /** The indexer block of the last completed pass. */
  readonly block: number | undefined
  readonly autoVeto: boolean
}

export interface VetoWatcherShape {
  readonly status: Effect.Effect<VetoWatcherStatus>
}

export class VetoWatcher extends Context.Tag("VetoWatcher")<VetoWatcher, VetoWatcherShape>() {
  /** No watcher (wiring without an indexer). */
  static readonly disabled: Layer.Layer<VetoWatcher> = Layer.succeed(VetoWatcher, {
    status: Effect.succeed<VetoWatcherStatus>({ state: "disabled", block: undefined, autoVeto: false })
  })

  /**
   * The veto watcher of the attestor's settings, its fiber stopped when the layer's scope
   * closes. With `AUTO_VETO` it sends through the `TxSender` of the attestor key, which the
   * wiring provides then only (layers/attestor.ts); `AUTO_VETO` without one is a wiring defect.
   */
  static layer(
    overrides: Partial<Pick<VetoWatcherConfig, "pollIntervalMs" | "resyncIntervalMs">> = {}
  ): Layer.Layer<
    VetoWatcher,
    never,
    AttestorSettings | Indexer | HintIndex | AttestationStore | ChainClient | ProposalStore
  > {
    return Layer.scoped(
      VetoWatcher,
      Effect.gen(function* () {
        const settings = yield* AttestorSettings
        const sender = settings.autoVeto ? yield* Effect.serviceOption(TxSender) : Option.none()
        if (settings.autoVeto && Option.isNone(sender))
          return yield* Effect.dieMessage("AUTO_VETO needs the attestor key's TxSender (layers/attestor.ts)")
        const watcher = yield* makeVetoWatcher(
          {
            vault: settings.vault,
            autoVeto: settings.autoVeto,
            vetoUnknownIds: settings.vetoUnknownIds,
            vetoRule: settings.vetoRule,
            vetoStaggerSeconds: settings.vetoStaggerSeconds,
            self: settings.signingKey.address,
            ...overrides
          },
          yield* ProposalStore,
          sender
        )
        return { status: watcher.status }
      })
    )
  }
}

export const bindProposals = counter(
  "attestor_bind_proposals_total",
  "Pending bind proposals judged by the veto watcher, by verdict (once per proposal and verdict)"
)

export const vetoes = counter(
  "attestor_vetoes_total",
  "vetoBind attempts: sent, skipped (simulation reverted), unavailable (chain not answering), failed (not handed to the sender)"
)

const watcherRestarts = counter(
  "attestor_veto_watcher_restarts_total",
  "Times the veto watcher's pass failed and was restarted"
)

export type VetoOutcome = "sent" | "skipped" | "unavailable" | "failed" | "underfunded"

/**
 * The watcher's counters by every verdict and veto outcome, exported at 0 from start-up
 * (docs/operations.md "Metrics reference").
 */
export const vetoWatcherSeriesAtZero: ReadonlyArray<SeriesAtZero> = [
  ...valuesOf<Verdict>({ attested: true, unattested: true, unknown_id: true, unasked: true }).map((verdict) =>
    Metric.tagged(bindProposals, "verdict", verdict)
  ),
  ...valuesOf<VetoOutcome>({
    sent: true,
    skipped: true,
    unavailable: true,
    failed: true,
    underfunded: true
  }).map((outcome) => Metric.tagged(vetoes, "outcome", outcome)),
  watcherRestarts
]

const countVerdict = (verdict: Verdict) => Metric.increment(Metric.tagged(bindProposals, "verdict", verdict))
const countVeto = (outcome: VetoOutcome) => Metric.increment(Metric.tagged(vetoes, "outcome", outcome))

export interface VetoWatcherConfig {
  readonly vault: Address
  readonly autoVeto: boolean
  readonly vetoUnknownIds: boolean
  /** `VETO_RULE` (vetoVerdicts.ts). */
  readonly vetoRule: VetoRule
  /** `VETO_STAGGER_SECONDS` (`vetoDelaySeconds`). */
  readonly vetoStaggerSeconds: number
  /** This attestor's signing address: the one whose signatures the committee rule looks for. */
  readonly self: Address
  /** How often the indexer's projection is looked at for changes. Default 200 ms. */
  readonly pollIntervalMs?: number
  /** Longest time between two passes (contests change attestations only). Default 5 s. */
  readonly resyncIntervalMs?: number
  readonly restartBaseDelayMs?: number
  readonly restartMaxDelayMs?: number
}

/**
 * The watcher over `store`, sending through `sender` (required with `autoVeto`). Needs the
 * indexer, the hint index, the attestation store and the chain.
 */
export const makeVetoWatcher = (
  config: VetoWatcherConfig,
  store: ProposalStoreShape,
  sender: Option.Option<TxSenderShape>
) =>
  Effect.gen(function* () {
    const indexer = yield* Indexer
    const hints = yield* HintIndex
    const attestations = yield* AttestationStore
    const chain = yield* ChainClient
    const state = yield* Ref.make<VetoWatcherState>(indexer.enabled ? "starting" : "disabled")
    const lastBlock = yield* Ref.make<number | undefined>(undefined)
    const pollInterval = Duration.millis(config.pollIntervalMs ?? 200)
    const resyncInterval = config.resyncIntervalMs ?? 5_000
    const cache = new Map<string, Handled>()
    const keyOf = (p: Proposal) => `${p.id.toLowerCase()}:${p.bindNonce}`
    /** Proposals whose veto's simulation reverted, so it is counted and logged once. */
    const reverted = new Set<string>()
    /** The timestamps of the blocks pending proposals were mined in, by block number. */
    const blockTimes = new Map<number, number>()
    /** Whether each pending proposal carries this attestor's signature, once read. */
    const ownSignatures = new Map<string, OwnSignature>()
    /** Passes that found no log or transaction for a proposal on the node yet. */
    const notFoundPasses = new Map<string, number>()
    /** The signature cache's key: the proposal with its owner and block (a reorg may swap either). */
    const signatureKeyOf = (p: Proposal) => `${keyOf(p)}:${p.newOwner.toLowerCase()}:${p.block}`
    /** When each pending proposal was first found to need a veto (unix seconds), for its slot. */
    const vetoableSince = new Map<string, number>()

    /**
     * When `p` was mined (its block's timestamp); none when the chain does not answer, and the
     * proposal is judged on a later pass.
     */
    const proposedAt = (p: Proposal) =>
      Effect.gen(function* () {
        if (p.block === undefined) return Option.some<number | undefined>(undefined)
        const cached = blockTimes.get(p.block)
        if (cached !== undefined) return Option.some<number | undefined>(cached)
        const block = yield* Effect.either(chain.getBlock({ blockNumber: BigInt(p.block) }))
        if (block._tag === "Left") {
          yield* Effect.logWarning("bind proposal not judged: its block could not be read; next pass").pipe(
            Effect.annotateLogs({ error: block.left._tag })
          )
          return Option.none()
        }
        const at = Number(block.right.timestamp)
        blockTimes.set(p.block, at)
        return Option.some<number | undefined>(at)
      })

    /** Whether `p` carries this attestor's signature (read once per proposal); none: next pass. */
    const ownSignature = (p: Proposal) =>
      Effect.gen(function* () {
        const key = signatureKeyOf(p)
        const cached = ownSignatures.get(key)
        if (cached !== undefined) return Option.some(cached)
        const passes = notFoundPasses.get(key) ?? 0
        const reading = yield* ownSignatureOf(chain, config.vault, config.self, p, passes)
        if (reading._tag === "notFound") notFoundPasses.set(key, passes + 1)
        if (reading._tag !== "read") return Option.none<OwnSignature>()
        ownSignatures.set(key, reading.own)
        notFoundPasses.delete(key)
        return Option.some(reading.own)
      })

    /**
     * Whether this attestor's veto slot for `p` has come (`vetoDelaySeconds`): counted from the
     * pass that first found it vetoable; passes run at least every `resyncIntervalMs`.
     */
    const slotReached = (p: Proposal) =>
      Effect.map(nowSeconds, (now) => {
        const since = vetoableSince.get(keyOf(p)) ?? now
        vetoableSince.set(keyOf(p), since)
        return now >= since + vetoDelaySeconds(p.id, config.self, config.vetoStaggerSeconds)
      })

    const handledOf = (p: Proposal) =>
      Effect.suspend(() => {
        const cached = cache.get(keyOf(p))
        if (cached !== undefined) return Effect.succeed<Handled | undefined>(cached)
        return Effect.map(store.get(p.id, p.bindNonce), (found) => {
          if (Option.isSome(found)) cache.set(keyOf(p), found.value)
          return Option.getOrUndefined(found)
        })
      })

    const veto = (p: Proposal, s: TxSenderShape) =>
      Effect.gen(function* () {
        const data = encodeFunctionData({ abi: feeVaultAbi, functionName: "vetoBind", args: [p.id] })
        const request = { from: s.address, to: config.vault, data }
        const simulated = yield* Effect.either(chain.call(request))
        const now = yield* nowSeconds
        if (simulated._tag === "Left") {
          if (simulated.left._tag !== "ChainReverted") {
            yield* countVeto("unavailable")
            yield* Effect.logWarning("veto not sent: the chain is not answering; next pass").pipe(
              Effect.annotateLogs({ error: simulated.left._tag })
            )
            return
          }
          // Not final: the node may be behind the indexer, or a reorg may bring the proposal
          // back. Tried again on every pass while the index has the proposal pending; counted
          // and logged once.
          if (reverted.has(keyOf(p))) return
          reverted.add(keyOf(p))
          yield* countVeto("skipped")
          yield* Effect.logWarning(
            "veto not sent: vetoBind would revert (no pending bind, or not an attestor); next pass"
          )
          return
        }
        reverted.delete(keyOf(p))
        const gas = yield* Effect.either(chain.estimateGas(request))
        if (gas._tag === "Left") {
          yield* countVeto("unavailable")
          yield* Effect.logWarning("veto not sent: gas estimation failed; next pass").pipe(
            Effect.annotateLogs({ error: gas.left._tag })
          )
          return
        }
        if (!(yield* store.claimVeto(p.id, p.bindNonce, now))) return
        cache.set(keyOf(p), { verdict: "unattested", veto: "sending" })
        const sent = yield* Effect.either(
          s.submit({
            to: config.vault,
            data,
            gas: withGasMargin(gas.right),
            storedWith: store.linkVeto(p.id, p.bindNonce)
          })
        )
        const after = yield* nowSeconds
        if (sent._tag === "Right") {
          // Already `sent` by the statement that stored it; this records it when nothing did.
          yield* store.endVeto(p.id, p.bindNonce, "sent", sent.right, after)
          cache.set(keyOf(p), { verdict: "unattested", veto: "sent", txHash: sent.right })
          yield* countVeto("sent")
          yield* Effect.logInfo("vetoBind sent for an unattested bind proposal")
          return
        }
        if (sent.left._tag === "SendUnavailable" && sent.left.reason === "store_unsure") {
          // Perhaps stored, and then sent: the row says so (`sent`), or stays claimed until stale.
          cache.delete(keyOf(p))
          yield* countVeto("failed")
          yield* Effect.logWarning("veto perhaps not sent: the transaction store did not answer; claim kept")
          return
        }
        // Nothing was sent (the sender's errors say so): released for the next pass.
        yield* store.endVeto(p.id, p.bindNonce, "none", undefined, after)
        cache.set(keyOf(p), { verdict: "unattested", veto: "none" })
        yield* countVeto(sent.left._tag === "HotKeyUnderfunded" ? "underfunded" : "failed")
        yield* Effect.logWarning("veto not sent: the transaction sender refused it; next pass").pipe(
          Effect.annotateLogs({ error: sent.left._tag })
        )
      })

    /**
     * A proposal the index still has pending although its veto was sent: the veto may not be
     * mined yet, or it reverted (a reorg brought the proposal back after it) or was dropped. Then
     * it is `none` again, to be sent again.
     */
    const stillSent = (p: Proposal, recorded: Handled, s: TxSenderShape) =>
      Effect.gen(function* () {
        if (recorded.txHash === undefined) return recorded
        const status = yield* Effect.either(s.status(recorded.txHash))
        if (
          status._tag === "Left" ||
          (status.right.status !== "reverted" && status.right.status !== "unknown")
        )
          return recorded
        yield* store.reopenVeto(p.id, p.bindNonce, recorded.txHash, yield* nowSeconds)
        const reopened: Handled = { verdict: recorded.verdict, veto: "none" }
        cache.set(keyOf(p), reopened)
        yield* Effect.logWarning(
          "a sent veto reverted or was dropped while the proposal is pending; sending again"
        )
        return reopened
      })

    /** One proposal: verdict, count, veto. */
    const judge = (p: Proposal, known: boolean) =>
      Effect.gen(function* () {
        let verdict: Verdict = "unknown_id"
        if (known || config.vetoUnknownIds) {
          const at = yield* proposedAt(p)
          if (Option.isNone(at)) return
          const own = yield* attestations.ofId(p.id)
          const contested = yield* attestations.contestedOf(p.id)
          verdict = verdictOf(p, known, config.vetoUnknownIds, own, contested, at.value)
          if (needsOwnSignature(config.vetoRule, verdict, p, own, contested)) {
            const carried = yield* ownSignature(p)
            if (Option.isNone(carried)) return
            verdict = committeeVerdict(carried.value)
          }
        }
        const recorded = yield* handledOf(p)
        const handled =
          recorded?.veto === "sent" && Option.isSome(sender)
            ? yield* stillSent(p, recorded, sender.value)
            : recorded
        const action = decide(verdict, handled, config.autoVeto)
        if (action.count) {
          yield* store.setVerdict(p.id, p.bindNonce, verdict, yield* nowSeconds)
          cache.set(keyOf(p), { ...handled, verdict, veto: handled?.veto ?? "none" })
          yield* countVerdict(verdict)
          yield* Effect.logInfo("bind proposal judged").pipe(
            Effect.annotateLogs({ verdict, auto_veto: config.autoVeto })
          )
        }
        if (action.veto && Option.isSome(sender) && (yield* slotReached(p))) yield* veto(p, sender.value)
      })

    /** One pass over the pending proposals; the indexer block it judged, if any. */
    const pass = Effect.gen(function* () {
      const hintBlock = yield* hints.read((h) => h?.block)
      const view = yield* indexer.read((s) =>
        s === undefined ? undefined : { block: s.block, proposals: pendingProposals(s.accounts.values()) }
      )
      if (view === undefined) return undefined
      const known = yield* hints.read((h) =>
        view.proposals.map((p) => h?.projection.escrow(p.id) !== undefined)
      )
      const hintsCaughtUp = hintBlock !== undefined && hintBlock >= view.block
      // Forget the reverted simulations of proposals no longer pending.
      const pending = new Set(view.proposals.map(keyOf))
      for (const key of reverted) if (!pending.has(key)) reverted.delete(key)
      const blocks = new Set(view.proposals.map((p) => p.block))
      for (const block of blockTimes.keys()) if (!blocks.has(block)) blockTimes.delete(block)
      const pendingSignatureKeys = new Set(view.proposals.map(signatureKeyOf))
      for (const key of ownSignatures.keys()) if (!pendingSignatureKeys.has(key)) ownSignatures.delete(key)
      for (const key of notFoundPasses.keys()) if (!pendingSignatureKeys.has(key)) notFoundPasses.delete(key)
      for (const key of vetoableSince.keys()) if (!pending.has(key)) vetoableSince.delete(key)
      for (const [i, p] of view.proposals.entries()) {
        const isKnown = known[i] === true
        // An id the hint index may not have reached yet is judged on a later pass.
        if (!isKnown && !config.vetoUnknownIds && !hintsCaughtUp) continue
        yield* judge(p, isKnown)
      }
      return view.block
    })

    // A pass whenever the vault index or the hint index moves, and every `resyncInterval` anyway.
    const follow = pollForChanges({
      read: Effect.gen(function* () {
        const key = yield* indexer.read((s) =>
          s === undefined ? undefined : `${s.block}:${s.hash}:${s.version}`
        )
        const hintBlock = yield* hints.read((h) => h?.block)
        return key === undefined ? undefined : `${key}:${hintBlock}`
      }),
      keyOf: (key) => key,
      onChange: () =>
        Effect.gen(function* () {
          const block = yield* pass
          if (block !== undefined) {
            yield* Ref.set(lastBlock, block)
            yield* Ref.set(state, "ready")
          }
        }),
      pollInterval,
      resyncInterval
    })

    const run = supervised("veto watcher", follow, {
      baseDelayMs: config.restartBaseDelayMs,
      maxDelayMs: config.restartMaxDelayMs,
      onRestart: () =>
        Effect.gen(function* () {
          cache.clear()
          yield* Metric.increment(watcherRestarts)
          yield* Ref.set(state, "retrying")
        })
    })

    if (indexer.enabled) yield* Effect.forkScoped(run)

    const status: VetoWatcherShape["status"] = Effect.all({
      state: Ref.get(state),
      block: Ref.get(lastBlock)
    }).pipe(Effect.map(({ state, block }) => ({ state, block, autoVeto: config.autoVeto })))

    return { status, pass } as const
  })
