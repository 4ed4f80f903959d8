/** `POST /v1/bind` (spec/attestor.md §2 BindSignature, §4 "POST /v1/escrows and POST /v1/bind"). */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { BindRequest, BindResponse } from "../../../schema/attestor.js"
import { Wire } from "../../../schema/errors.js"
import { type ErrorsOf, withErrors } from "../../http/declare.js"

export const bindErrors = [Wire.BadRequest, Wire.InvalidSession, Wire.RateLimited, Wire.Unavailable] as const

export type BindError = ErrorsOf<typeof bindErrors>

export const bindEndpoint = HttpApiEndpoint.post("bind", "/v1/bind")
  .setPayload(BindRequest)
  .addSuccess(BindResponse)
  .pipe(withErrors(bindErrors))

export class AttestorBindsGroup extends HttpApiGroup.make("binds").add(bindEndpoint) {}
