/**
 * A paid handle lookup (docs/attestor.md §3 payment states, §4 "Paid handle lookup flow";
 * docs/protocol.md §10 "Paid lookups"), in order:
 *
 * 1. no `PAYMENT-SIGNATURE`: 402 `payment_required` with the `PAYMENT-REQUIRED` challenge (which
 *    offers x402's `payment-identifier` extension);
 * 2. the signature must accept exactly the quoted requirements, and its Permit2 authorization pay
 *    the quoted token and amount to the quoted spender and payee, with a deadline no later than
 *    `maxTimeoutSeconds` from now, signed by its payer `from` (its ECDSA signature, recovered here),
 *    and name a well-formed `payment-identifier` id if any; else 402 `payment_failed`, nothing held
 *    or leased, nobody asked;
 * 3. replay: an authorization whose lookup was answered before is given that answer again, and its
 *    `PAYMENT-RESPONSE`, when it shows the `payment-identifier` id it was paid with (the payer's
 *    secret: anyone can rebuild the authorization from the chain) and asks for the same request
 *    (route and body); nothing is settled again. Otherwise it is 402 `payment_failed`, alike. An
 *    answer kept before a settlement whose outcome never came back (a restart, a cut connection)
 *    is finished first, under the payer's lease: the chain says whether it was paid
 *    (settlementOnChain.ts), else the facilitator settles it now. Only then a passed deadline is
 *    refused, and a `payment-identifier` id the payer used for another authorization (402
 *    `payment_failed`);
 * 4. the payer's one in-flight lease is taken (another payment of the payer under way: 429
 *    `rate_limited`, this authorization untouched, nobody asked), so many authorizations backed by
 *    one balance buy one directory lookup at a time; it is given back when the flow ends;
 * 5. the authorization (payer, Permit2 nonce) is held in the database, so it buys one attempt;
 * 6. the facilitator verifies it (refused: 402 `payment_failed`; not answering: 503 `unavailable`);
 * 7. the handle is resolved: not found is 404 `not_found`, kept for replay, and nothing is settled
 *    (the authorization is spent); a directory that cannot say is 503;
 * 8. the answer is made, then kept with the payment (PaymentStore `keepAnswer`), settled and
 *    recorded in one uninterruptible step: success is the answer and the `PAYMENT-RESPONSE`, kept
 *    too; anything else is checked on chain (paid: the answer); a refusal is 402
 *    `payment_failed`; no answer, or a refusal naming a transaction or `settlement_pending`, is
 *    recorded `indeterminate` (503 `unavailable`), and the same payment asking again finds out
 *    from the chain (step 3).
 *
 * The facilitator is asked about the payment only: never the handle or the platform. What it is
 * sent is rebuilt from the quote and the Permit2 authorization alone, so nothing else a client put
 * in its `PAYMENT-SIGNATURE` (its `resource`, its extensions) is forwarded.
 */
import { createHash, timingSafeEqual } from "node:crypto"
import type { FacilitatorClient } from "@x402/core/http"
import {
  type PaymentPayload,
  type PaymentRequirements,
  SettleError,
  type SettleResponse,
  VerifyError
} from "@x402/core/types"
import { Effect, Either, Metric, Option } from "effect"
import type { Hex } from "viem"
import type { LookupPlatform } from "../../../../schema/attestor.js"
import {
  NotFound,
  PaymentFailed,
  PaymentRequired,
  RateLimited,
  Unavailable,
  type Unsupported
} from "../../../../schema/errors.js"
import { nowSeconds } from "../../../clock.js"
import type { LookupAnswer, WithPayment } from "../../commitments/commitmentRules.js"
import { lookupPayment } from "../../metrics.js"
import type { PaidAnswer, PaymentStoreShape } from "./PaymentStore.js"
import { FACILITATOR_UNAVAILABLE } from "./paymentQuote.js"
import { paidOnChain, type SettlementChain } from "./settlementOnChain.js"
import {
  lookupResource,
  PAYMENT_CLOCK_SKEW_SECONDS,
  type PaymentRefusal,
  type PresentedPayment,
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
  /** Where a settlement whose answer was lost is found. */
  readonly chain: SettlementChain
}

export type PaidLookupError =
  | PaymentRequired
  | PaymentFailed
  | RateLimited
  | NotFound
  | Unavailable
  | Unsupported

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
    "the payment authorization is not signed by its payer (from): sign it with that account's own key; contract wallets cannot pay",
  payment_id: "the payment-identifier id must be 16 to 128 letters, digits, hyphens or underscores"
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

const PRESENTED_BEFORE = "this payment authorization was presented before"
const PAYMENT_ID_TAKEN = "this payment-identifier id names another payment of this payer"
const ANSWER_UNREADABLE = "the answer kept for this payment cannot be read: try again later"

/** JSON with every object's keys in order, so one request always reads the same. */
const canonicalJson = (value: unknown): string =>
  JSON.stringify(value, (_, v) =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(
          Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        )
      : v
  )

/** Which request an answer answers: its route and decoded body, hashed. */
export const requestDigest = (request: LookupAnswer<unknown>["request"]): string =>
  createHash("sha256")
    .update(`${request.route}\n${canonicalJson(request.body)}`)
    .digest("hex")

/**
 * What is kept of a `payment-identifier` id: its hash, salted with the payer so that one payer's
 * ids say nothing of another's. The id is the payer's secret for replays (docs/attestor.md §4).
 */
export const paymentIdHash = (payer: string, paymentId: string): string =>
  createHash("sha256").update(`x402 payment-identifier\n${payer.toLowerCase()}\n${paymentId}`).digest("hex")

/** A payment that passed the checks of step 2, and what the facilitator is sent of it. */
interface Presented {
  readonly config: PaidLookupConfig
  readonly requirements: PaymentRequirements
  readonly presented: PresentedPayment
  readonly payload: PaymentPayload
}

const recorded = (
  p: Presented,
  state: "settled" | "failed" | "indeterminate",
  transaction?: string,
  checkedOnChain = false
) =>
  p.config.store
    .mark(p.presented.authorization, state, transaction, checkedOnChain)
    .pipe(Effect.zipRight(Metric.increment(lookupPayment({ outcome: state }))))

const spent = (p: Presented, state: "failed" | "indeterminate", checkedOnChain = false) =>
  state === "failed"
    ? recorded(p, state, undefined, checkedOnChain)
    : Effect.zipRight(
        // Nothing of the payer: an operator checks the payments table for indeterminate rows.
        Effect.logWarning(
          "a lookup payment's settlement got no answer from the facilitator: recorded indeterminate, looked for on chain when it is presented again"
        ),
        recorded(p, state)
      )

/**
 * What the facilitator's settle said: settled; refused; or indeterminate: no answer, or a refusal
 * naming a transaction or `settlement_pending` (the stock `@x402/evm` facilitator's answer when
 * it broadcast the settlement but its receipt did not come), which the chain may yet mine.
 */
type SettleVerdict =
  | { readonly _tag: "settled"; readonly response: SettleResponse }
  | { readonly _tag: "refused" | "indeterminate" }

const SETTLEMENT_PENDING = "settlement_pending"

const refusalVerdict = (refusal: {
  readonly errorReason?: string
  readonly transaction?: string
}): SettleVerdict =>
  refusal.errorReason === SETTLEMENT_PENDING || (refusal.transaction ?? "") !== ""
    ? { _tag: "indeterminate" }
    : { _tag: "refused" }

const settleVerdict = (p: Presented): Effect.Effect<SettleVerdict> =>
  Effect.tryPromise(() => p.config.facilitator.settle(p.payload, p.requirements)).pipe(
    Effect.map(
      (answer): SettleVerdict =>
        answer.success ? { _tag: "settled", response: answer } : refusalVerdict(answer)
    ),
    Effect.catchAll((error) =>
      Effect.succeed(
        error.error instanceof SettleError
          ? refusalVerdict(error.error)
          : ({ _tag: "indeterminate" } as const)
      )
    )
  )

/** The `PAYMENT-RESPONSE` of a settlement, kept with the answer for replays. */
const keptResponse = (p: Presented, settled: SettleResponse): Effect.Effect<string> => {
  const header = paymentResponseHeader(settled)
  return p.config.store.answerSettled(p.presented.authorization, header).pipe(
    Effect.catchAll(() =>
      Effect.logWarning(
        "a settled lookup payment's response could not be kept; a replay finds the settlement on chain"
      )
    ),
    Effect.as(header)
  )
}

/** A settlement the facilitator confirmed, recorded (the answer is owed even when the record fails). */
const settledHere = (p: Presented, settled: SettleResponse, transaction?: string) =>
  recorded(p, "settled", transaction ?? settled.transaction).pipe(
    Effect.catchAll(() =>
      Effect.logWarning("a settled lookup payment could not be recorded; its row stays as it was")
    ),
    Effect.zipRight(keptResponse(p, settled))
  )

/** A settlement the chain shows (its answer was lost): recorded settled, as the facilitator says it. */
const settledOnChain = (p: Presented, transaction: Hex) =>
  settledHere(
    p,
    {
      success: true,
      transaction,
      network: p.requirements.network as SettleResponse["network"],
      payer: p.presented.authorization.payer
    },
    transaction
  )

/**
 * A nonce spent without a settlement of this authorization (its payer cancelled it): not paid,
 * recorded failed (docs/attestor.md §4, replay).
 */
const cancelledOnChain = (p: Presented) =>
  Effect.logWarning(
    "a lookup payment's Permit2 nonce is spent without a matching settlement: not paid, recorded failed"
  ).pipe(
    Effect.zipRight(recorded(p, "failed", undefined, true)),
    Effect.zipRight(Effect.fail(new PaymentFailed({ message: SETTLE_REFUSED })))
  )

/**
 * The chain's word on a settlement the facilitator did not confirm (`verdict`): paid, the answer;
 * spent without payment, or refused and unspent, 402 `payment_failed`; indeterminate and unspent,
 * 503 `unavailable` (the same payment asking again checks once more).
 */
const settlementFromChain = (
  p: Presented,
  fromBlock: bigint,
  verdict: "refused" | "indeterminate"
): Effect.Effect<string, PaymentFailed | Unavailable> =>
  Effect.gen(function* () {
    const onChain = yield* p.config.chain
      .settlementOf(p.presented, p.requirements, fromBlock)
      .pipe(Effect.tapError(() => spent(p, "indeterminate")))
    const paid = paidOnChain(onChain)
    if (Option.isSome(paid)) return yield* settledOnChain(p, paid.value)
    if (onChain.spent) return yield* cancelledOnChain(p)
    if (verdict === "refused") {
      yield* recorded(p, "failed", undefined, true)
      return yield* Effect.fail(new PaymentFailed({ message: SETTLE_REFUSED }))
    }
    yield* spent(p, "indeterminate")
    return yield* Effect.fail(new Unavailable({ message: FACILITATOR_UNAVAILABLE }))
  })

/** The facilitator settles a verified payment; what it did not confirm is checked on chain. */
const settle = (p: Presented, fromBlock: bigint): Effect.Effect<string, PaymentFailed | Unavailable> =>
  Effect.flatMap(settleVerdict(p), (verdict) =>
    verdict._tag === "settled"
      ? settledHere(p, verdict.response)
      : settlementFromChain(p, fromBlock, verdict._tag)
  )

/**
 * Finishes the settlement of a kept answer whose `PAYMENT-RESPONSE` never came (step 3), under the
 * payer's lease (so no second settle runs beside one under way): settled on chain, it was paid;
 * spent without a settlement, not paid; not spent, a payment refused before or past its deadline
 * is refused, else the facilitator settles it now. Spendable once on chain, it is never paid twice.
 */
const finishSettlement = (
  p: Presented,
  kept: PaidAnswer
): Effect.Effect<string, PaymentFailed | Unavailable> =>
  Effect.gen(function* () {
    const { store, chain } = p.config
    const payment = yield* store.get(p.presented.authorization)
    const onChain = yield* chain.settlementOf(p.presented, p.requirements, kept.fromBlock)
    const paid = paidOnChain(onChain)
    if (Option.isSome(paid)) return yield* settledOnChain(p, paid.value)
    if (onChain.spent) return yield* cancelledOnChain(p)
    if (Option.isSome(payment) && payment.value.state === "failed")
      return yield* Effect.fail(new PaymentFailed({ message: SETTLE_REFUSED }))
    if (p.presented.expired) {
      yield* recorded(p, "failed", undefined, true)
      return yield* Effect.fail(refusedHere("expired"))
    }
    return yield* settle(p, kept.fromBlock)
  })

/** Runs `use` under the payer's one in-flight lease; 429 `rate_limited` while another holds it. */
const underLease = <A, E>(
  p: Presented,
  now: number,
  use: Effect.Effect<A, E>
): Effect.Effect<A, E | RateLimited | Unavailable> => {
  const { store } = p.config
  const { authorization } = p.presented
  // The lease lasts as long as the authorization may (its deadline was checked against that),
  // so a holder that stopped blocks its payer no longer.
  return Effect.acquireUseRelease(
    store.lease(authorization, now + p.requirements.maxTimeoutSeconds + PAYMENT_CLOCK_SKEW_SECONDS),
    (leased): Effect.Effect<A, E | RateLimited> =>
      leased
        ? use
        : Effect.zipRight(
            Metric.increment(lookupPayment({ outcome: "in_flight" })),
            Effect.fail(new RateLimited({ message: IN_FLIGHT, retryAfterSeconds: IN_FLIGHT_RETRY_SECONDS }))
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
}

/**
 * The `PAYMENT-RESPONSE` of a kept answer whose settlement never reported back: read from the
 * chain when it shows the payment paid or cancelled (no lease needed: nothing is asked of the
 * facilitator, so an attestor that stopped mid-settlement delays no one); else finished under the
 * payer's lease, which a settlement still under way holds (429 `rate_limited` meanwhile).
 */
const settledOrFinished = (
  p: Presented,
  kept: PaidAnswer,
  now: number
): Effect.Effect<string, PaymentFailed | RateLimited | Unavailable> =>
  Effect.gen(function* () {
    const onChain = yield* p.config.chain.settlementOf(p.presented, p.requirements, kept.fromBlock)
    const paid = paidOnChain(onChain)
    if (Option.isSome(paid)) return yield* Effect.uninterruptible(settledOnChain(p, paid.value))
    if (onChain.spent) return yield* cancelledOnChain(p)
    return yield* underLease(p, now, Effect.uninterruptible(finishSettlement(p, kept)))
  })

/** Equal hex digests, compared in constant time (both are SHA-256 hex, so of one length). */
const sameDigest = (a: string, b: string): boolean => {
  const left = Buffer.from(a, "utf8")
  const right = Buffer.from(b, "utf8")
  return left.length === right.length && timingSafeEqual(left, right)
}

/**
 * Whether a kept answer is this presentation's to replay: the payer shows the `payment-identifier`
 * id it kept secret (never sent to the facilitator, never on chain), and asks the same request.
 * Anyone can rebuild a settled authorization from the chain, so the authorization alone is no proof
 * (docs/attestor.md §4, replay). Both are compared, in constant time, before either is looked at.
 */
const mayReplay = (p: Presented, kept: PaidAnswer, digest: string): boolean => {
  const { paymentId, authorization } = p.presented
  if (kept.paymentIdHash === undefined || paymentId === undefined) return false
  const sameId = sameDigest(kept.paymentIdHash, paymentIdHash(authorization.payer, paymentId))
  const sameRequest = sameDigest(kept.requestDigest, digest)
  return sameId && sameRequest
}

/** Step 3: the kept answer of an authorization, for its payer and the same request only. */
const replay = <A>(
  p: Presented,
  kept: PaidAnswer,
  digest: string,
  answer: LookupAnswer<A>,
  now: number
): Effect.Effect<WithPayment<A>, PaidLookupError> =>
  Effect.gen(function* () {
    if (!mayReplay(p, kept, digest)) {
      yield* Metric.increment(lookupPayment({ outcome: "reused" }))
      return yield* Effect.fail(new PaymentFailed({ message: PRESENTED_BEFORE }))
    }
    yield* Metric.increment(lookupPayment({ outcome: "replayed" }))
    if (kept.outcome === "not_found")
      return yield* Effect.fail(
        new NotFound({ message: kept.answer ?? "no user has this handle on this platform" })
      )
    const body = Either.fromNullable(kept.answer, () => "none").pipe(Either.flatMap(answer.decode))
    if (Either.isLeft(body)) return yield* Effect.fail(new Unavailable({ message: ANSWER_UNREADABLE }))
    const paymentResponse = kept.paymentResponse ?? (yield* settledOrFinished(p, kept, now))
    return { body: body.right, paymentResponse }
  })

/** Steps 5 to 8 of a payment seen for the first time, under its payer's lease. */
const pay = <A>(
  p: Presented,
  platform: LookupPlatform,
  handle: string,
  digest: string,
  answer: LookupAnswer<A>
): Effect.Effect<WithPayment<A>, PaymentFailed | NotFound | Unavailable | Unsupported> =>
  Effect.gen(function* () {
    const { facilitator, store, chain } = p.config
    const { authorization, deadline, paymentId } = p.presented
    // Read before anything is held: where a settlement whose answer is lost will be looked for.
    const fromBlock = yield* chain.blockNumber
    const held = yield* store.hold(authorization, {
      network: p.requirements.network,
      asset: p.requirements.asset as `0x${string}`,
      amount: BigInt(p.requirements.amount),
      deadline
    })
    if (!held)
      return yield* Effect.fail(new PaymentFailed({ message: PRESENTED_BEFORE })).pipe(
        Effect.tapError(() => Metric.increment(lookupPayment({ outcome: "reused" })))
      )

    const verified = yield* askFacilitator(
      () => facilitator.verify(p.payload, p.requirements),
      VerifyError,
      VERIFY_REFUSED
    ).pipe(Effect.tapError(() => spent(p, "failed")))
    if (!verified.isValid) {
      yield* spent(p, "failed")
      return yield* Effect.fail(new PaymentFailed({ message: VERIFY_REFUSED }))
    }
    yield* store.mark(authorization, "authorized")

    const keep = (kept: { readonly outcome: "answer" | "not_found"; readonly answer: string }) =>
      store.keepAnswer(authorization, {
        requestDigest: digest,
        paymentIdHash: paymentId === undefined ? undefined : paymentIdHash(authorization.payer, paymentId),
        fromBlock,
        ...kept
      })
    // Not found, or a directory that cannot say: nothing is settled, the authorization is spent.
    // Not found is kept: the same payment asking again is told the same.
    const userId = yield* p.config.resolve(platform, handle).pipe(
      Effect.tapError((error) =>
        error._tag === "NotFound"
          ? keep({ outcome: "not_found", answer: error.message }).pipe(Effect.ignore)
          : Effect.void
      ),
      Effect.tapError(() => spent(p, "failed"))
    )
    const body = yield* answer.make(userId).pipe(Effect.tapError(() => spent(p, "failed")))
    // The answer is kept before the money may move, so that no crash or cut connection after the
    // settlement can lose what was paid for; keeping, settling and recording are one step a client
    // hanging up cannot cut (a kept answer never waits unsettled for an interrupted fiber).
    const paymentResponse = yield* Effect.uninterruptible(
      keep({ outcome: "answer", answer: answer.encode(body) }).pipe(
        Effect.tapError(() => spent(p, "failed")),
        Effect.zipRight(settle(p, fromBlock))
      )
    )
    return { body, paymentResponse }
  })

export const paidLookup =
  (config: PaidLookupConfig) =>
  <A>(
    platform: LookupPlatform,
    handle: string,
    paymentSignature: string | undefined,
    answer: LookupAnswer<A>
  ): Effect.Effect<WithPayment<A>, PaidLookupError> =>
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
      const read = readPaymentSignature(paymentSignature, requirements, now)
      if (Either.isLeft(read)) return yield* Effect.fail(refusedHere(read.left))
      const presented = read.right
      // Before any lease, row or facilitator call: a payer is only ever the one who signed.
      yield* Effect.mapError(payerSigned(presented, requirements), refusedHere)
      const { authorization, paymentId } = presented
      const p: Presented = {
        config,
        requirements,
        presented,
        payload: {
          x402Version: X402_VERSION,
          resource: lookupResource(config.publicUrl),
          accepted: requirements,
          payload: presented.signed
        }
      }
      const digest = requestDigest(answer.request)
      const kept = yield* store.answerOf(authorization)
      if (Option.isSome(kept)) return yield* replay(p, kept.value, digest, answer, now)
      if (presented.expired) return yield* Effect.fail(refusedHere("expired"))
      if (
        paymentId !== undefined &&
        (yield* store.paymentIdTaken(authorization, paymentIdHash(authorization.payer, paymentId)))
      )
        return yield* Effect.fail(new PaymentFailed({ message: PAYMENT_ID_TAKEN }))
      return yield* underLease(p, now, pay(p, platform, handle, digest, answer))
    })
