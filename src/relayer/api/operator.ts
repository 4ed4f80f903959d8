/** The relayer's operator endpoints (docs/relayer.md §4): health and metrics. */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { Wire } from "../../../schema/errors.js"
import { HealthResponse } from "../../../schema/relayer.js"
import { metricsEndpoint } from "../../http/operatorApi.js"

export const healthEndpoint = HttpApiEndpoint.get("health", "/v1/health")
  .addSuccess(HealthResponse)
  .addError(Wire.Unavailable)

export class RelayerOperatorGroup extends HttpApiGroup.make("operator")
  .add(healthEndpoint)
  .add(metricsEndpoint) {}
