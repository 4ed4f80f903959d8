/**
 * The one place an error becomes an HTTP response. Every refusal is `{ error, code }` with the
 * status of docs/protocol.md §7; anything unexpected is a 500 `internal` whose body reveals nothing.
 */
import * as HttpApiError from "@effect/platform/HttpApiError"
import { RouteNotFound } from "@effect/platform/HttpServerError"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Cause, Effect, Option } from "effect"
import { type ApiError, errorCatalog, isApiError } from "../../schema/errors.js"

export const renderApiError = (error: ApiError): HttpServerResponse.HttpServerResponse => {
  const { status, code } = errorCatalog[error._tag]
  const headers: Record<string, string> = {}
  if (error._tag === "RateLimited")
    headers["retry-after"] = String(Math.max(1, Math.ceil(error.retryAfterSeconds)))
  if (error._tag === "MethodNotAllowed") headers.allow = error.allow.join(", ")
  // A 402 is about this request's payment: never cached (docs/protocol.md §10).
  if (error._tag === "PaymentRequired" || error._tag === "PaymentFailed")
    headers["cache-control"] = "no-store"
  if (error._tag === "PaymentRequired" && error.challenge !== undefined)
    headers["payment-required"] = error.challenge
  // An oversized body is not read to the end; closing the connection stops the client sending it.
  if (error._tag === "PayloadTooLarge") headers.connection = "close"
  return HttpServerResponse.unsafeJson({ error: error.message, code }, { status, headers })
}

const internal = HttpServerResponse.unsafeJson({ error: "internal error", code: "internal" }, { status: 500 })

/** Name and stack frames of a defect, without its message: messages can carry request values. */
const describeDefect = (defect: unknown): string => {
  if (defect instanceof Error) {
    const frames = (defect.stack ?? "")
      .split("\n")
      .filter((line) => line.trimStart().startsWith("at "))
      .slice(0, 8)
      .map((line) => line.trim())
    return [defect.name, ...frames].join(" | ")
  }
  return typeof defect
}

/**
 * The wire code a failed request is answered with (the `code` of its body, or what an empty-bodied
 * operator refusal stands for), as outcome metrics count it; none for a client that hung up.
 */
export const failureCode = (cause: Cause.Cause<unknown>): string | undefined => {
  if (Cause.isInterruptedOnly(cause)) return undefined
  const failure = Cause.failureOption(cause)
  if (Option.isNone(failure)) return "internal"
  const error = failure.value
  if (isApiError(error)) return errorCatalog[error._tag].code
  if (error instanceof RouteNotFound || error instanceof HttpApiError.NotFound) return "not_found"
  if (error instanceof HttpApiError.Unauthorized) return "unauthorized"
  if (error instanceof HttpApiError.HttpApiDecodeError) return "bad_request"
  return "internal"
}

/** What a failed request answers: its typed error, or 404 for an unknown route, or 500. */
export const renderCause = (
  cause: Cause.Cause<unknown>
): Effect.Effect<HttpServerResponse.HttpServerResponse, never, never> => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) {
    const error = failure.value
    // Operator-only endpoints answer these with an empty body (docs/protocol.md §7). First: the
    // platform's `NotFound` has the wire error's tag, so `isApiError` would take it for that one.
    if (error instanceof HttpApiError.NotFound)
      return Effect.succeed(HttpServerResponse.empty({ status: 404 }))
    if (error instanceof HttpApiError.Unauthorized)
      return Effect.succeed(HttpServerResponse.empty({ status: 401 }))
    if (isApiError(error)) return Effect.succeed(renderApiError(error))
    if (error instanceof RouteNotFound) {
      return Effect.succeed(
        HttpServerResponse.unsafeJson({ error: "no such route", code: "not_found" }, { status: 404 })
      )
    }
    if (error instanceof HttpApiError.HttpApiDecodeError) {
      return Effect.succeed(
        HttpServerResponse.unsafeJson(
          { error: decodeErrorMessage(error), code: "bad_request" },
          { status: 400 }
        )
      )
    }
  }
  const defect = Option.orElse(failure, () => Cause.dieOption(cause))
  return Effect.logError("request failed unexpectedly").pipe(
    Effect.annotateLogs("defect", Option.match(defect, { onNone: () => "unknown", onSome: describeDefect })),
    Effect.as(internal)
  )
}

/** At most `max` characters of `text`, marked when cut. */
const cut = (text: string, max: number): string => (text.length <= max ? text : `${text.slice(0, max)}…`)

/** How much of one thing the client sent (a value, a field name) an error message may quote. */
const QUOTE_CHARS = 40
/** A rule's own text is the schema's, but it may embed a value too. */
const RULE_CHARS = 200

/**
 * A schema violation names the offending field and the rule it broke (to the sender only), quoting
 * no more than a few dozen characters of what was sent: field names and values come from the
 * client, and an error message is no echo service.
 */
const decodeErrorMessage = (error: HttpApiError.HttpApiDecodeError): string => {
  const first = error.issues[0]
  if (first === undefined) return "request does not match the schema"
  const path =
    first.path.length > 0 ? first.path.map((segment) => cut(String(segment), QUOTE_CHARS)).join(".") : "body"
  const more = error.issues.length > 1 ? ` (and ${error.issues.length - 1} more)` : ""
  // Effect's messages end in "actual <the value>".
  const rule = first.message.replace(
    /(actual )([\s\S]*)$/,
    (_, label: string, actual: string) => `${label}${cut(actual, QUOTE_CHARS)}`
  )
  return `${path}: ${cut(rule, RULE_CHARS)}${more}`
}
