/**
 * How every relayed write endpoint runs its handler (src/http/route.ts): the body decoded by the
 * handler itself, so that a malformed body is counted among the endpoint's outcomes, then the
 * service, then one outcome recorded.
 */
import type { HttpApiError, HttpServerRequest } from "@effect/platform"
import { Effect, type Schema } from "effect"
import type { ApiError } from "../../schema/errors.js"
import type { TxHashResponse } from "../../schema/relayer.js"
import { decodeBody, withOutcome } from "../http/route.js"

export const relayedWrite =
  <A, I>(schema: Schema.Schema<A, I>, recordOutcome: (code: string) => Effect.Effect<void>) =>
  <Err extends ApiError>(run: (body: A) => Effect.Effect<TxHashResponse, Err>) => {
    const decode = decodeBody(schema)
    return ({
      request
    }: {
      readonly request: HttpServerRequest.HttpServerRequest
    }): Effect.Effect<TxHashResponse, Err | HttpApiError.HttpApiDecodeError> =>
      decode(request).pipe(Effect.flatMap(run), withOutcome(recordOutcome))
  }
