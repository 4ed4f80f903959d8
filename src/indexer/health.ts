/**
 * How the indexers (the vault indexer, the attestor's hint index) report themselves: their state
 * in `/v1/health`, and their failures in log lines, both without account data.
 */
import type { IndexerHealth } from "../../schema/relayer.js"
import type { ChainCheck } from "./freshness.js"
import type { IndexerStatus } from "./Indexer.js"

/**
 * `lag` is measured against the freshest head there is: the one `check` just read, else the
 * indexer's own. It is absent (unknown) when the chain did not answer, and when the indexer's
 * last step failed with no fresh head to compare: its remembered head is as old as its block, so
 * the difference would say 0 exactly when the index is falling behind.
 */
export const indexerHealth = (s: IndexerStatus, check: ChainCheck = { _tag: "Fresh" }): IndexerHealth => {
  const head =
    check._tag === "Answered"
      ? check.head
      : check._tag === "Unreachable" || s.state === "retrying"
        ? undefined
        : s.head
  return {
    state: s.state,
    ...(s.block === undefined ? {} : { block: s.block }),
    ...(s.block === undefined || head === undefined ? {} : { lag: Math.max(0, head - s.block) })
  }
}

/** A failure for the log, never with a URL, a request body or a node's text (`src/logging.ts`). */
export { describeFailure } from "../logging.js"
