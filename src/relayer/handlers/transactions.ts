/**
 * The handler of `POST /v1/tx-status` (src/relayer/api/transactions.ts). A hash this relayer never
 * sent, or one it dropped, is `unknown` (never 404); a replaced transaction's hashes all report the
 * replacement that was mined.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { TxSender } from "../../txsender/TxSender.js"
import { RelayerApi } from "../api/index.js"

export const RelayerTransactionsHandlers = HttpApiBuilder.group(RelayerApi, "transactions", (handlers) =>
  Effect.map(TxSender, (sender) =>
    handlers.handle("txStatus", ({ payload }) => sender.status(payload.txHash))
  )
)
