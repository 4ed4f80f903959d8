/**
 * The relayer's HTTP API (spec/relayer.md §4): each endpoint with its request, response and
 * error schemas. The server, the OpenAPI document and the typed client all derive from this.
 */
import { HttpApi, HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Wire } from "../../schema/errors.js"
import { HealthResponse } from "../../schema/relayer.js"
import { serviceDocument } from "../http/openapi.js"
import { metricsEndpoint } from "../http/operator.js"

export const healthEndpoint = HttpApiEndpoint.get("health", "/v1/health")
  .addSuccess(HealthResponse)
  .addError(Wire.Unavailable)

export class RelayerOperatorGroup extends HttpApiGroup.make("operator")
  .add(healthEndpoint)
  .add(metricsEndpoint) {}

export class RelayerApi extends HttpApi.make("relayer")
  .add(RelayerOperatorGroup)
  .addError(Wire.BadRequest)
  .addError(Wire.PayloadTooLarge)
  .addError(Wire.Internal)
  .annotateContext(
    serviceDocument({
      title: "Fee vault relayer",
      description: "Submits owner-signed vault transactions from the relayer's hot key (spec/relayer.md)."
    })
  ) {}
