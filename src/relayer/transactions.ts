/**
 * `POST /v1/tx-status` (spec/relayer.md §4): the status of a transaction this relayer sent,
 * asked by hash in a POST body so that no hash travels in a URL. A hash this relayer never sent,
 * or one it dropped, is `unknown` (never 404); a replaced transaction's hashes all report the
 * replacement that was mined.
 */
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Effect } from "effect"
import { Wire } from "../../schema/errors.js"
import { TxStatus, TxStatusRequest } from "../../schema/relayer.js"
import { TxSender } from "../txsender/TxSender.js"

export const txStatusEndpoint = HttpApiEndpoint.post("txStatus", "/v1/tx-status")
  .setPayload(TxStatusRequest)
  .addSuccess(TxStatus)
  .addError(Wire.Unavailable)

export class TransactionsGroup extends HttpApiGroup.make("transactions").add(txStatusEndpoint) {}

// The handlers are built against an API of this group alone, under the relayer API's name, so
// that this module need not import `api.ts` (which imports it): the layer provides the same
// group service the full `RelayerApi` looks for.
const TransactionsApi = HttpApi.make("relayer").add(TransactionsGroup)

export const TransactionsLive = HttpApiBuilder.group(TransactionsApi, "transactions", (handlers) =>
  Effect.map(TxSender, (sender) =>
    handlers.handle("txStatus", ({ payload }) => sender.status(payload.txHash))
  )
)
