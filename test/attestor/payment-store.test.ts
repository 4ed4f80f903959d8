/**
 * The payment record on a real database (PGlite, and PostgreSQL when DATABASE_URL is set): an
 * authorization is held once, whoever presents it again (concurrently too) is refused, and its
 * state moves on durably with the settlement's hash; a payer has one payment in flight at once
 * (concurrently too), and a lease its holder never gave back lapses at its time; rows are pruned a
 * retention after their authorization's deadline, longer for payments that may have moved money.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer, Option, TestClock } from "effect"
import {
  makePaymentStore,
  SPENT_PAYMENT_RETENTION_SECONDS
} from "../../src/attestor/lookups/payments/PaymentStore.js"
import { migrate } from "../../src/store/migrations.js"
import { type TestDatabase, testDatabases } from "../support/database.js"

const payer = "0x90F79bf6EB2c4f870365E785982E1f101E93b906" as const
const terms = {
  network: "eip155:31337",
  asset: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
  amount: 10_000n,
  deadline: 60n
} as const
let nonces = 0n
const fresh = () => ({ payer, nonce: ++nonces })

const withMigrations = (database: TestDatabase) =>
  Layer.effectDiscard(migrate).pipe(Layer.provideMerge(database.layer))

for (const database of testDatabases()) {
  describe(database.name, () => {
    layer(withMigrations(database), { timeout: 60_000 })((it) => {
      it.effect("holds an authorization once; a second presentation is refused", () =>
        Effect.gen(function* () {
          const store = yield* makePaymentStore(yield* SqlClient)
          const id = fresh()
          expect(yield* store.hold(id, terms)).toBe(true)
          expect(yield* store.get(id)).toEqual(Option.some({ state: "unpaid", transaction: undefined }))
          expect(yield* store.hold(id, terms)).toBe(false)
          // The same nonce of another payer is another authorization.
          expect(
            yield* store.hold({ payer: "0x0000000000000000000000000000000000000001", nonce: id.nonce }, terms)
          ).toBe(true)
        })
      )

      it.effect(
        "states move one way: nothing leaves settled; indeterminate becomes failed only once the chain was checked",
        () =>
          Effect.gen(function* () {
            const store = yield* makePaymentStore(yield* SqlClient)
            const state = (id: { payer: typeof payer; nonce: bigint }) =>
              Effect.map(
                store.get(id),
                Option.map((p) => p.state)
              )
            const settled = fresh()
            yield* store.hold(settled, terms)
            yield* store.mark(settled, "settled", "0xfeed")
            yield* store.mark(settled, "failed", undefined, true)
            yield* store.mark(settled, "indeterminate")
            yield* store.mark(settled, "authorized")
            expect(yield* store.get(settled)).toEqual(
              Option.some({ state: "settled", transaction: "0xfeed" })
            )
            const unknown = fresh()
            yield* store.hold(unknown, terms)
            yield* store.mark(unknown, "indeterminate")
            yield* store.mark(unknown, "failed")
            expect(yield* state(unknown)).toEqual(Option.some("indeterminate"))
            yield* store.mark(unknown, "failed", undefined, true)
            expect(yield* state(unknown)).toEqual(Option.some("failed"))
            // A failed payment the chain later shows settled is recorded settled.
            yield* store.mark(unknown, "settled", "0xbeef")
            expect(yield* state(unknown)).toEqual(Option.some("settled"))
          })
      )

      it.effect("concurrent presentations of one authorization: one holds it", () =>
        Effect.gen(function* () {
          const store = yield* makePaymentStore(yield* SqlClient)
          const id = fresh()
          const held = yield* Effect.all(
            Array.from({ length: 8 }, () => store.hold(id, terms)),
            { concurrency: "unbounded" }
          )
          expect(held.filter((h) => h)).toHaveLength(1)
        })
      )

      it.effect(
        "moves on through authorized to settled with its transaction, or to failed or indeterminate",
        () =>
          Effect.gen(function* () {
            const store = yield* makePaymentStore(yield* SqlClient)
            const paid = fresh()
            yield* store.hold(paid, terms)
            yield* store.mark(paid, "authorized")
            yield* store.mark(paid, "settled", "0xabc")
            expect(yield* store.get(paid)).toEqual(Option.some({ state: "settled", transaction: "0xabc" }))
            const refused = fresh()
            yield* store.hold(refused, terms)
            yield* store.mark(refused, "failed")
            expect(yield* store.get(refused)).toEqual(
              Option.some({ state: "failed", transaction: undefined })
            )
            expect(yield* store.hold(refused, terms)).toBe(false)
            const lost = fresh()
            yield* store.hold(lost, terms)
            yield* store.mark(lost, "indeterminate")
            expect(yield* store.get(lost)).toEqual(
              Option.some({ state: "indeterminate", transaction: undefined })
            )
            expect(yield* store.get(fresh())).toEqual(Option.none())
          })
      )

      it.effect("concurrent leases of one payer: one is taken; another payer's is not in the way", () =>
        Effect.gen(function* () {
          const store = yield* makePaymentStore(yield* SqlClient)
          const leased = yield* Effect.all(
            Array.from({ length: 8 }, () => store.lease(fresh(), 60)),
            { concurrency: "unbounded" }
          )
          expect(leased.filter((l) => l)).toHaveLength(1)
          expect(
            yield* store.lease({ payer: "0x0000000000000000000000000000000000000002", nonce: 1n }, 60)
          ).toBe(true)
        })
      )

      it.effect("a lease is given back by its holder only, and lapses at its time", () =>
        Effect.gen(function* () {
          const store = yield* makePaymentStore(yield* SqlClient)
          const other = "0x0000000000000000000000000000000000000004" as const
          const holder = { payer: other, nonce: 1n }
          const next = { payer: other, nonce: 2n }
          expect(yield* store.lease(holder, 60)).toBe(true)
          yield* store.release(next)
          expect(yield* store.lease(next, 60)).toBe(false)
          yield* store.release(holder)
          expect(yield* store.lease(next, 60)).toBe(true)
          // `next` stops without giving it back: the payer waits until 60, no longer.
          yield* TestClock.adjust("59 seconds")
          expect(yield* store.lease(holder, 120)).toBe(false)
          yield* TestClock.adjust("1 second")
          expect(yield* store.lease(holder, 120)).toBe(true)
          // The lapsed holder's late release does not end the lease taken over.
          yield* store.release(next)
          expect(yield* store.lease(next, 120)).toBe(false)
        })
      )

      it.effect(
        "prunes a row past its retention after its deadline and keeps a younger one; settled rows stay longer than failed ones",
        () =>
          Effect.gen(function* () {
            // The tests of this layer share its clock: this one counts from 0.
            yield* TestClock.setTime(0)
            const retentionSeconds = 2 * SPENT_PAYMENT_RETENTION_SECONDS
            const store = yield* makePaymentStore(yield* SqlClient, { retentionSeconds })
            const payment = (deadline: number, state: "settled" | "failed") =>
              Effect.gen(function* () {
                const id = fresh()
                yield* store.hold(id, { ...terms, deadline: BigInt(deadline) })
                yield* store.mark(id, state, state === "settled" ? "0xabc" : undefined)
                return id
              })
            const kept = (id: ReturnType<typeof fresh>) => Effect.map(store.get(id), Option.isSome)
            const oldFailed = yield* payment(60, "failed")
            const youngFailed = yield* payment(600, "failed")
            const oldSettled = yield* payment(60, "settled")
            // Past the old failed row's retention, not the young one's: the next write prunes.
            yield* TestClock.adjust(`${60 + SPENT_PAYMENT_RETENTION_SECONDS} seconds`)
            yield* payment(60 + SPENT_PAYMENT_RETENTION_SECONDS + 60, "failed")
            expect(yield* kept(oldFailed)).toBe(false)
            expect(yield* kept(youngFailed)).toBe(true)
            expect(yield* kept(oldSettled)).toBe(true)
            // The settled row stays its longer retention, then goes.
            yield* TestClock.adjust(`${retentionSeconds - SPENT_PAYMENT_RETENTION_SECONDS - 1} seconds`)
            yield* payment(60 + retentionSeconds + 60, "failed")
            expect(yield* kept(oldSettled)).toBe(true)
            yield* TestClock.adjust("60 seconds")
            yield* payment(60 + retentionSeconds + 120, "failed")
            expect(yield* kept(oldSettled)).toBe(false)
            expect(yield* kept(youngFailed)).toBe(false)
          })
      )
    })
  })
}
