/**
 * Every refusal the services can answer with (docs/protocol.md §7). Each error is a tagged class that
 * handlers fail with; `errorCatalog` gives its HTTP status and wire code, and one renderer
 * (src/http/render.ts) turns any of them into `{ error, code }`. The wire schema of each error
 * (`wireError`) is what endpoints declare, so the OpenAPI document lists exactly these bodies.
 */
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema } from "effect"

const fields = { message: Schema.String }

export class BadRequest extends Schema.TaggedError<BadRequest>()("BadRequest", fields) {}
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", fields) {}
export class UnsupportedMediaType extends Schema.TaggedError<UnsupportedMediaType>()(
  "UnsupportedMediaType",
  fields
) {}
export class DeadlineTooSoon extends Schema.TaggedError<DeadlineTooSoon>()("DeadlineTooSoon", fields) {}
export class RelayerMismatch extends Schema.TaggedError<RelayerMismatch>()("RelayerMismatch", fields) {}
export class InvalidAmount extends Schema.TaggedError<InvalidAmount>()("InvalidAmount", fields) {}
export class DataHashMismatch extends Schema.TaggedError<DataHashMismatch>()("DataHashMismatch", fields) {}
export class AdapterNotAllowed extends Schema.TaggedError<AdapterNotAllowed>()("AdapterNotAllowed", fields) {}
export class InvalidTemplates extends Schema.TaggedError<InvalidTemplates>()("InvalidTemplates", fields) {}
export class InvalidSignature extends Schema.TaggedError<InvalidSignature>()("InvalidSignature", fields) {}
export class InsufficientAttestations extends Schema.TaggedError<InsufficientAttestations>()(
  "InsufficientAttestations",
  fields
) {}
export class Unsupported extends Schema.TaggedError<Unsupported>()("Unsupported", fields) {}
export class InvalidSession extends Schema.TaggedError<InvalidSession>()("InvalidSession", fields) {}
/** The user declined a login at the provider (the OAuth callback's `error=access_denied`). */
export class AccessDenied extends Schema.TaggedError<AccessDenied>()("AccessDenied", fields) {}
export class FeeTooLow extends Schema.TaggedError<FeeTooLow>()("FeeTooLow", fields) {}
export class PaymentRequired extends Schema.TaggedError<PaymentRequired>()("PaymentRequired", {
  message: Schema.String,
  /** Sent as `PAYMENT-REQUIRED` (base64 JSON, docs/protocol.md §10); the body does not repeat it. */
  challenge: Schema.optional(Schema.String)
}) {}
export class PaymentFailed extends Schema.TaggedError<PaymentFailed>()("PaymentFailed", fields) {}
export class RecipientDenied extends Schema.TaggedError<RecipientDenied>()("RecipientDenied", fields) {}
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", fields) {}
export class NonceMismatch extends Schema.TaggedError<NonceMismatch>()("NonceMismatch", fields) {}
export class BindState extends Schema.TaggedError<BindState>()("BindState", fields) {}
export class SimulationFailed extends Schema.TaggedError<SimulationFailed>()("SimulationFailed", fields) {}
export class GasCapExceeded extends Schema.TaggedError<GasCapExceeded>()("GasCapExceeded", fields) {}
export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", {
  message: Schema.String,
  /** Sent as `Retry-After`. */
  retryAfterSeconds: Schema.Number
}) {}
export class MethodNotAllowed extends Schema.TaggedError<MethodNotAllowed>()("MethodNotAllowed", {
  message: Schema.String,
  /** Sent as `Allow`. */
  allow: Schema.Array(Schema.String)
}) {}
export class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", fields) {}
export class Internal extends Schema.TaggedError<Internal>()("Internal", fields) {}

export type ApiError =
  | BadRequest
  | PayloadTooLarge
  | UnsupportedMediaType
  | DeadlineTooSoon
  | RelayerMismatch
  | InvalidAmount
  | DataHashMismatch
  | AdapterNotAllowed
  | InvalidTemplates
  | InvalidSignature
  | InsufficientAttestations
  | Unsupported
  | InvalidSession
  | AccessDenied
  | FeeTooLow
  | PaymentRequired
  | PaymentFailed
  | RecipientDenied
  | NotFound
  | NonceMismatch
  | BindState
  | SimulationFailed
  | GasCapExceeded
  | RateLimited
  | MethodNotAllowed
  | Unavailable
  | Internal

/** docs/protocol.md §7, one row per error. */
export const errorCatalog = {
  BadRequest: { status: 400, code: "bad_request" },
  PayloadTooLarge: { status: 413, code: "bad_request" },
  UnsupportedMediaType: { status: 415, code: "bad_request" },
  DeadlineTooSoon: { status: 400, code: "deadline_too_soon" },
  RelayerMismatch: { status: 400, code: "relayer_mismatch" },
  InvalidAmount: { status: 400, code: "invalid_amount" },
  DataHashMismatch: { status: 400, code: "data_hash_mismatch" },
  AdapterNotAllowed: { status: 400, code: "adapter_not_allowed" },
  InvalidTemplates: { status: 400, code: "invalid_templates" },
  InvalidSignature: { status: 400, code: "invalid_signature" },
  InsufficientAttestations: { status: 400, code: "insufficient_attestations" },
  Unsupported: { status: 400, code: "unsupported" },
  InvalidSession: { status: 401, code: "invalid_session" },
  AccessDenied: { status: 401, code: "access_denied" },
  FeeTooLow: { status: 402, code: "fee_too_low" },
  PaymentRequired: { status: 402, code: "payment_required" },
  PaymentFailed: { status: 402, code: "payment_failed" },
  RecipientDenied: { status: 403, code: "recipient_denied" },
  NotFound: { status: 404, code: "not_found" },
  NonceMismatch: { status: 409, code: "nonce_mismatch" },
  BindState: { status: 409, code: "bind_state" },
  SimulationFailed: { status: 422, code: "simulation_failed" },
  GasCapExceeded: { status: 422, code: "gas_cap_exceeded" },
  RateLimited: { status: 429, code: "rate_limited" },
  MethodNotAllowed: { status: 405, code: "method_not_allowed" },
  Unavailable: { status: 503, code: "unavailable" },
  Internal: { status: 500, code: "internal" }
} as const satisfies Record<ApiError["_tag"], { readonly status: number; readonly code: string }>

export type ErrorCode = (typeof errorCatalog)[keyof typeof errorCatalog]["code"]

const apiErrorTags = new Set<string>(Object.keys(errorCatalog))

export const isApiError = (u: unknown): u is ApiError =>
  typeof u === "object" && u !== null && "_tag" in u && apiErrorTags.has((u as { _tag: string })._tag)

type ApiErrorClass<E extends ApiError> = Schema.Schema<
  E,
  { readonly _tag: E["_tag"]; readonly message: string }
> & {
  new (args: { readonly message: string }): E
  readonly _tag: E["_tag"]
}

/**
 * The wire form `{ error, code }` of one error class, annotated with its status: what an endpoint
 * declares, so the OpenAPI document and the typed client see the body clients really get.
 */
export const wireError = <E extends Exclude<ApiError, RateLimited | MethodNotAllowed>>(
  errorClass: ApiErrorClass<E>
) => {
  const tag: E["_tag"] = errorClass._tag
  const { status, code } = errorCatalog[tag]
  return Schema.transform(
    Schema.Struct({ error: Schema.String, code: Schema.Literal(code) }),
    Schema.typeSchema(errorClass),
    {
      strict: true,
      decode: ({ error }) => new errorClass({ message: error }),
      encode: (e) => ({ error: e.message, code })
    }
  ).annotations(HttpApiSchema.annotations({ status, identifier: tag }))
}

/** The wire schema of every error, for endpoint declarations. */
export const Wire = {
  BadRequest: wireError(BadRequest),
  PayloadTooLarge: wireError(PayloadTooLarge),
  UnsupportedMediaType: wireError(UnsupportedMediaType),
  DeadlineTooSoon: wireError(DeadlineTooSoon),
  RelayerMismatch: wireError(RelayerMismatch),
  InvalidAmount: wireError(InvalidAmount),
  DataHashMismatch: wireError(DataHashMismatch),
  AdapterNotAllowed: wireError(AdapterNotAllowed),
  InvalidTemplates: wireError(InvalidTemplates),
  InvalidSignature: wireError(InvalidSignature),
  InsufficientAttestations: wireError(InsufficientAttestations),
  Unsupported: wireError(Unsupported),
  InvalidSession: wireError(InvalidSession),
  AccessDenied: wireError(AccessDenied),
  FeeTooLow: wireError(FeeTooLow),
  PaymentRequired: wireError(PaymentRequired),
  PaymentFailed: wireError(PaymentFailed),
  RecipientDenied: wireError(RecipientDenied),
  NotFound: wireError(NotFound),
  NonceMismatch: wireError(NonceMismatch),
  BindState: wireError(BindState),
  SimulationFailed: wireError(SimulationFailed),
  GasCapExceeded: wireError(GasCapExceeded),
  RateLimited: Schema.transform(
    Schema.Struct({ error: Schema.String, code: Schema.Literal("rate_limited") }),
    Schema.typeSchema(RateLimited),
    {
      strict: true,
      // The delay travels in `Retry-After`; the body does not repeat it.
      decode: ({ error }) => new RateLimited({ message: error, retryAfterSeconds: 0 }),
      encode: (e) => ({ error: e.message, code: "rate_limited" as const })
    }
  ).annotations(HttpApiSchema.annotations({ status: 429, identifier: "RateLimited" })),
  Unavailable: wireError(Unavailable),
  Internal: wireError(Internal)
} as const
