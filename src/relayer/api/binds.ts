/**
 * The bind transactions (docs/relayer.md §4): `POST /v1/cancel-bind`, `/v1/propose-bind` and
 * `/v1/finalize-bind`, unpaid vault calls the relayer sends for the owner or the attestors.
 */
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { Wire } from "../../../schema/errors.js"
import {
  CancelBindRequest,
  FinalizeBindRequest,
  ProposeBindRequest,
  TxHashResponse
} from "../../../schema/relayer.js"
import { type ErrorOf, postEndpoint } from "../../http/declare.js"

const errors = [
  Wire.BadRequest,
  Wire.DeadlineTooSoon,
  Wire.InvalidSignature,
  Wire.InsufficientAttestations,
  Wire.NotFound,
  Wire.RecipientDenied,
  Wire.BindState,
  Wire.NonceMismatch,
  Wire.SimulationFailed,
  Wire.GasCapExceeded,
  Wire.RateLimited,
  Wire.Unavailable
] as const
const success = TxHashResponse

const cancelBindEndpoint = postEndpoint("cancelBind", "/v1/cancel-bind", {
  payload: CancelBindRequest,
  success,
  errors
})

/** Every refusal of a bind endpoint: the `BindTransactions` service's error channel. */
export type BindTransactionError = ErrorOf<typeof cancelBindEndpoint>

export class RelayerBindsGroup extends HttpApiGroup.make("binds")
  .add(cancelBindEndpoint)
  .add(postEndpoint("proposeBind", "/v1/propose-bind", { payload: ProposeBindRequest, success, errors }))
  .add(
    postEndpoint("finalizeBind", "/v1/finalize-bind", { payload: FinalizeBindRequest, success, errors })
  ) {}
