/**
 * An endpoint's refusals declared once: a list of wire error schemas (schema/errors.ts `Wire`)
 * that the endpoint declares (`withErrors`) and the service behind it names as its error channel
 * (`ErrorsOf`), so the OpenAPI document, the typed client and the handler's type cannot drift.
 */
import type { HttpApiEndpoint } from "@effect/platform"
import type { HttpMethod } from "@effect/platform/HttpMethod"
import type { Schema } from "effect"

export type ErrorList = ReadonlyArray<Schema.Schema.Any>

/** The tagged errors a list of wire error schemas decodes to. */
export type ErrorsOf<L extends ErrorList> = Schema.Schema.Type<L[number]>

/** `endpoint` declaring every error of `errors`, in order. */
export const withErrors =
  <const L extends ErrorList>(errors: L) =>
  <Name extends string, Method extends HttpMethod, Path, UrlParams, Payload, Headers, Success, Error, R, RE>(
    endpoint: HttpApiEndpoint.HttpApiEndpoint<
      Name,
      Method,
      Path,
      UrlParams,
      Payload,
      Headers,
      Success,
      Error,
      R,
      RE
    >
  ): HttpApiEndpoint.HttpApiEndpoint<
    Name,
    Method,
    Path,
    UrlParams,
    Payload,
    Headers,
    Success,
    Error | ErrorsOf<L>,
    R,
    RE | Schema.Schema.Context<L[number]>
  > => {
    // The fold's type is the signature's; each step is an ordinary `addError`.
    // biome-ignore lint/suspicious/noExplicitAny: the intermediate endpoints' error types grow by one per step
    let declared: HttpApiEndpoint.HttpApiEndpoint<Name, Method, any, any, any, any, any, any, any, any> =
      endpoint
    for (const error of errors) declared = declared.addError(error)
    return declared
  }
