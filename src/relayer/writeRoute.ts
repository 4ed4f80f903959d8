/**
 * How every relayed write endpoint runs its handler: the body decoded by the handler itself (the
 * route still declares the schema, so the OpenAPI document and typed clients see it) so that a
 * malformed body is counted among the endpoint's outcomes, then the service, then one outcome
 * recorded: `ok`, the refusal's wire code, or `internal` for a defect. A client that hangs up is no
 * outcome.
 */
import { HttpApiError, type HttpServerRequest } from "@effect/platform"
import { Cause, Effect, Exit, Option, Schema } from "effect"
import { type ApiError, errorCatalog } from "../../schema/errors.js"
import type { TxHashResponse } from "../../schema/relayer.js"

export const relayedWrite =
  <A, I>(schema: Schema.Schema<A, I>, recordOutcome: (code: string) => Effect.Effect<void>) =>
  <E extends ApiError>(run: (body: A) => Effect.Effect<TxHashResponse, E>) => {
    const decode = Schema.decodeUnknown(schema)
    return ({
      request
    }: {
      readonly request: HttpServerRequest.HttpServerRequest
    }): Effect.Effect<TxHashResponse, E | HttpApiError.HttpApiDecodeError> =>
      request.json.pipe(
        // The body guard already refused anything that is not a JSON object.
        Effect.orDie,
        Effect.flatMap((body) => decode(body)),
        Effect.catchTag("ParseError", (error) =>
          Effect.flatMap(HttpApiError.HttpApiDecodeError.fromParseError(error), Effect.fail)
        ),
        Effect.flatMap(run),
        Effect.onExit(
          Exit.match({
            onSuccess: () => recordOutcome("ok"),
            onFailure: (cause) =>
              Option.match(Cause.failureOption(cause), {
                onSome: (error) =>
                  recordOutcome(
                    error._tag === "HttpApiDecodeError" ? "bad_request" : errorCatalog[error._tag].code
                  ),
                onNone: () => (Cause.isInterruptedOnly(cause) ? Effect.void : recordOutcome("internal"))
              })
          })
        )
      )
  }
