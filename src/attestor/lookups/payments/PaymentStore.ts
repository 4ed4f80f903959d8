/**
 * The durable record of handle-lookup payments (docs/attestor.md §3 payment states, §4 "Paid
 * handle lookup flow"; migration 0026). An authorization is held (`unpaid`) before the facilitator
 * is asked to verify it, so it buys one attempt only: a second presentation, settled or not, finds
 * the row and is refused. Then it is `authorized` (verified), and `settled` or `failed`; a settle
 * whose answer never came is `indeterminate` and is never settled again.
 *
 * A payer has at most one payment in flight (migration 0029): a lease on the payer, taken before
 * the authorization is held and given back when its flow ends. A lease whose holder stopped lapses
 * at the time it was taken for (the quote's `maxTimeoutSeconds`), so a crash blocks no payer for
 * longer; taking the lease is one statement, so replicas on one database decide it together.
 *
 * Rows are pruned in passing (src/store/expiringRows.ts; migration 0032), a retention after the
 * authorization's Permit2 deadline: an authorization past its deadline is refused before its row is
 * looked at (x402.ts `readPaymentSignature`), so a pruned one still buys nothing again. Rows of
 * payments that may have moved money (`authorized`, `settled`, `indeterminate`) stay
 * `retentionSeconds` (`HANDLE_LOOKUP_PAYMENT_RETENTION_DAYS`, 30 days by default) for the
 * operator's accounting; the others (`unpaid`, `failed`) a day (docs/operations.md).
 *
 * The answer of a paid lookup is kept with its payment (`attestor_paid_answers`, migration 0035):
 * written before the settlement is asked for, completed with the `PAYMENT-RESPONSE` once it
 * settled, and given again to the same payment for the same request, to the payer who shows its
 * `payment-identifier` id (kept hashed in `payment_id`; docs/attestor.md §4, replay).
 * It is as private as the lookup: kept `answerRetentionSeconds` (`HANDLE_LOOKUP_ANSWER_RETENTION_SECONDS`,
 * a day by default) and pruned in passing with the payments.
 *
 * Nothing of the payer, the authorization or an answer reaches a log line or a metric.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Context, Effect, Layer, Option } from "effect"
import type { Address } from "viem"
import { Unavailable } from "../../../../schema/errors.js"
import { atMostEvery } from "../../../background/throttle.js"
import { nowSeconds } from "../../../clock.js"
import { deleteExpired } from "../../../store/expiringRows.js"
import { stubLayer } from "../../../stubLayer.js"

export type PaymentState = "unpaid" | "authorized" | "settled" | "failed" | "indeterminate"

/** Which authorization: its payer and Permit2 nonce (each nonce is spendable once on chain too). */
export interface AuthorizationId {
  readonly payer: Address
  readonly nonce: bigint
}

export interface PaymentTerms {
  readonly network: string
  readonly asset: Address
  readonly amount: bigint
  /** The authorization's Permit2 deadline (unix seconds): its row's retention counts from it. */
  readonly deadline: bigint
}

export interface PaymentStoreConfig {
  /** How long after its deadline a row of a payment that may have moved money is kept. Default 30 days. */
  readonly retentionSeconds?: number
  /** Least time between two prunings. Default 60 s. */
  readonly pruneIntervalSeconds?: number
  /** How long a paid lookup's answer can be replayed, from when it was made. Default a day. */
  readonly answerRetentionSeconds?: number
}

export const DEFAULT_ANSWER_RETENTION_SECONDS = 86_400

/** A paid lookup's answer as kept: the answer's JSON text, or `not_found` (nothing settled). */
export interface PaidAnswer {
  /** Which request it answers (`requestDigest` of paidLookup.ts). */
  readonly requestDigest: string
  /**
   * The hash of the x402 `payment-identifier` id of the payment (`paymentIdHash` of paidLookup.ts),
   * when its payer chose one: the secret a replay must show (docs/attestor.md §4, replay). The id
   * itself is never kept.
   */
  readonly paymentIdHash: string | undefined
  readonly outcome: "answer" | "not_found"
  readonly answer: string | undefined
  /** The `PAYMENT-RESPONSE` of the settlement, once it settled. */
  readonly paymentResponse: string | undefined
  /** The chain's block before the settlement was asked for. */
  readonly fromBlock: bigint
}

const DAY_SECONDS = 86_400
export const DEFAULT_PAYMENT_RETENTION_SECONDS = 30 * DAY_SECONDS
/** How long after its deadline the row of a payment that moved nothing (`unpaid`, `failed`) is kept. */
export const SPENT_PAYMENT_RETENTION_SECONDS = DAY_SECONDS

export interface StoredPayment {
  readonly state: PaymentState
  readonly transaction: string | undefined
}

export interface PaymentStoreShape {
  /** Holds an authorization seen for the first time (`unpaid`); false when it was presented before. */
  readonly hold: (id: AuthorizationId, terms: PaymentTerms) => Effect.Effect<boolean, Unavailable>
  /**
   * Moves a held authorization on, one way only (`movesFrom`): nothing leaves `settled`, and an
   * `indeterminate` payment becomes `failed` only when `checkedOnChain` (the chain shows it unpaid).
   */
  readonly mark: (
    id: AuthorizationId,
    state: Exclude<PaymentState, "unpaid">,
    transaction?: string,
    checkedOnChain?: boolean
  ) => Effect.Effect<void, Unavailable>
  readonly get: (id: AuthorizationId) => Effect.Effect<Option.Option<StoredPayment>, Unavailable>
  /**
   * Takes the payer's one in-flight lease for the authorization `id` until `until` (unix seconds);
   * false while another lease of the payer runs.
   */
  readonly lease: (id: AuthorizationId, until: number) => Effect.Effect<boolean, Unavailable>
  /** Gives back the lease `id` holds (nothing when it lapsed and another took it), and drops lapsed ones. */
  readonly release: (id: AuthorizationId) => Effect.Effect<void, Unavailable>
  /** Keeps the answer of the lookup `id` paid for (before its settlement; see the module header). */
  readonly keepAnswer: (
    id: AuthorizationId,
    answer: Omit<PaidAnswer, "paymentResponse">
  ) => Effect.Effect<void, Unavailable>
  /** Adds the `PAYMENT-RESPONSE` of its settlement to a kept answer. */
  readonly answerSettled: (id: AuthorizationId, paymentResponse: string) => Effect.Effect<void, Unavailable>
  /** The answer kept for `id`, within its retention. */
  readonly answerOf: (id: AuthorizationId) => Effect.Effect<Option.Option<PaidAnswer>, Unavailable>
  /** Whether the payer's `payment-identifier` (its hash) names a kept answer of another authorization than `id`. */
  readonly paymentIdTaken: (id: AuthorizationId, paymentIdHash: string) => Effect.Effect<boolean, Unavailable>
}

const STORE_UNAVAILABLE = "the attestor's database is not answering"
const unavailable = () => new Unavailable({ message: STORE_UNAVAILABLE })

export const authorizationKey = (id: AuthorizationId): string => `${id.payer.toLowerCase()}:${id.nonce}`

/**
 * The states a payment may move to `state` from (docs/attestor.md §3 payment states): `settled` is
 * final; `failed` follows `indeterminate` only once the chain was checked; `failed` may still
 * become `settled` when the chain shows the settlement.
 */
export const movesFrom = (
  state: Exclude<PaymentState, "unpaid">,
  checkedOnChain: boolean
): ReadonlyArray<PaymentState> => {
  switch (state) {
    case "authorized":
      return ["unpaid"]
    case "indeterminate":
      return ["unpaid", "authorized"]
    case "failed":
      return checkedOnChain ? ["unpaid", "authorized", "indeterminate"] : ["unpaid", "authorized"]
    case "settled":
      return ["unpaid", "authorized", "indeterminate", "failed"]
  }
}

/** How long after its deadline a row in `state` is kept (see the module header). */
const retentionOf = (state: PaymentState, retentionSeconds: number): number =>
  state === "unpaid" || state === "failed" ? SPENT_PAYMENT_RETENTION_SECONDS : retentionSeconds

export const makePaymentStore = (
  sql: SqlClient,
  config: PaymentStoreConfig = {}
): Effect.Effect<PaymentStoreShape> =>
  Effect.map(atMostEvery(config.pruneIntervalSeconds ?? 60), (whenDue) => {
    const retentionSeconds = config.retentionSeconds ?? DEFAULT_PAYMENT_RETENTION_SECONDS
    const answerRetentionSeconds = config.answerRetentionSeconds ?? DEFAULT_ANSWER_RETENTION_SECONDS
    /** Deletes rows past their retention; best effort, a failure is logged and tried again later. */
    const pruneIfDue = (now: number) =>
      whenDue(
        now,
        deleteExpired(sql, "attestor_payments", "authorization_key", now).pipe(
          Effect.zipRight(deleteExpired(sql, "attestor_paid_answers", "authorization_key", now)),
          Effect.asVoid,
          Effect.catchAll(() => Effect.logWarning("pruning expired lookup payments failed; will retry"))
        )
      )
    return {
      hold: (id, terms) =>
        Effect.flatMap(nowSeconds, (now) =>
          sql<{ readonly authorization_key: string }>`
            INSERT INTO attestor_payments
              (authorization_key, state, network, asset, amount, deadline, expires_at, created_at, updated_at)
            VALUES (${authorizationKey(id)}, 'unpaid', ${terms.network}, ${terms.asset.toLowerCase()},
              ${terms.amount.toString()}, ${terms.deadline.toString()},
              ${(terms.deadline + BigInt(retentionOf("unpaid", retentionSeconds))).toString()}, ${now}, ${now})
            ON CONFLICT (authorization_key) DO NOTHING
            RETURNING authorization_key`.pipe(
            Effect.map((rows) => rows.length === 1),
            Effect.mapError(unavailable),
            Effect.tap(() => pruneIfDue(now))
          )
        ),
      mark: (id, state, transaction, checkedOnChain = false) =>
        Effect.flatMap(nowSeconds, (now) =>
          sql`
            UPDATE attestor_payments
            SET state = ${state}, transaction = COALESCE(${transaction ?? null}, transaction),
              expires_at = deadline + ${retentionOf(state, retentionSeconds)}, updated_at = ${now}
            WHERE authorization_key = ${authorizationKey(id)}
              AND ${sql.in("state", movesFrom(state, checkedOnChain))}`.pipe(
            Effect.asVoid,
            Effect.mapError(unavailable)
          )
        ),
      get: (id) =>
        sql<{ readonly state: PaymentState; readonly transaction: string | null }>`
          SELECT state, transaction FROM attestor_payments
          WHERE authorization_key = ${authorizationKey(id)}`.pipe(
          Effect.map((rows) =>
            Option.map(Option.fromNullable(rows[0]), (row) => ({
              state: row.state,
              transaction: row.transaction ?? undefined
            }))
          ),
          Effect.mapError(unavailable)
        ),
      lease: (id, until) =>
        Effect.flatMap(nowSeconds, (now) =>
          // A conflicting row is replaced only once it has lapsed; on PostgreSQL a concurrent insert
          // for the same payer waits for the first and then sees its row, so one of them wins.
          sql<{ readonly payer: string }>`
            INSERT INTO attestor_payment_leases AS lease (payer, authorization_key, expires_at)
            VALUES (${id.payer.toLowerCase()}, ${authorizationKey(id)}, ${until})
            ON CONFLICT (payer) DO UPDATE
              SET authorization_key = EXCLUDED.authorization_key, expires_at = EXCLUDED.expires_at
              WHERE lease.expires_at <= ${now}
            RETURNING payer`.pipe(
            Effect.map((rows) => rows.length === 1),
            Effect.mapError(unavailable)
          )
        ),
      release: (id) =>
        Effect.flatMap(nowSeconds, (now) =>
          sql`
            DELETE FROM attestor_payment_leases
            WHERE (payer = ${id.payer.toLowerCase()} AND authorization_key = ${authorizationKey(id)})
              OR expires_at <= ${now}`.pipe(Effect.asVoid, Effect.mapError(unavailable))
        ),
      keepAnswer: (id, answer) =>
        Effect.flatMap(nowSeconds, (now) =>
          sql`
            INSERT INTO attestor_paid_answers
              (authorization_key, payer, payment_id, request_digest, outcome, answer, from_block, expires_at)
            VALUES (${authorizationKey(id)}, ${id.payer.toLowerCase()}, ${answer.paymentIdHash ?? null},
              ${answer.requestDigest}, ${answer.outcome}, ${answer.answer ?? null},
              ${answer.fromBlock.toString()}, ${now + answerRetentionSeconds})`.pipe(
            Effect.asVoid,
            Effect.mapError(unavailable)
          )
        ),
      answerSettled: (id, paymentResponse) =>
        sql`
          UPDATE attestor_paid_answers SET payment_response = ${paymentResponse}
          WHERE authorization_key = ${authorizationKey(id)}`.pipe(
          Effect.asVoid,
          Effect.mapError(unavailable)
        ),
      answerOf: (id) =>
        Effect.flatMap(nowSeconds, (now) =>
          sql<{
            readonly request_digest: string
            readonly payment_id: string | null
            readonly outcome: "answer" | "not_found"
            readonly answer: string | null
            readonly payment_response: string | null
            readonly from_block: string | number | bigint
          }>`
            SELECT request_digest, payment_id, outcome, answer, payment_response, from_block
            FROM attestor_paid_answers
            WHERE authorization_key = ${authorizationKey(id)} AND expires_at > ${now}`.pipe(
            Effect.map((rows) =>
              Option.map(Option.fromNullable(rows[0]), (row) => ({
                requestDigest: row.request_digest,
                paymentIdHash: row.payment_id ?? undefined,
                outcome: row.outcome,
                answer: row.answer ?? undefined,
                paymentResponse: row.payment_response ?? undefined,
                fromBlock: BigInt(row.from_block)
              }))
            ),
            Effect.mapError(unavailable)
          )
        ),
      paymentIdTaken: (id, paymentIdHash) =>
        sql<{ readonly authorization_key: string }>`
          SELECT authorization_key FROM attestor_paid_answers
          WHERE payer = ${id.payer.toLowerCase()} AND payment_id = ${paymentIdHash}
            AND authorization_key <> ${authorizationKey(id)}`.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.mapError(unavailable)
        )
    }
  })

export class PaymentStore extends Context.Tag("PaymentStore")<PaymentStore, PaymentStoreShape>() {
  /** With `config`'s retention (the settings' `HANDLE_LOOKUP_PAYMENT_RETENTION_DAYS`). */
  static readonly layerWith = (config: PaymentStoreConfig): Layer.Layer<PaymentStore, never, SqlClient> =>
    Layer.effect(
      PaymentStore,
      Effect.flatMap(SqlClient, (sql) => makePaymentStore(sql, config))
    )

  /** With the default retention. */
  static readonly layer: Layer.Layer<PaymentStore, never, SqlClient> = PaymentStore.layerWith({})

  /** For tests: the members given; any other use dies naming it (src/stubLayer.ts). */
  static readonly test = stubLayer(PaymentStore, {
    hold: "function",
    mark: "function",
    get: "function",
    lease: "function",
    release: "function",
    keepAnswer: "function",
    answerSettled: "function",
    answerOf: "function",
    paymentIdTaken: "function"
  })
}
