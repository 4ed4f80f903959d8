/**
 * The indexer's metrics. Labels are states and failure kinds only: never an id, an address or a
 * block hash.
 */
import { Effect, Metric } from "effect"

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
export const eventsIndexed = Metric.counter("indexer_events_total", {
  description: "Vault events appended to the event store",
  incremental: true
})
export const batchesCommitted = Metric.counter("indexer_batches_total", {
  description: "Block ranges committed to the event store",
  incremental: true
})
export const reorgs = Metric.counter("indexer_reorgs_total", {
  description: "Reorgs detected (a stored block no longer canonical)",
  incremental: true
})
export const orphanedBlocks = Metric.counter("indexer_orphaned_blocks_total", {
  description: "Blocks marked orphaned after reorgs",
  incremental: true
})
export const restarts = Metric.counter("indexer_restarts_total", {
  description: "Times the indexer failed and was restarted",
  incremental: true
})
export const rangeSize = Metric.gauge("indexer_log_range_blocks", {
  description: "Current eth_getLogs block range"
})
export const nonceMismatches = Metric.counter("indexer_nonce_mismatches_total", {
  description: "Accounts whose nonces counted from events disagreed with the vault's (the chain's are kept)",
  incremental: true
})
export const nonceChecksSkipped = Metric.counter("indexer_nonce_checks_skipped_total", {
  description: "Batches whose nonce reconciliation could not read the chain",
  incremental: true
})

export const headersPruned = Metric.counter("indexer_headers_pruned_total", {
  description: "Block headers deleted below the finality horizon (only reorg detection used them)",
  incremental: true
})
export const headerPruneFailures = Metric.counter("indexer_header_prune_failures_total", {
  description: "Header prunings that failed (retried after the next interval; indexing goes on)",
  incremental: true
})

const rpcErrors = Metric.counter("indexer_rpc_errors_total", {
  description: "Failed indexer RPC requests by kind",
  incremental: true
})

export const countRpcError = (kind: string) => Metric.increment(Metric.tagged(rpcErrors, "kind", kind))

export const setState = (state: IndexerState) =>
  Effect.forEach(
    indexerStates,
    (s) => Metric.set(Metric.tagged(stateGauge, "state", s), s === state ? 1 : 0),
    { discard: true }
  )
