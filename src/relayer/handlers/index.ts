/**
 * Every handler group of the relayer's API (src/relayer/api/index.ts), one module per group. What
 * they stand on (the write path's services, the fee oracle, the sender, the indexer) is provided
 * by the relayer's wiring (layers/relayer.ts).
 */
import { Layer } from "effect"
import { RelayerAccountsHandlers } from "./accounts.js"
import { RelayerActionsHandlers } from "./actions.js"
import { RelayerBindsHandlers } from "./binds.js"
import { RelayerClaimsHandlers } from "./claims.js"
import { RelayerOperatorHandlers } from "./operator.js"
import { RelayerQuoteHandlers } from "./quote.js"
import { RelayerTransactionsHandlers } from "./transactions.js"

export const RelayerHandlers = Layer.mergeAll(
  RelayerOperatorHandlers,
  RelayerAccountsHandlers,
  RelayerTransactionsHandlers,
  RelayerQuoteHandlers,
  RelayerClaimsHandlers,
  RelayerActionsHandlers,
  RelayerBindsHandlers
)
