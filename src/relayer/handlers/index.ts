/**
 * Every handler group of the relayer's API (src/relayer/api/index.ts), one module per group. What
 * they stand on (the write path's services, the fee oracle, the sender, the indexer) is provided
 * by the relayer's wiring (layers/relayer.ts).
 */
import { Layer } from "effect"
import { RelayerAccountsLive } from "./accounts.js"
import { RelayerActionsLive } from "./actions.js"
import { RelayerBindsLive } from "./binds.js"
import { RelayerClaimsLive } from "./claims.js"
import { RelayerOperatorLive } from "./operator.js"
import { QuoteLive } from "./quote.js"
import { TransactionsLive } from "./transactions.js"

export const RelayerHandlers = Layer.mergeAll(
  RelayerOperatorLive,
  RelayerAccountsLive,
  TransactionsLive,
  QuoteLive,
  RelayerClaimsLive,
  RelayerActionsLive,
  RelayerBindsLive
)
