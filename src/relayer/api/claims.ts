/** `POST /v1/claim` (docs/relayer.md §4 "POST /v1/claim processing rules"). */
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { Wire } from "../../../schema/errors.js"
import { ClaimRequest, TxHashResponse } from "../../../schema/relayer.js"
import { type ErrorOf, postEndpoint } from "../../http/declare.js"

export const claimEndpoint = postEndpoint("claim", "/v1/claim", {
  payload: ClaimRequest,
  success: TxHashResponse,
  // In the order the rules can answer them.
  errors: [
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
  ]
})

/** Every refusal of POST /v1/claim: the `Claims` service's error channel. */
export type ClaimError = ErrorOf<typeof claimEndpoint>

export class RelayerClaimsGroup extends HttpApiGroup.make("claims").add(claimEndpoint) {}
