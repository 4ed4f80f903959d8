/**
 * Logins (spec/attestor.md §4 "OAuth start / callback / verify rules", PROTOCOL.md §10): each ends
 * in a session for the stealth owner fixed before it. Every login route lives under
 * `/v1/oauth/<platform>/…`; `LoginOffered` refuses a platform this instance is not configured for
 * with 400 `unsupported` before its body is read.
 */
import { HttpApiGroup, HttpApiMiddleware } from "@effect/platform"
import { MessengerVerifyRequest, SessionResponse } from "../../../schema/attestor.js"
import { Wire } from "../../../schema/errors.js"
import { type ErrorOf, postEndpoint } from "../../http/declare.js"

/** Whether the route's platform is one this instance logs in with (400 `unsupported` if not). */
export class LoginOffered extends HttpApiMiddleware.Tag<LoginOffered>()("LoginOffered", {
  failure: Wire.Unsupported
}) {}

export const messengerVerifyEndpoint = postEndpoint("messengerVerify", "/v1/oauth/messenger/verify", {
  payload: MessengerVerifyRequest,
  success: SessionResponse,
  errors: [Wire.BadRequest, Wire.Unsupported, Wire.InvalidSession, Wire.RateLimited, Wire.Unavailable]
})

export type MessengerVerifyError = ErrorOf<typeof messengerVerifyEndpoint>

export class AttestorLoginsGroup extends HttpApiGroup.make("logins")
  .add(messengerVerifyEndpoint)
  .middleware(LoginOffered) {}
