/** `POST /v1/commitment` (spec/attestor.md §2 CommitmentResponse, §4 "POST /v1/commitment"). */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { CommitmentRequest, CommitmentResponse } from "../../../schema/attestor.js"
import { Wire } from "../../../schema/errors.js"
import { type ErrorsOf, withErrors } from "../../http/declare.js"

export const commitmentErrors = [Wire.BadRequest, Wire.Unsupported, Wire.RateLimited] as const

export type CommitmentError = ErrorsOf<typeof commitmentErrors>

export const commitmentEndpoint = HttpApiEndpoint.post("commitment", "/v1/commitment")
  .setPayload(CommitmentRequest)
  .addSuccess(CommitmentResponse)
  .pipe(withErrors(commitmentErrors))

export class AttestorCommitmentsGroup extends HttpApiGroup.make("commitments").add(commitmentEndpoint) {}
