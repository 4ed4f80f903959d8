/** `POST /v1/escrows` (docs/attestor.md §4 "POST /v1/escrows and POST /v1/bind", §5). */
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { EscrowsRequest, EscrowsResponse } from "../../../schema/attestor.js"
import { Wire } from "../../../schema/errors.js"
import { postEndpoint } from "../../http/declare.js"

export const escrowsEndpoint = postEndpoint("escrows", "/v1/escrows", {
  payload: EscrowsRequest,
  success: EscrowsResponse,
  errors: [Wire.BadRequest, Wire.InvalidSession, Wire.RateLimited, Wire.Unavailable]
})

export class AttestorEscrowsGroup extends HttpApiGroup.make("escrows").add(escrowsEndpoint) {}
