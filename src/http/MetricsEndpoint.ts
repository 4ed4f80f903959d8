/**
 * `/v1/metrics` (declared in src/http/operatorApi.ts) on both services: hidden (404) until a token
 * is set, then the Prometheus text for the right bearer token and 401 for anything else.
 */
import * as HttpApiError from "@effect/platform/HttpApiError"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Context, Effect, Layer, Option, type Redacted } from "effect"
import { bearerMatches, prometheusText } from "./metrics.js"
import { METRICS_CONTENT_TYPE } from "./operatorApi.js"

interface MetricsRequest {
  readonly headers: { readonly authorization?: string | undefined }
}

export const handleMetrics =
  (token: Option.Option<Redacted.Redacted>) =>
  ({
    headers
  }: MetricsRequest): Effect.Effect<
    HttpServerResponse.HttpServerResponse,
    HttpApiError.NotFound | HttpApiError.Unauthorized
  > =>
    Option.match(token, {
      onNone: () => Effect.fail(new HttpApiError.NotFound()),
      onSome: (expected) =>
        bearerMatches(headers.authorization, expected)
          ? Effect.map(prometheusText, (text) =>
              HttpServerResponse.text(text, { contentType: METRICS_CONTENT_TYPE })
            )
          : Effect.fail(new HttpApiError.Unauthorized())
    })

export interface MetricsEndpointShape {
  readonly serve: ReturnType<typeof handleMetrics>
}

export class MetricsEndpoint extends Context.Tag("MetricsEndpoint")<MetricsEndpoint, MetricsEndpointShape>() {
  /** Served with `METRICS_TOKEN`; without one (`Option.none()`) the route answers 404. */
  static readonly layer = (token: Option.Option<Redacted.Redacted>): Layer.Layer<MetricsEndpoint> =>
    Layer.succeed(MetricsEndpoint, { serve: handleMetrics(token) })
}
