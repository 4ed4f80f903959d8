/**
 * The sender's metrics. Labels are classes and kinds only: never a hash, nonce or address.
 */
import { Effect, Metric } from "effect"

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

const sends = Metric.counter("relayer_tx_sends_total", {
  description: "Signed transactions offered to the node, by outcome class",
  incremental: true
})

const replacements = Metric.counter("relayer_tx_replacements_total", {
  description: "Stuck transactions replaced at the same nonce: fee bumps and no-op cancellations",
  incremental: true
})

const replacementsSkipped = Metric.counter("relayer_tx_replacements_skipped_total", {
  description: "Replacements not sent because the fee cap or the attempt limit was reached",
  incremental: true
})

const settled = Metric.counter("relayer_tx_settled_total", {
  description: "Transactions that left the pending state, by outcome",
  incremental: true
})

const gapFills = Metric.counter("relayer_tx_gap_fills_total", {
  description: "No-op self-transfers sent to fill a nonce gap",
  incremental: true
})

const renonced = Metric.counter("relayer_tx_renonced_total", {
  description: "Transactions re-signed at a new nonce because another sender used theirs",
  incremental: true
})

const reorged = Metric.counter("relayer_tx_reorged_total", {
  description: "Mined transactions a reorg took out before TX_CONFIRMATIONS; each became pending again",
  incremental: true
})

const restarts = Metric.counter("relayer_tx_sender_restarts_total", {
  description: "Restarts of the sender's fibers after a failure",
  incremental: true
})

export const pendingTransactions = Metric.gauge("relayer_tx_pending", {
  description: "Transactions sent and not yet mined or dropped"
})

export const hotKeyBalance = Metric.gauge("relayer_hot_key_balance_wei", {
  description: "Native balance of the relayer's hot key, in wei",
  bigint: true
})

export const recordSend = (outcome: SendOutcome) => Metric.increment(Metric.tagged(sends, "outcome", outcome))

export const recordReplacement = (kind: ReplacementKind) =>
  Metric.increment(Metric.tagged(replacements, "kind", kind))

export const recordReplacementSkipped = (reason: "fee_cap" | "max_replacements") =>
  Metric.increment(Metric.tagged(replacementsSkipped, "reason", reason))

export const recordSettled = (outcome: SettledOutcome) =>
  Metric.increment(Metric.tagged(settled, "outcome", outcome))

export const recordGapFill = Metric.increment(gapFills)

export const recordRenonce = Metric.increment(renonced)

export const recordReorged = Metric.increment(reorged)

export const recordRestart = (fiber: "sender" | "monitor") =>
  Metric.increment(Metric.tagged(restarts, "fiber", fiber))

/** The sender's recorders. */
export const senderMetrics = {
  recordSend,
  recordReplacement,
  recordReplacementSkipped,
  recordSettled,
  recordGapFill,
  recordRenonce,
  recordReorged,
  recordRestart,
  pendingTransactions,
  hotKeyBalance
}

export type SenderMetrics = typeof senderMetrics

/** Makes every series visible from the start, at zero, so dashboards see them before any event. */
export const initialiseMetrics = Effect.all(
  [
    Metric.update(Metric.tagged(sends, "outcome", "accepted"), 0),
    Metric.update(Metric.tagged(replacements, "kind", "bump"), 0),
    Metric.update(Metric.tagged(replacements, "kind", "cancel"), 0),
    Metric.update(pendingTransactions, 0),
    Metric.update(reorged, 0)
  ],
  { discard: true }
)
