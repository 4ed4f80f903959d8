/** `POST /v1/commitment` (docs/attestor.md §2 CommitmentResponse, §4 "POST /v1/commitment"). */
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { CommitmentRequest, CommitmentResponse } from "../../../schema/attestor.js"
import { type ErrorOf, postEndpoint } from "../../http/declare.js"
import { handleLookupRefusals, PaymentHeaders } from "../lookups/payments/paymentRequestHeader.js"

export const commitmentEndpoint = postEndpoint("commitment", "/v1/commitment", {
  payload: CommitmentRequest,
  success: CommitmentResponse,
  errors: handleLookupRefusals
}).setHeaders(PaymentHeaders)

export type CommitmentError = ErrorOf<typeof commitmentEndpoint>

export class AttestorCommitmentsGroup extends HttpApiGroup.make("commitments").add(commitmentEndpoint) {}
