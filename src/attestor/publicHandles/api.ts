/** `POST /v1/public-handle` (docs/attestor.md §2 PublicHandle response, docs/protocol.md §10 "Public handle"). */
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { PublicHandleRequest, PublicHandleResponse } from "../../../schema/attestor.js"
import { type ErrorOf, postEndpoint } from "../../http/declare.js"
import { handleLookupRefusals, PaymentHeaders } from "../lookups/payments/paymentRequestHeader.js"

export const publicHandleEndpoint = postEndpoint("publicHandle", "/v1/public-handle", {
  payload: PublicHandleRequest,
  success: PublicHandleResponse,
  errors: handleLookupRefusals
}).setHeaders(PaymentHeaders)

export type PublicHandleError = ErrorOf<typeof publicHandleEndpoint>

export class AttestorPublicHandlesGroup extends HttpApiGroup.make("publicHandles").add(
  publicHandleEndpoint
) {}
