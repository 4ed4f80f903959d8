/** `POST /v1/claim` (spec/relayer.md §4 "POST /v1/claim processing rules"). */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Wire } from "../../../schema/errors.js"
import { ClaimRequest, TxHashResponse } from "../../../schema/relayer.js"
import { type ErrorsOf, withErrors } from "../../http/declare.js"

/** Every refusal of POST /v1/claim, in the order the rules can answer them. */
export const claimErrors = [
  Wire.BadRequest,
  Wire.DeadlineTooSoon,
  Wire.RelayerMismatch,
  Wire.InvalidAmount,
  Wire.DataHashMismatch,
  Wire.AdapterNotAllowed,
  Wire.InvalidSignature,
  Wire.FeeTooLow,
  Wire.RecipientDenied,
  Wire.NotFound,
  Wire.NonceMismatch,
  Wire.SimulationFailed,
  Wire.GasCapExceeded,
  Wire.RateLimited,
  Wire.Unavailable
] as const

export type ClaimError = ErrorsOf<typeof claimErrors>

export const claimEndpoint = HttpApiEndpoint.post("claim", "/v1/claim")
  .setPayload(ClaimRequest)
  .addSuccess(TxHashResponse)
  .pipe(withErrors(claimErrors))

export class RelayerClaimsGroup extends HttpApiGroup.make("claims").add(claimEndpoint) {}
