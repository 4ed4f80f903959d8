/** `POST /v1/commitment` (spec/attestor.md §2 CommitmentResponse, §4 "POST /v1/commitment"). */
import { HttpApiGroup } from "@effect/platform"
import { CommitmentRequest, CommitmentResponse } from "../../../schema/attestor.js"
import { Wire } from "../../../schema/errors.js"
import { type ErrorOf, postEndpoint } from "../../http/declare.js"

export const commitmentEndpoint = postEndpoint("commitment", "/v1/commitment", {
  payload: CommitmentRequest,
  success: CommitmentResponse,
  errors: [Wire.BadRequest, Wire.Unsupported, Wire.NotFound, Wire.RateLimited, Wire.Unavailable]
})

export type CommitmentError = ErrorOf<typeof commitmentEndpoint>

export class AttestorCommitmentsGroup extends HttpApiGroup.make("commitments").add(commitmentEndpoint) {}
