/**
 * The sender's metrics. The relayer and the attestor (for vetoes) each run a sender; every series
 * carries `service` (`relayer` or `attestor`, from the sender's options) to tell them apart, the
 * `relayer_` names staying as they were. Other labels are classes and kinds only: never a hash,
 * nonce or address.
 */

import { Effect, Metric } from "effect"
import { counter, type SeriesAtZero, valuesOf } from "../http/metrics.js"

/** How a node answered a signed transaction, by class. */
export type SendOutcome =
  | "accepted"
  | "nonce_too_low"
  | "nonce_too_high"
  | "underpriced"
  | "insufficient_funds"
  | "rejected"
  | "unavailable"

export type ReplacementKind = "bump" | "cancel"

/** How a transaction ended. `dropped` ones never reached the chain. */
export type SettledOutcome = "success" | "reverted" | "cancelled" | "dropped"

const sends = counter("relayer_tx_sends_total", "Signed transactions offered to the node, by outcome class")

const replacements = counter(
  "relayer_tx_replacements_total",
  "Stuck transactions replaced at the same nonce: fee bumps and no-op cancellations"
)

const replacementsSkipped = counter(
  "relayer_tx_replacements_skipped_total",
  "Replacements not sent because the fee cap or the attempt limit was reached"
)

const settled = counter("relayer_tx_settled_total", "Transactions that left the pending state, by outcome")

const gapFills = counter("relayer_tx_gap_fills_total", "No-op self-transfers sent to fill a nonce gap")

const renonced = counter(
  "relayer_tx_renonced_total",
  "Transactions re-signed at a new nonce because another sender used theirs"
)

const reorged = counter(
  "relayer_tx_reorged_total",
  "Mined transactions a reorg took out before TX_CONFIRMATIONS; each became pending again"
)

const restarts = counter(
  "relayer_tx_sender_restarts_total",
  "Restarts of the sender's fibers after a failure"
)

const locksLost = counter(
  "relayer_tx_lock_lost_total",
  "Times the hot key's lock was found lost while held (its database session ended); sending stopped until it was taken again"
)

const holdsExpired = counter(
  "relayer_tx_lock_hold_expired_total",
  "Holds of the hot key's lock ended because an RPC went unanswered for TX_RPC_TIMEOUT_MS, by operation"
)

const lockWaitRefused = counter(
  "relayer_tx_lock_wait_refused_total",
  "Waits for the hot key's lock given up after TX_LOCK_WAIT_MS (a submission's callers answered 503, or a monitor round skipped)"
)

const pendingTransactions = Metric.gauge("relayer_tx_pending", {
  description: "Transactions sent and not yet mined or dropped"
})

const hotKeyBalance = Metric.gauge("relayer_hot_key_balance_wei", {
  description: "Native balance of the sender's hot key, in wei",
  bigint: true
})

const sendOutcomes = valuesOf<SendOutcome>({
  accepted: true,
  nonce_too_low: true,
  nonce_too_high: true,
  underpriced: true,
  insufficient_funds: true,
  rejected: true,
  unavailable: true
})
const replacementKinds = valuesOf<ReplacementKind>({ bump: true, cancel: true })
type SkipReason = "fee_cap" | "max_replacements"
const skipReasons = valuesOf<SkipReason>({ fee_cap: true, max_replacements: true })
const settledOutcomes = valuesOf<SettledOutcome>({
  success: true,
  reverted: true,
  cancelled: true,
  dropped: true
})
type SenderFiber = "sender" | "monitor"
const senderFibers = valuesOf<SenderFiber>({ sender: true, monitor: true })

/** Which service runs the sender: the `service` label of its series. */
export type SenderService = "relayer" | "attestor"

/** The recorders of one service's sender: each series labelled with `service`. */
export const makeSenderMetrics = (service: SenderService) => {
  const of = <Type, In, Out>(metric: Metric.Metric<Type, In, Out>) =>
    Metric.tagged(metric, "service", service)
  const m = {
    sends: of(sends),
    replacements: of(replacements),
    replacementsSkipped: of(replacementsSkipped),
    settled: of(settled),
    gapFills: of(gapFills),
    renonced: of(renonced),
    reorged: of(reorged),
    restarts: of(restarts),
    locksLost: of(locksLost),
    holdsExpired: of(holdsExpired),
    lockWaitRefused: of(lockWaitRefused),
    pendingTransactions: of(pendingTransactions),
    hotKeyBalance: of(hotKeyBalance)
  }
  /**
   * Every counter by every class, kind, reason, outcome and fiber, exported at 0 from the
   * service's start (docs/operations.md "Metrics reference"); an expired hold's `operation` is
   * known only when it happens.
   */
  const seriesAtZero: ReadonlyArray<SeriesAtZero> = [
    ...sendOutcomes.map((outcome) => Metric.tagged(m.sends, "outcome", outcome)),
    ...replacementKinds.map((kind) => Metric.tagged(m.replacements, "kind", kind)),
    ...skipReasons.map((reason) => Metric.tagged(m.replacementsSkipped, "reason", reason)),
    ...settledOutcomes.map((outcome) => Metric.tagged(m.settled, "outcome", outcome)),
    m.gapFills,
    m.renonced,
    m.reorged,
    ...senderFibers.map((fiber) => Metric.tagged(m.restarts, "fiber", fiber)),
    m.locksLost,
    m.holdsExpired,
    m.lockWaitRefused
  ]
  return {
    recordSend: (outcome: SendOutcome) => Metric.increment(Metric.tagged(m.sends, "outcome", outcome)),
    recordReplacement: (kind: ReplacementKind) =>
      Metric.increment(Metric.tagged(m.replacements, "kind", kind)),
    recordReplacementSkipped: (reason: SkipReason) =>
      Metric.increment(Metric.tagged(m.replacementsSkipped, "reason", reason)),
    recordSettled: (outcome: SettledOutcome) =>
      Metric.increment(Metric.tagged(m.settled, "outcome", outcome)),
    recordGapFill: Metric.increment(m.gapFills),
    recordRenonce: Metric.increment(m.renonced),
    recordReorged: Metric.increment(m.reorged),
    recordRestart: (fiber: SenderFiber) => Metric.increment(Metric.tagged(m.restarts, "fiber", fiber)),
    recordLockLost: Metric.increment(m.locksLost),
    /** `operation` is a JSON-RPC method name, never a parameter. */
    recordHoldExpired: (operation: string) =>
      Metric.increment(Metric.tagged(m.holdsExpired, "operation", operation)),
    recordLockWaitRefused: Metric.increment(m.lockWaitRefused),
    pendingTransactions: m.pendingTransactions,
    hotKeyBalance: m.hotKeyBalance,
    /** Nothing pending until the monitor's first round says otherwise. */
    initialise: Effect.asVoid(Metric.update(m.pendingTransactions, 0)),
    seriesAtZero
  }
}

export type SenderMetrics = ReturnType<typeof makeSenderMetrics>

/** The sender counters of `service`, for `exportAtZero` where that service runs a sender. */
export const senderSeriesAtZero = (service: SenderService): ReadonlyArray<SeriesAtZero> =>
  makeSenderMetrics(service).seriesAtZero
