/**
 * A paid handle lookup (docs/attestor.md §3 payment states, §4 "Paid handle lookup flow";
 * docs/protocol.md §10 "Paid lookups"), in order:
 *
 * 1. no `PAYMENT-SIGNATURE`: 402 `payment_required` with the `PAYMENT-REQUIRED` challenge;
 * 2. the signature must accept exactly the quoted requirements, and its Permit2 authorization pay
 *    the quoted token and amount to the quoted spender and payee, with a deadline not passed and no
 *    later than `maxTimeoutSeconds` from now, signed by its payer `from` (its ECDSA signature,
 *    recovered here); else 402 `payment_failed`, nothing held or leased, nobody asked;
 * 3. the payer's one in-flight lease is taken (another payment of the payer under way: 429
 *    `rate_limited`, this authorization untouched, nobody asked), so many authorizations backed by
 *    one balance buy one directory lookup at a time; it is given back when the flow ends;
 * 4. the authorization (payer, Permit2 nonce) is held in the database, so it buys one attempt:
 *    presented before, settled or not, it is 402 `payment_failed`;
 * 5. the facilitator verifies it (refused: 402 `payment_failed`; not answering: 503 `unavailable`);
 * 6. the handle is resolved: not found is 404 `not_found` and nothing is settled (the authorization
 *    is spent); a directory that cannot say is 503;
 * 7. only then the facilitator settles: success is the user id and the `PAYMENT-RESPONSE`; a
 *    refusal 402 `payment_failed`; no answer is recorded `indeterminate` and never settled again
 *    (503 `unavailable`).
 *
 * The facilitator is asked about the payment only: never the handle or the platform. What it is
 * sent is rebuilt from the quote and the Permit2 authorization alone, so nothing else a client put
 * in its `PAYMENT-SIGNATURE` (its `resource`, its extensions) is forwarded.
 */
import type { FacilitatorClient } from "@x402/core/http"
import { type PaymentPayload, type PaymentRequirements, SettleError, VerifyError } from "@x402/core/types"
import { Effect, Either, Metric } from "effect"
import type { LookupPlatform } from "../../../../schema/attestor.js"
import {
  type NotFound,
  PaymentFailed,
  PaymentRequired,
  RateLimited,
  Unavailable,
  type Unsupported
} from "../../../../schema/errors.js"
import { nowSeconds } from "../../../clock.js"
import { lookupPayment } from "../../metrics.js"
import type { AuthorizationId, PaymentStoreShape } from "./PaymentStore.js"
import { FACILITATOR_UNAVAILABLE } from "./paymentQuote.js"
import {
  lookupResource,
  PAYMENT_CLOCK_SKEW_SECONDS,
  type PaymentRefusal,
  payerSigned,
  paymentRequiredHeader,
  paymentResponseHeader,
  readPaymentSignature,
  X402_VERSION
} from "./x402.js"

export interface PaidLookupConfig {
  /** The quote: 503 `unavailable` while the facilitator's terms cannot be read. */
  readonly requirements: Effect.Effect<PaymentRequirements, Unavailable>
  readonly publicUrl: string
  readonly facilitator: FacilitatorClient
  readonly store: PaymentStoreShape
  /** The handle's user id, or why not: the same resolution free lookups use (`resolveHandle`). */
  readonly resolve: (
    platform: LookupPlatform,
    handle: string
  ) => Effect.Effect<string, NotFound | Unavailable | Unsupported>
}

export type PaidLookupError =
  | PaymentRequired
  | PaymentFailed
  | RateLimited
  | NotFound
  | Unavailable
  | Unsupported

export interface PaidLookupResult {
  readonly userId: string
  /** The `PAYMENT-RESPONSE` header of the answer. */
  readonly paymentResponse: string
}

const VERIFY_REFUSED = "the payment facilitator refused the payment"
const SETTLE_REFUSED = "the payment could not be settled"

/** What a client is told of a payment refused before anyone is asked about it. */
const refusalMessage: Record<PaymentRefusal, string> = {
  malformed: "PAYMENT-SIGNATURE is not an x402 version 2 payment",
  version: "PAYMENT-SIGNATURE is not an x402 version 2 payment",
  requirements: "the payment does not accept the quoted requirements",
  authorization:
    "the payment authorization does not pay the quoted token and amount to the quoted spender and payee",
  deadline: "the payment authorization's deadline is later than the quote's maxTimeoutSeconds allows",
  expired: "the payment authorization's deadline has passed",
  signature:
    "the payment authorization is not signed by its payer (from): sign it with that account's own key; contract wallets cannot pay"
}

const refusedHere = (refusal: PaymentRefusal) => new PaymentFailed({ message: refusalMessage[refusal] })

/** A second payment of a payer while one is in flight; the client sends it again shortly. */
const IN_FLIGHT = "another payment of this payer is in flight: send this one again when it has ended"
const IN_FLIGHT_RETRY_SECONDS = 1

/**
 * A call to the facilitator: one that answers with a verdict (`refusal`, the library's error for
 * it) has refused the payment; anything else is an outage.
 */
const askFacilitator = <A>(
  call: () => Promise<A>,
  refusal: typeof VerifyError | typeof SettleError,
  refused: string
): Effect.Effect<A, PaymentFailed | Unavailable> =>
  Effect.tryPromise({
    try: call,
    catch: (error) =>
      error instanceof refusal
        ? new PaymentFailed({ message: refused })
        : new Unavailable({ message: FACILITATOR_UNAVAILABLE })
  })

/** Steps 4 to 7 of a payment that passed the checks, under its payer's lease. */
const pay = (
  config: PaidLookupConfig,
  requirements: PaymentRequirements,
  authorization: AuthorizationId,
  deadline: bigint,
  payload: PaymentPayload,
  platform: LookupPlatform,
  handle: string
): Effect.Effect<PaidLookupResult, PaymentFailed | NotFound | Unavailable | Unsupported> =>
  Effect.gen(function* () {
    const { facilitator, store } = config
    const held = yield* store.hold(authorization, {
      network: requirements.network,
      asset: requirements.asset as `0x${string}`,
      amount: BigInt(requirements.amount),
      deadline
    })
    if (!held)
      return yield* Effect.fail(
        new PaymentFailed({ message: "this payment authorization was presented before" })
      ).pipe(Effect.tapError(() => Metric.increment(lookupPayment({ outcome: "reused" }))))
    const recorded = (state: "settled" | "failed" | "indeterminate", transaction?: string) =>
      store
        .mark(authorization, state, transaction)
        .pipe(Effect.zipRight(Metric.increment(lookupPayment({ outcome: state }))))
    const spent = (state: "failed" | "indeterminate") =>
      state === "failed"
        ? recorded(state)
        : Effect.zipRight(
            // Nothing of the payer: an operator checks the payments table for indeterminate rows.
            Effect.logWarning(
              "a lookup payment's settlement got no answer from the facilitator: recorded indeterminate, never settled again"
            ),
            recorded(state)
          )

    const verified = yield* askFacilitator(
      () => facilitator.verify(payload, requirements),
      VerifyError,
      VERIFY_REFUSED
    ).pipe(Effect.tapError(() => spent("failed")))
    if (!verified.isValid) {
      yield* spent("failed")
      return yield* Effect.fail(new PaymentFailed({ message: VERIFY_REFUSED }))
    }
    yield* store.mark(authorization, "authorized")

    // Not found, or a directory that cannot say: nothing is settled, the authorization is spent.
    const userId = yield* config.resolve(platform, handle).pipe(Effect.tapError(() => spent("failed")))

    // The settlement and its record are one step a client hanging up cannot cut in two: the
    // money may move once asked, so what happened is written down whatever the client does.
    const settled = yield* Effect.uninterruptible(
      Effect.gen(function* () {
        const answer = yield* askFacilitator(
          () => facilitator.settle(payload, requirements),
          SettleError,
          SETTLE_REFUSED
        ).pipe(
          // A refusal is final; without an answer the facilitator may have settled: never again.
          Effect.tapError((error) => spent(error._tag === "PaymentFailed" ? "failed" : "indeterminate"))
        )
        if (!answer.success) {
          yield* spent("failed")
          return yield* Effect.fail(new PaymentFailed({ message: SETTLE_REFUSED }))
        }
        // Paid: the answer is owed even when the record fails (the row stays `authorized`).
        yield* recorded("settled", answer.transaction).pipe(
          Effect.catchAll(() =>
            Effect.logWarning("a settled lookup payment could not be recorded; its row stays authorized")
          )
        )
        return answer
      })
    )
    return { userId, paymentResponse: paymentResponseHeader(settled) }
  })

export const paidLookup =
  (config: PaidLookupConfig) =>
  (
    platform: LookupPlatform,
    handle: string,
    paymentSignature: string | undefined
  ): Effect.Effect<PaidLookupResult, PaidLookupError> =>
    Effect.gen(function* () {
      const { store } = config
      const requirements = yield* config.requirements
      if (paymentSignature === undefined)
        return yield* Effect.fail(
          new PaymentRequired({
            message: "this lookup is paid: sign the quoted payment and send it as PAYMENT-SIGNATURE",
            challenge: paymentRequiredHeader(requirements, config.publicUrl)
          })
        )
      const now = yield* nowSeconds
      const presented = readPaymentSignature(paymentSignature, requirements, now)
      if (Either.isLeft(presented)) return yield* Effect.fail(refusedHere(presented.left))
      // Before any lease, row or facilitator call: a payer is only ever the one who signed.
      yield* Effect.mapError(payerSigned(presented.right, requirements), refusedHere)
      const { authorization, deadline } = presented.right
      const payload: PaymentPayload = {
        x402Version: X402_VERSION,
        resource: lookupResource(config.publicUrl),
        accepted: requirements,
        payload: presented.right.signed
      }
      // The lease lasts as long as the authorization may (its deadline was checked against that),
      // so a holder that stopped blocks its payer no longer.
      return yield* Effect.acquireUseRelease(
        store.lease(authorization, now + requirements.maxTimeoutSeconds + PAYMENT_CLOCK_SKEW_SECONDS),
        (leased): Effect.Effect<PaidLookupResult, PaidLookupError> =>
          leased
            ? pay(config, requirements, authorization, deadline, payload, platform, handle)
            : Effect.zipRight(
                Metric.increment(lookupPayment({ outcome: "in_flight" })),
                Effect.fail(
                  new RateLimited({ message: IN_FLIGHT, retryAfterSeconds: IN_FLIGHT_RETRY_SECONDS })
                )
              ),
        (leased) =>
          leased
            ? store
                .release(authorization)
                .pipe(
                  Effect.catchAll(() =>
                    Effect.logWarning(
                      "a lookup payment's in-flight lease could not be given back: it lapses after maxTimeoutSeconds"
                    )
                  )
                )
            : Effect.void
      )
    })
