/** The attestor's operator endpoints (docs/attestor.md §4): health and metrics. */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { AttestorHealthResponse } from "../../../schema/attestor.js"
import { metricsEndpoint } from "../../http/operatorApi.js"

export const attestorHealthEndpoint = HttpApiEndpoint.get("health", "/v1/health").addSuccess(
  AttestorHealthResponse
)

export class AttestorOperatorGroup extends HttpApiGroup.make("operator")
  .add(attestorHealthEndpoint)
  .add(metricsEndpoint) {}
