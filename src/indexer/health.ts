/** The indexer's state as both services' `/v1/health` report it: no account data, only progress. */
import type { IndexerHealth } from "../../schema/relayer.js"
import type { IndexerStatus } from "./Indexer.js"

export const indexerHealth = (s: IndexerStatus): IndexerHealth => ({
  state: s.state,
  ...(s.block === undefined ? {} : { block: s.block }),
  ...(s.block === undefined || s.head === undefined ? {} : { lag: Math.max(0, s.head - s.block) })
})
