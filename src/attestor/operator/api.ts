/** The attestor's operator endpoints (docs/attestor.md §4): health and metrics. */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { AttestorHealthResponse } from "../../../schema/attestor.js"
import { metricsEndpoint } from "../../http/operatorApi.js"

export const attestorHealthEndpoint = HttpApiEndpoint.get("health", "/v1/health").addSuccess(
  AttestorHealthResponse
)

export class AttestorOperatorGroup extends HttpApiGroup.make("operator")
  .add(attestorHealthEndpoint)
  .add(metricsEndpoint) {}
