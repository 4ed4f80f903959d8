/**
 * How both APIs declare their endpoints. An endpoint's refusals are listed once, on the endpoint
 * (`postEndpoint`), and the service behind it names them as its error channel through
 * `ErrorOf<typeof endpoint>`, so the OpenAPI document, the typed client and the handler's type
 * cannot drift. Every service answers its own `{ error, code }` for a malformed body, an oversized
 * or encoded one, a rate limit and a defect (`serviceApi`).
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import type { Schema } from "effect"
import { Wire } from "../../schema/errors.js"
import { serviceDocument } from "./openapi.js"

export type ErrorList = ReadonlyArray<Schema.Schema.Any>

/** The tagged errors an endpoint declares: the error channel of the service behind it. */
export type ErrorOf<E extends HttpApiEndpoint.HttpApiEndpoint.Any> = HttpApiEndpoint.HttpApiEndpoint.Error<E>

/**
 * `POST path` with a JSON `payload`, answering `success` or one of `errors` (declared in order, so
 * the OpenAPI document lists them as the list does).
 */
export const postEndpoint = <
  const Name extends string,
  P extends Schema.Schema.Any,
  S extends Schema.Schema.Any,
  const L extends ErrorList
>(
  name: Name,
  path: HttpApiEndpoint.PathSegment,
  spec: { readonly payload: P; readonly success: S; readonly errors: L }
): HttpApiEndpoint.HttpApiEndpoint<
  Name,
  "POST",
  never,
  never,
  Schema.Schema.Type<P>,
  never,
  Schema.Schema.Type<S>,
  Schema.Schema.Type<L[number]>,
  Schema.Schema.Context<P> | Schema.Schema.Context<S>,
  Schema.Schema.Context<L[number]>
> => {
  const endpoint = HttpApiEndpoint.post(name, path).setPayload(spec.payload).addSuccess(spec.success)
  // The fold's type is the signature's; each step is an ordinary `addError`.
  // biome-ignore lint/suspicious/noExplicitAny: the intermediate endpoints' error types grow by one per step
  let declared: HttpApiEndpoint.HttpApiEndpoint<Name, "POST", any, any, any, any, any, any, any, any> =
    endpoint as never
  for (const error of spec.errors) declared = declared.addError(error)
  return declared as never
}

/** A service's API before its groups: the refusals every route can answer and its document's title. */
export const serviceApi = <const Id extends string>(
  id: Id,
  document: { readonly title: string; readonly description: string }
) =>
  HttpApi.make(id)
    .addError(Wire.BadRequest)
    .addError(Wire.PayloadTooLarge)
    .addError(Wire.UnsupportedMediaType)
    .addError(Wire.RateLimited)
    .addError(Wire.Internal)
    .annotateContext(serviceDocument(document))
