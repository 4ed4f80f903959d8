/** `POST /v1/bind` (docs/attestor.md §2 BindSignature, §4 "POST /v1/escrows and POST /v1/bind"). */
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { BindRequest, BindResponse } from "../../../schema/attestor.js"
import { Wire } from "../../../schema/errors.js"
import { type ErrorOf, postEndpoint } from "../../http/declare.js"

export const bindEndpoint = postEndpoint("bind", "/v1/bind", {
  payload: BindRequest,
  success: BindResponse,
  errors: [Wire.BadRequest, Wire.InvalidSession, Wire.RateLimited, Wire.Unavailable]
})

/** Every refusal of POST /v1/bind: the bind signing's error channel. */
export type BindError = ErrorOf<typeof bindEndpoint>

export class AttestorBindsGroup extends HttpApiGroup.make("binds").add(bindEndpoint) {}
