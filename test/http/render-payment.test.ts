/**
 * How a 402 is rendered (docs/protocol.md §10 "Paid lookups"): `{ error, code }` with `Cache-Control:
 * no-store`, and for `payment_required` the challenge in `PAYMENT-REQUIRED`, never in the body.
 */
import { describe, expect, it } from "vitest"
import { PaymentFailed, PaymentRequired } from "../../schema/errors.js"
import { renderApiError } from "../../src/http/render.js"

describe("402 answers", () => {
  it("payment_required carries the challenge in PAYMENT-REQUIRED and is not cached", () => {
    const response = renderApiError(
      new PaymentRequired({ message: "pay first", challenge: "eyJ4NDAyVmVyc2lvbiI6Mn0=" })
    )
    expect(response.status).toBe(402)
    expect(response.headers["payment-required"]).toBe("eyJ4NDAyVmVyc2lvbiI6Mn0=")
    expect(response.headers["cache-control"]).toBe("no-store")
    const body = JSON.parse(new TextDecoder().decode((response.body as { body: Uint8Array }).body))
    expect(body).toEqual({ error: "pay first", code: "payment_required" })
  })

  it("payment_failed is not cached and carries no challenge", () => {
    const response = renderApiError(new PaymentFailed({ message: "refused" }))
    expect(response.status).toBe(402)
    expect(response.headers["cache-control"]).toBe("no-store")
    expect(response.headers["payment-required"]).toBeUndefined()
  })
})
