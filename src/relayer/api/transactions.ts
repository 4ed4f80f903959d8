/**
 * `POST /v1/tx-status` (docs/relayer.md §4): the status of a transaction this relayer sent, asked
 * by hash in a POST body so that no hash travels in a URL.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { Wire } from "../../../schema/errors.js"
import { TxStatus, TxStatusRequest } from "../../../schema/relayer.js"

export const txStatusEndpoint = HttpApiEndpoint.post("txStatus", "/v1/tx-status")
  .setPayload(TxStatusRequest)
  .addSuccess(TxStatus)
  .addError(Wire.Unavailable)

export class TransactionsGroup extends HttpApiGroup.make("transactions").add(txStatusEndpoint) {}
