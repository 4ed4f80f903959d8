/**
 * The operator endpoint both services declare (docs/relayer.md §4, docs/attestor.md §4):
 * `/v1/metrics`, hidden (404) until a token is set and then behind it as a bearer token (401
 * otherwise); both refusals have empty bodies (docs/protocol.md §7). Declaration only: the handler is
 * `MetricsEndpoint` (src/http/MetricsEndpoint.ts).
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiError from "@effect/platform/HttpApiError"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema } from "effect"

export const METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

export const metricsEndpoint = HttpApiEndpoint.get("metrics", "/v1/metrics")
  .setHeaders(Schema.Struct({ authorization: Schema.optional(Schema.String) }))
  .addSuccess(HttpApiSchema.Text({ contentType: METRICS_CONTENT_TYPE }))
  .addError(HttpApiError.NotFound)
  .addError(HttpApiError.Unauthorized)
