/** `POST /v1/public-handle` (spec/attestor.md §2 PublicHandle response, PROTOCOL.md §10 "Public handle"). */
import { HttpApiGroup } from "@effect/platform"
import { PublicHandleRequest, PublicHandleResponse } from "../../../schema/attestor.js"
import { Wire } from "../../../schema/errors.js"
import { postEndpoint } from "../../http/declare.js"

export const publicHandleEndpoint = postEndpoint("publicHandle", "/v1/public-handle", {
  payload: PublicHandleRequest,
  success: PublicHandleResponse,
  errors: [Wire.BadRequest, Wire.Unsupported, Wire.NotFound, Wire.RateLimited, Wire.Unavailable]
})

export class AttestorPublicHandlesGroup extends HttpApiGroup.make("publicHandles").add(
  publicHandleEndpoint
) {}
