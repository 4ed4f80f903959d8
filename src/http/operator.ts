/**
 * Operator endpoints both services share. `/v1/metrics` is hidden (404) until a token is set and
 * then needs it as a bearer token (401 otherwise); both refusals have empty bodies.
 */
import { HttpApiEndpoint, HttpApiError, HttpApiSchema, HttpServerResponse } from "@effect/platform"
import { Effect, Option, type Redacted, Schema } from "effect"
import { bearerMatches, prometheusText } from "./metrics.js"

export const metricsEndpoint = HttpApiEndpoint.get("metrics", "/v1/metrics")
  .setHeaders(Schema.Struct({ authorization: Schema.optional(Schema.String) }))
  .addSuccess(HttpApiSchema.Text({ contentType: "text/plain; version=0.0.4; charset=utf-8" }))
  .addError(HttpApiError.NotFound)
  .addError(HttpApiError.Unauthorized)

export const handleMetrics =
  (token: Option.Option<Redacted.Redacted>) =>
  ({ headers }: { readonly headers: { readonly authorization?: string | undefined } }) =>
    Option.match(token, {
      onNone: () => Effect.fail(new HttpApiError.NotFound()),
      onSome: (expected) =>
        bearerMatches(headers.authorization, expected)
          ? Effect.map(prometheusText, (text) =>
              HttpServerResponse.text(text, { contentType: "text/plain; version=0.0.4; charset=utf-8" })
            )
          : Effect.fail(new HttpApiError.Unauthorized())
    })
