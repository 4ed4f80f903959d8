/**
 * The request header of a paid handle lookup (docs/attestor.md §4 "Paid handle lookup flow",
 * docs/protocol.md §10 "Paid lookups"): `PAYMENT-SIGNATURE`, base64 JSON of the x402 version 2 payment.
 * It is read as text here and decoded by the lookup, so a malformed one is 402 `payment_failed`
 * rather than a schema refusal. The answer's `PAYMENT-REQUIRED` (on a 402) and `PAYMENT-RESPONSE`
 * (on a paid 200) are set by the handlers and the renderer.
 */
import { Schema } from "effect"
import { Wire } from "../../../../schema/errors.js"

export const PaymentHeaders = Schema.Struct({
  "payment-signature": Schema.optional(
    Schema.String.annotations({
      description:
        "x402 version 2 payment for a handle lookup: base64 JSON of { x402Version: 2, accepted, payload } (docs/protocol.md §10)"
    })
  )
})

/** What a route that may look a handle up refuses, in the order the flow can refuse it. */
export const handleLookupRefusals = [
  Wire.BadRequest,
  Wire.Unsupported,
  Wire.PaymentRequired,
  Wire.PaymentFailed,
  Wire.NotFound,
  Wire.RateLimited,
  Wire.Unavailable
] as const
