/**
 * How the indexers (the vault indexer, the attestor's hint index) report themselves: their state
 * in `/v1/health`, and their failures in log lines, both without account data.
 */
import { Cause, Option } from "effect"
import type { IndexerHealth } from "../../schema/relayer.js"
import type { IndexerStatus } from "./Indexer.js"

export const indexerHealth = (s: IndexerStatus): IndexerHealth => ({
  state: s.state,
  ...(s.block === undefined ? {} : { block: s.block }),
  ...(s.block === undefined || s.head === undefined ? {} : { lag: Math.max(0, s.head - s.block) })
})

/**
 * A failure for the log: the tag and message of a typed error (they name operations, blocks and
 * reasons, never accounts), and only the kind of a defect (its message could carry anything).
 */
export const describeFailure = (cause: Cause.Cause<unknown>): string =>
  Option.match(Cause.failureOption(cause), {
    onSome: (error) =>
      typeof error === "object" && error !== null && "_tag" in error && error instanceof Error
        ? `${String(error._tag)}: ${error.message}`
        : "failure",
    onNone: () =>
      Option.match(Cause.dieOption(cause), {
        onSome: (defect) => `defect (${defect instanceof Error ? defect.name : typeof defect})`,
        onNone: () => "interrupted"
      })
  })
