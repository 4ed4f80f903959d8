/** `POST /v1/escrows` (spec/attestor.md §4 "POST /v1/escrows and POST /v1/bind", §5). */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { EscrowsRequest, EscrowsResponse } from "../../../schema/attestor.js"
import { Wire } from "../../../schema/errors.js"
import { type ErrorsOf, withErrors } from "../../http/declare.js"

export const escrowsErrors = [
  Wire.BadRequest,
  Wire.InvalidSession,
  Wire.RateLimited,
  Wire.Unavailable
] as const

export type EscrowsError = ErrorsOf<typeof escrowsErrors>

export const escrowsEndpoint = HttpApiEndpoint.post("escrows", "/v1/escrows")
  .setPayload(EscrowsRequest)
  .addSuccess(EscrowsResponse)
  .pipe(withErrors(escrowsErrors))

export class AttestorEscrowsGroup extends HttpApiGroup.make("escrows").add(escrowsEndpoint) {}
