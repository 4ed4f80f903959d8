/**
 * The `PAYMENT-RESPONSE` header of a paid lookup's 200 (docs/protocol.md §10 "Paid lookups"): set on the
 * answer of the request being handled, then the body goes out as the endpoint declares it.
 */
import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect } from "effect"
import type { WithPayment } from "../../commitments/commitmentRules.js"

export const answerWithPayment = <A, E, R>(
  answer: Effect.Effect<WithPayment<A>, E, R>
): Effect.Effect<A, E, R> =>
  Effect.flatMap(answer, ({ body, paymentResponse }) =>
    paymentResponse === undefined
      ? Effect.succeed(body)
      : Effect.as(
          HttpApp.appendPreResponseHandler((_, response) =>
            Effect.succeed(
              HttpServerResponse.setHeaders(response, {
                "payment-response": paymentResponse,
                // A paid answer is this payer's alone.
                "cache-control": "no-store"
              })
            )
          ),
          body
        )
  )
