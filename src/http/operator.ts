/**
 * The handler of `/v1/metrics` (declared in src/http/operatorApi.ts): hidden (404) until a token is
 * set, then the Prometheus text for the right bearer token and 401 for anything else.
 */
import * as HttpApiError from "@effect/platform/HttpApiError"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Option, type Redacted } from "effect"
import { bearerMatches, prometheusText } from "./metrics.js"
import { METRICS_CONTENT_TYPE } from "./operatorApi.js"

export const handleMetrics =
  (token: Option.Option<Redacted.Redacted>) =>
  ({ headers }: { readonly headers: { readonly authorization?: string | undefined } }) =>
    Option.match(token, {
      onNone: () => Effect.fail(new HttpApiError.NotFound()),
      onSome: (expected) =>
        bearerMatches(headers.authorization, expected)
          ? Effect.map(prometheusText, (text) =>
              HttpServerResponse.text(text, { contentType: METRICS_CONTENT_TYPE })
            )
          : Effect.fail(new HttpApiError.Unauthorized())
    })
