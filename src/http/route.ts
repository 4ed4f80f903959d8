/**
 * What both services' POST routes share: the body decoded by the handler itself, so that a malformed body is counted among the route's
 * outcomes (the endpoint still declares the schema for the OpenAPI document and typed clients),
 * and one outcome recorded per request: `ok`, the refusal's wire code, or `internal` for a
 * defect. A client that hangs up is no outcome.
 */
import { HttpApiError, type HttpServerRequest } from "@effect/platform"
import { Cause, Effect, Exit, Option, Schema } from "effect"
import { type ApiError, errorCatalog } from "../../schema/errors.js"

/** The request's JSON body decoded with `schema`; a violation is the framework's 400 `bad_request`. */
export const decodeBody = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode = Schema.decodeUnknown(schema)
  return (request: HttpServerRequest.HttpServerRequest): Effect.Effect<A, HttpApiError.HttpApiDecodeError> =>
    request.json.pipe(
      // The body guard already refused anything that is not a JSON object.
      Effect.orDie,
      Effect.flatMap((body) => decode(body)),
      Effect.catchTag("ParseError", (error) =>
        Effect.flatMap(HttpApiError.HttpApiDecodeError.fromParseError(error), Effect.fail)
      )
    )
}

/** The wire code of a route's failure, as outcome metrics count it. */
export const outcomeOf = (error: ApiError | HttpApiError.HttpApiDecodeError): string =>
  error._tag === "HttpApiDecodeError" ? "bad_request" : errorCatalog[error._tag].code

/** Records the outcome of `effect` once it ends: `ok`, the refusal's code, or `internal`. */
export const withOutcome =
  (record: (outcome: string) => Effect.Effect<void>) =>
  <A, E extends ApiError | HttpApiError.HttpApiDecodeError, R>(
    effect: Effect.Effect<A, E, R>
  ): Effect.Effect<A, E, R> =>
    Effect.onExit(
      effect,
      Exit.match({
        onSuccess: () => record("ok"),
        onFailure: (cause) =>
          Option.match(Cause.failureOption(cause), {
            onSome: (error) => record(outcomeOf(error)),
            onNone: () => (Cause.isInterruptedOnly(cause) ? Effect.void : record("internal"))
          })
      })
    )
