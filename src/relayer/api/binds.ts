/**
 * The bind transactions (spec/relayer.md §4): `POST /v1/cancel-bind`, `/v1/propose-bind` and
 * `/v1/finalize-bind`, unpaid vault calls the relayer sends for the owner or the attestors.
 */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import type { Schema } from "effect"
import { Wire } from "../../../schema/errors.js"
import {
  CancelBindRequest,
  FinalizeBindRequest,
  ProposeBindRequest,
  TxHashResponse
} from "../../../schema/relayer.js"
import { type ErrorsOf, withErrors } from "../../http/declare.js"

/** Every refusal of a bind endpoint. */
export const bindTransactionErrors = [
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

export type BindTransactionError = ErrorsOf<typeof bindTransactionErrors>

const bindEndpoint = <const Name extends string, P extends Schema.Schema.Any>(
  name: Name,
  path: `/v1/${string}`,
  payload: P
) =>
  HttpApiEndpoint.post(name, path)
    .setPayload(payload)
    .addSuccess(TxHashResponse)
    .pipe(withErrors(bindTransactionErrors))

export class RelayerBindsGroup extends HttpApiGroup.make("binds")
  .add(bindEndpoint("cancelBind", "/v1/cancel-bind", CancelBindRequest))
  .add(bindEndpoint("proposeBind", "/v1/propose-bind", ProposeBindRequest))
  .add(bindEndpoint("finalizeBind", "/v1/finalize-bind", FinalizeBindRequest)) {}
