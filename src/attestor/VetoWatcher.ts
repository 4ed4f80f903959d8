/**
 * The veto watcher (docs/attestor.md §1, §3 veto and contest rows, §6): a supervised fiber that
 * judges every pending bind proposal of the indexed vault and, with `AUTO_VETO`, sends
 * `vetoBind(id)` from the attestor's key for the ones this attestor did not attest.
 *
 * Proposals. The vault indexer folds the canonical `BindProposed` events (and the
 * `BindFinalized` / `BindCancelled` that end them, following reorgs) into the account projection:
 * an account with a pending owner is a proposal still pending, `(id, pendingOwner, bindNonce - 1)`
 * (`proposeBind` consumed the bind nonce the `BindOwner` signatures were made for, docs/protocol.md §4,
 * and nothing else moves it while the bind is pending). Reading them there rather than from a
 * cursor of its own over the event store makes "still pending" and reorgs the indexer's business.
 *
 * Verdict (`verdictOf`), per proposal:
 * - `unknown_id`: the hint index has no escrow for the id (no hint for this attestor), and
 *   `VETO_UNKNOWN_IDS` is off: counted, never vetoed;
 * - `attested`: the new owner is not contested for the id, and an unrevoked attestation of this
 *   attestor (`AttestationStore`) has the same id, new owner and bind nonce, i.e. the proposal's
 *   `BindOwner` message (deadline aside) is one `POST /v1/bind` signed, and was issued no later
 *   than the timestamp of the block the proposal was mined in. A signature for the same owner at
 *   another bind nonce does not count: it belongs to another proposal. Nor does one issued after
 *   the proposal was mined: every signature leaves the attestor only once recorded, so that one
 *   cannot be the one the proposal carries; it was signed by a replica whose index did not show
 *   the pending bind (which no replica that sees it does), perhaps for a session made after a
 *   contest that replica could not tie to the pending owner. The attestor's clock (`issued_at`)
 *   is compared with the chain's: it must not run ahead of the chain's block timestamps
 *   (docs/operations.md);
 * - `unattested`: anything else, including a proposal to an owner a contest ruled out: a contest
 *   (`POST /v1/bind` with `contest: true`) records every other owner attested for the id, and the
 *   pending one, as contested (and revokes their attestations), so on the watcher's next pass the
 *   pending proposal is unattested and, with `AUTO_VETO`, vetoed. Contested owners are checked
 *   apart from revocations, so no attestation of a contested owner, whenever it was recorded,
 *   makes its proposal attested again.
 * While the hint index lags behind the indexer, an id it does not know yet is left for a later
 * pass rather than judged `unknown_id`.
 *
 * Durable record (migration 0022, `attestor_bind_proposals`, keyed by id and bind nonce): each
 * proposal's last verdict, so `attestor_bind_proposals_total{verdict}` counts a verdict once per
 * proposal (again only when it changes, e.g. attested then contested), across restarts; and its
 * veto: claimed (`sending`) in the database before anything is sent, and made `sent` with its hash
 * by the very statement that stores the transaction (`TxRequest.storedWith`), so a proposal is
 * vetoed once whatever restarts or replicas do. A claimed veto that could not be handed to the
 * transaction sender (nothing sent) is released and tried on the next pass; a claim left
 * `sending` (a stop, a store that did not answer) stored nothing, and is taken again once stale.
 * A `sent` veto whose transaction reverted or was dropped while the index still has the proposal
 * pending (a reorg put it back) is sent again.
 *
 * Veto: `eth_call` of `vetoBind(id)` from the attestor's address first (a proposal cancelled or
 * finalized meanwhile, a node behind the indexer, or a key that is not an attestor, reverts:
 * nothing sent, counted `skipped` once, tried again on the next pass while the proposal is
 * pending in the index), then gas estimation (x1.2) and the relayer's durable `TxSender` for the
 * attestor key (created only with `AUTO_VETO`), which signs, stores, broadcasts and replaces stuck
 * attempts.
 *
 * Passes run whenever the indexer's projection changes and at least every `resyncIntervalMs`
 * (a contest changes attestations and contests, not the projection). A failed pass is logged without account
 * data, counted (`attestor_veto_watcher_restarts_total`) and restarted with jittered exponential
 * backoff. Metrics `attestor_bind_proposals_total{verdict}`, `attestor_vetoes_total{outcome}`.
 * No id, owner, address or hash reaches a log line or a label.
 */

import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Context, Data, Duration, Effect, Layer, Metric, Option, Ref } from "effect"
import { type Address, encodeFunctionData, type Hex } from "viem"
import { feeVaultAbi } from "../../contracts/abi.js"
import { pollForChanges } from "../background/poll.js"
import { supervised } from "../background/supervised.js"
import { ChainClient } from "../chain/ChainClient.js"
import { AttestorSettings } from "../config/attestor.js"
import { counter } from "../http/metrics.js"
import { Indexer } from "../indexer/Indexer.js"
import type { AccountState } from "../store/projections/accounts.js"
import type { TxRequest } from "../txsender/api.js"
import { makeTxSender, type TxSenderShape, txSenderOptions } from "../txsender/TxSender.js"
import { AttestationStore, type StoredAttestation } from "./AttestationStore.js"
import { HintIndex } from "./hintIndex.js"

// ---------------------------------------------------------------------------------------------
// The decision rule
// ---------------------------------------------------------------------------------------------

/** A pending bind proposal: the message its signatures were made over, deadline aside. */
export interface Proposal {
  readonly id: Hex
  readonly newOwner: Address
  /** The bind nonce `proposeBind` consumed (the `BindProposed` event's `bindNonce`). */
  readonly bindNonce: bigint
  /** The block of its `BindProposed` (the indexer's fold always knows it). */
  readonly block?: number | undefined
}

export type Verdict = "attested" | "unattested" | "unknown_id"
export type VetoState = "none" | "sending" | "sent" | "skipped"

/** What the watcher recorded of a proposal. */
export interface Handled {
  readonly verdict: Verdict
  readonly veto: VetoState
  /** The veto's transaction, once `sent`. */
  readonly txHash?: Hex | undefined
}

const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase()

/** The pending proposals of the account projection. */
export const pendingProposals = (accounts: Iterable<AccountState>): ReadonlyArray<Proposal> => {
  const out: Array<Proposal> = []
  for (const a of accounts)
    if (a.pendingOwner !== undefined && a.bindNonce > 0n)
      out.push({ id: a.id, newOwner: a.pendingOwner, bindNonce: a.bindNonce - 1n, block: a.pendingBlock })
  return out
}

/**
 * The verdict on a proposal mined at `proposedAt` (its block's timestamp, unix seconds; none: not
 * known, and no attestation counts): `unknown_id` for an id without a hint for this attestor
 * unless `vetoUnknownIds`; `unattested` when its new owner is among the owners contested for its
 * id; `attested` when an unrevoked attestation issued no later than `proposedAt` has its id, new
 * owner and bind nonce; else `unattested`.
 */
export const verdictOf = (
  proposal: Proposal,
  known: boolean,
  vetoUnknownIds: boolean,
  attestations: ReadonlyArray<StoredAttestation>,
  contested: ReadonlyArray<Address>,
  proposedAt: number | undefined
): Verdict => {
  if (!known && !vetoUnknownIds) return "unknown_id"
  if (contested.some((owner) => same(owner, proposal.newOwner))) return "unattested"
  const attested = attestations.some(
    (a) =>
      !a.revoked &&
      same(a.id, proposal.id) &&
      same(a.newOwner, proposal.newOwner) &&
      a.bindNonce === proposal.bindNonce &&
      proposedAt !== undefined &&
      a.issuedAt <= proposedAt
  )
  return attested ? "attested" : "unattested"
}

/**
 * What to do with a judged proposal: count its verdict (new or changed), send a veto. `skipped`,
 * written by earlier versions when the simulation reverted, is tried again like `none`.
 */
export const decide = (
  verdict: Verdict,
  handled: Handled | undefined,
  autoVeto: boolean
): { readonly count: boolean; readonly veto: boolean } => {
  const veto = handled?.veto ?? "none"
  return {
    count: handled?.verdict !== verdict,
    veto: verdict === "unattested" && autoVeto && (veto === "none" || veto === "skipped")
  }
}

/**
 * A claim (`sending`) this old with no transaction stored is one whose process stopped or failed
 * between claiming and recording: a stored veto turns its row `sent` in the statement that stores
 * it, so the claim can be taken again.
 */
export const STALE_CLAIM_SECONDS = 600

// ---------------------------------------------------------------------------------------------
// The record of judged proposals (migration 0022)
// ---------------------------------------------------------------------------------------------

export class ProposalStoreError extends Data.TaggedError("ProposalStoreError")<{
  readonly operation: string
  readonly cause: SqlError
}> {
  override get message() {
    return `bind proposal store failed during ${this.operation}`
  }
}

export interface ProposalStoreShape {
  readonly get: (id: Hex, bindNonce: bigint) => Effect.Effect<Option.Option<Handled>, ProposalStoreError>
  /** Records the verdict (creating the row with no veto). */
  readonly setVerdict: (
    id: Hex,
    bindNonce: bigint,
    verdict: Verdict,
    now: number
  ) => Effect.Effect<void, ProposalStoreError>
  /**
   * Claims the veto (`none`, `skipped` or a stale `sending` → `sending`); false when another
   * process or pass has it.
   */
  readonly claimVeto: (id: Hex, bindNonce: bigint, now: number) => Effect.Effect<boolean, ProposalStoreError>
  /** The sender's part of storing the veto: the claimed row becomes `sent` with its hash. */
  readonly linkVeto: (id: Hex, bindNonce: bigint) => NonNullable<TxRequest["storedWith"]>
  /** A `sent` veto whose transaction reverted or was dropped: `none` again, to be sent again. */
  readonly reopenVeto: (
    id: Hex,
    bindNonce: bigint,
    txHash: Hex,
    now: number
  ) => Effect.Effect<void, ProposalStoreError>
  /** Ends a claimed veto: `sent` with the hash, or `none` again (nothing was sent). */
  readonly endVeto: (
    id: Hex,
    bindNonce: bigint,
    veto: Exclude<VetoState, "sending">,
    txHash: Hex | undefined,
    now: number
  ) => Effect.Effect<void, ProposalStoreError>
}

interface ProposalRow {
  readonly verdict: string
  readonly veto: string
  readonly tx_hash: string | null
}

export const makeProposalStore = Effect.gen(function* () {
  const sql = yield* SqlClient
  const failed = (operation: string) => (cause: SqlError) => new ProposalStoreError({ operation, cause })
  const lower = (id: Hex) => id.toLowerCase()

  const get: ProposalStoreShape["get"] = (id, bindNonce) =>
    sql<ProposalRow>`
      SELECT verdict, veto, tx_hash FROM attestor_bind_proposals
      WHERE beneficiary_id = ${lower(id)} AND bind_nonce = ${bindNonce.toString()}`.pipe(
      Effect.mapError(failed("reading proposals")),
      Effect.map((rows) =>
        Option.map(Option.fromNullable(rows[0]), (row) => ({
          verdict: row.verdict as Verdict,
          veto: row.veto as VetoState,
          ...(row.tx_hash === null ? {} : { txHash: row.tx_hash as Hex })
        }))
      )
    )

  const setVerdict: ProposalStoreShape["setVerdict"] = (id, bindNonce, verdict, now) =>
    sql`
      INSERT INTO attestor_bind_proposals (beneficiary_id, bind_nonce, verdict, veto, updated_at)
      VALUES (${lower(id)}, ${bindNonce.toString()}, ${verdict}, 'none', ${now})
      ON CONFLICT (beneficiary_id, bind_nonce)
      DO UPDATE SET verdict = excluded.verdict, updated_at = excluded.updated_at`.pipe(
      Effect.asVoid,
      Effect.mapError(failed("recording a verdict"))
    )

  const claimVeto: ProposalStoreShape["claimVeto"] = (id, bindNonce, now) =>
    sql<{ readonly veto: string }>`
      UPDATE attestor_bind_proposals SET veto = 'sending', tx_hash = NULL, updated_at = ${now}
      WHERE beneficiary_id = ${lower(id)} AND bind_nonce = ${bindNonce.toString()}
        AND (veto IN ('none', 'skipped') OR (veto = 'sending' AND updated_at < ${now - STALE_CLAIM_SECONDS}))
      RETURNING veto`.pipe(
      Effect.map((rows) => rows.length === 1),
      Effect.mapError(failed("claiming a veto"))
    )

  const linkVeto: ProposalStoreShape["linkVeto"] = (id, bindNonce) => (txHash) =>
    sql`
      UPDATE attestor_bind_proposals SET veto = 'sent', tx_hash = ${txHash.toLowerCase()}
      WHERE beneficiary_id = ${lower(id)} AND bind_nonce = ${bindNonce.toString()} AND veto = 'sending'`

  const reopenVeto: ProposalStoreShape["reopenVeto"] = (id, bindNonce, txHash, now) =>
    sql`
      UPDATE attestor_bind_proposals SET veto = 'none', tx_hash = NULL, updated_at = ${now}
      WHERE beneficiary_id = ${lower(id)} AND bind_nonce = ${bindNonce.toString()}
        AND veto = 'sent' AND tx_hash = ${txHash.toLowerCase()}`.pipe(
      Effect.asVoid,
      Effect.mapError(failed("reopening a veto"))
    )

  const endVeto: ProposalStoreShape["endVeto"] = (id, bindNonce, veto, txHash, now) =>
    sql`
      UPDATE attestor_bind_proposals
      SET veto = ${veto}, tx_hash = ${txHash === undefined ? null : txHash.toLowerCase()}, updated_at = ${now}
      WHERE beneficiary_id = ${lower(id)} AND bind_nonce = ${bindNonce.toString()} AND veto = 'sending'`.pipe(
      Effect.asVoid,
      Effect.mapError(failed("recording a veto"))
    )

  return { get, setVerdict, claimVeto, linkVeto, reopenVeto, endVeto } satisfies ProposalStoreShape
})

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

const countVerdict = (verdict: Verdict) => Metric.increment(Metric.tagged(bindProposals, "verdict", verdict))
const countVeto = (outcome: VetoOutcome) => Metric.increment(Metric.tagged(vetoes, "outcome", outcome))

export interface VetoWatcherConfig {
  readonly vault: Address
  readonly autoVeto: boolean
  readonly vetoUnknownIds: boolean
  /** How often the indexer's projection is looked at for changes. Default 200 ms. */
  readonly pollIntervalMs?: number
  /** Longest time between two passes (contests change attestations only). Default 5 s. */
  readonly resyncIntervalMs?: number
  readonly restartBaseDelayMs?: number
  readonly restartMaxDelayMs?: number
}

/** Gas sent with a veto: the estimate plus 20 %. */
const withGasMargin = (estimate: bigint) => (estimate * 12n) / 10n

const nowSeconds = Effect.map(Clock.currentTimeMillis, (ms) => Math.floor(ms / 1000))

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
          verdict = verdictOf(
            p,
            known,
            config.vetoUnknownIds,
            yield* attestations.ofId(p.id),
            yield* attestations.contestedOf(p.id),
            at.value
          )
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
        if (action.veto && Option.isSome(sender)) yield* veto(p, sender.value)
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

/**
 * The veto watcher of the attestor's settings, its fiber (and, with `AUTO_VETO`, the attestor
 * key's transaction sender) stopped when the layer's scope closes.
 */
export const vetoWatcherLayer = (
  overrides: Partial<Pick<VetoWatcherConfig, "pollIntervalMs" | "resyncIntervalMs">> = {}
): Layer.Layer<
  VetoWatcher,
  never,
  AttestorSettings | Indexer | HintIndex | AttestationStore | ChainClient | SqlClient
> =>
  Layer.scoped(
    VetoWatcher,
    Effect.gen(function* () {
      const settings = yield* AttestorSettings
      const store = yield* makeProposalStore
      const sender = settings.autoVeto
        ? Option.some(yield* makeTxSender(txSenderOptions("attestor", settings.signingKey, settings)))
        : Option.none()
      const watcher = yield* makeVetoWatcher(
        {
          vault: settings.vault,
          autoVeto: settings.autoVeto,
          vetoUnknownIds: settings.vetoUnknownIds,
          ...overrides
        },
        store,
        sender
      )
      return { status: watcher.status }
    })
  )
