/** `GET /v1/info` (docs/attestor.md §2 AttestorInfo, §4). */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { AttestorInfo } from "../../../schema/attestor.js"
import { Wire } from "../../../schema/errors.js"

export const infoEndpoint = HttpApiEndpoint.get("info", "/v1/info")
  .addSuccess(AttestorInfo)
  .addError(Wire.Unavailable)

export class AttestorInfoGroup extends HttpApiGroup.make("info").add(infoEndpoint) {}
