/** `POST /v1/commitment` (docs/attestor.md §2 CommitmentResponse, §4 "POST /v1/commitment"). */
import { HttpApiGroup } from "@effect/platform"
import { CommitmentRequest, CommitmentResponse } from "../../../schema/attestor.js"
import { Wire } from "../../../schema/errors.js"
import { type ErrorOf, postEndpoint } from "../../http/declare.js"
import { PaymentHeaders } from "./payment.js"

export const commitmentEndpoint = postEndpoint("commitment", "/v1/commitment", {
  payload: CommitmentRequest,
  success: CommitmentResponse,
  errors: [
    Wire.BadRequest,
    Wire.Unsupported,
    Wire.PaymentRequired,
    Wire.PaymentFailed,
    Wire.NotFound,
    Wire.RateLimited,
    Wire.Unavailable
  ]
}).setHeaders(PaymentHeaders)

export type CommitmentError = ErrorOf<typeof commitmentEndpoint>

export class AttestorCommitmentsGroup extends HttpApiGroup.make("commitments").add(commitmentEndpoint) {}
