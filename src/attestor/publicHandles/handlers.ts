/** The handler of `POST /v1/public-handle` (src/attestor/publicHandles/api.ts): the `PublicHandles` service. */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { AttestorApi } from "../api.js"
import { answerWithPayment } from "../lookups/payments/paymentResponseHeader.js"
import { PublicHandles } from "./PublicHandles.js"

export const AttestorPublicHandlesHandlers = HttpApiBuilder.group(AttestorApi, "publicHandles", (handlers) =>
  Effect.map(PublicHandles, (publicHandles) =>
    handlers.handle("publicHandle", ({ payload, headers }) =>
      answerWithPayment(publicHandles.issue(payload, headers["payment-signature"]))
    )
  )
)
