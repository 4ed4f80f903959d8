/**
 * The indexer's metrics. Labels are states and failure kinds only: never an id, an address or a
 * block hash.
 */

import { Effect, Metric } from "effect"
import { counter, type SeriesAtZero } from "../http/metrics.js"

export const indexerStates = ["starting", "backfilling", "following", "standby", "retrying"] as const
export type IndexerState = (typeof indexerStates)[number]

const stateGauge = Metric.gauge("indexer_state", {
  description: "1 for the indexer's current state (starting, backfilling, following, standby, retrying)"
})

export const indexedBlock = Metric.gauge("indexer_block", {
  description: "Highest block the account projection covers"
})
export const headBlock = Metric.gauge("indexer_head_block", {
  description: "Latest chain head the indexer saw"
})
export const lagBlocks = Metric.gauge("indexer_lag_blocks", { description: "Chain head minus indexed block" })
export const leaderGauge = Metric.gauge("indexer_leader", {
  description: "1 while this process holds the vault's indexing lock"
})
export const eventsIndexed = counter("indexer_events_total", "Vault events appended to the event store")
export const batchesCommitted = counter("indexer_batches_total", "Block ranges committed to the event store")
export const reorgs = counter("indexer_reorgs_total", "Reorgs detected (a stored block no longer canonical)")
export const orphanedBlocks = counter("indexer_orphaned_blocks_total", "Blocks marked orphaned after reorgs")
export const restarts = counter("indexer_restarts_total", "Times the indexer failed and was restarted")
export const rangeSize = Metric.gauge("indexer_log_range_blocks", {
  description: "Current eth_getLogs block range"
})
export const nonceMismatches = counter(
  "indexer_nonce_mismatches_total",
  "Accounts whose nonces counted from events disagreed with the vault's (the chain's are kept)"
)
export const nonceChecksSkipped = counter(
  "indexer_nonce_checks_skipped_total",
  "Batches whose nonce reconciliation could not read the chain"
)

export const headersPruned = counter(
  "indexer_headers_pruned_total",
  "Block headers deleted below the finality horizon (only reorg detection used them)"
)
export const headerPruneFailures = counter(
  "indexer_header_prune_failures_total",
  "Header prunings that failed (retried after the next interval; indexing goes on)"
)

const rpcErrors = counter("indexer_rpc_errors_total", "Failed indexer RPC requests by kind")

/**
 * The indexer's counters, exported at 0 from start-up where an indexer runs; `kind` of an RPC error
 * may be the error's own tag, so that counter starts without labels.
 */
export const indexerSeriesAtZero: ReadonlyArray<SeriesAtZero> = [
  eventsIndexed,
  batchesCommitted,
  reorgs,
  orphanedBlocks,
  restarts,
  nonceMismatches,
  nonceChecksSkipped,
  headersPruned,
  headerPruneFailures,
  rpcErrors
]

export const countRpcError = (kind: string) => Metric.increment(Metric.tagged(rpcErrors, "kind", kind))

export const setState = (state: IndexerState) =>
  Effect.forEach(
    indexerStates,
    (s) => Metric.set(Metric.tagged(stateGauge, "state", s), s === state ? 1 : 0),
    { discard: true }
  )
