/**
 * The day's budget of unpaid bind transactions (src/relayer/BindBudget.ts) on the real databases,
 * the clock a test clock: propose-bind and cancel-bind are counted per account id and per owner, a
 * proposal keeps room for the cancel that may undo it, a spent budget is 429 `rate_limited` with
 * `Retry-After` until its day's window ends, both keys are charged all or nothing, a charge given
 * back is not counted, concurrent charges never exceed the budget, and a second service on the
 * same database (a restart, another replica) sees what the first spent. Refusals are counted by
 * key (both series exported from the relayer's start: test/e2e/metrics-at-zero.test.ts).
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Either, Layer, Metric, TestClock } from "effect"
import { type Address, type Hex, keccak256, toHex, zeroAddress } from "viem"
import { RelayerSettings, type RelayerSettingsShape } from "../../src/config/relayer.js"
import { BindBudget, type BindCharge, makeBindBudget, roomNeeded } from "../../src/relayer/BindBudget.js"
import { type BindBudgetKey, bindBudgetRefusals } from "../../src/relayer/metrics.js"
import { migrate } from "../../src/store/migrations.js"
import { testDatabases } from "../support/database.js"

const VAULT: Address = "0x00000000000000000000000000000000000000E1"
const BUDGET = 4
const DAY = 86_400

const idOf = (label: string): Hex => keccak256(toHex(label))
const ownerOf = (label: string): Address => `0x${keccak256(toHex(label)).slice(26)}` as Address

const settings = (bindBudgetPerDay: number, bindBudgetTotalPerDay = 0, vault: Address = VAULT) =>
  Layer.succeed(RelayerSettings, { vault, bindBudgetPerDay, bindBudgetTotalPerDay } as RelayerSettingsShape)

/** The charge's outcome: `ok` (with its give-back), or the refusal's Retry-After and message. */
const charge = (request: BindCharge) =>
  Effect.flatMap(BindBudget, (budget) =>
    Effect.map(Effect.either(budget.charge(request)), (result) =>
      Either.isRight(result)
        ? { ok: true as const, giveBack: result.right }
        : {
            ok: false as const,
            tag: result.left._tag,
            retryAfter: result.left._tag === "RateLimited" ? result.left.retryAfterSeconds : undefined,
            message: result.left.message
          }
    )
  )

const okOf = (request: BindCharge) => Effect.map(charge(request), (result) => result.ok)

const propose = (id: Hex, owner: Address = zeroAddress): BindCharge => ({ id, owner, action: "propose-bind" })
const cancel = (id: Hex, owner: Address): BindCharge => ({ id, owner, action: "cancel-bind" })

const refusalsOf = (key: BindBudgetKey) =>
  Effect.map(Metric.value(Metric.tagged(bindBudgetRefusals, "key", key)), (state) => state.count)

describe("roomNeeded", () => {
  it("a proposal needs room for itself and the cancel that may undo it; a cancel for itself", () => {
    expect(roomNeeded("propose-bind")).toBe(2)
    expect(roomNeeded("cancel-bind")).toBe(1)
  })
})

for (const database of testDatabases()) {
  const storage = Layer.effectDiscard(migrate).pipe(Layer.provideMerge(database.layer))
  const services = Layer.effect(BindBudget, makeBindBudget).pipe(
    Layer.provideMerge(Layer.mergeAll(settings(BUDGET), storage))
  )

  layer(services, { timeout: 60_000 })(`bind budgets on ${database.name}`, (it) => {
    it.effect(
      "propose → cancel loops stop at the id's budget: 429 with Retry-After until the day's window ends",
      () =>
        Effect.gen(function* () {
          const id = idOf(`${database.name} loop`)
          // No owner yet (the first bind): the id alone is counted.
          const first = propose(id)
          const owner = ownerOf(`${database.name} loop owner`)
          expect(yield* okOf(first)).toBe(true)
          // Two cycles of the loop, later, by an owner who re-proposes and cancels.
          yield* TestClock.adjust("1 hour")
          expect(yield* okOf(cancel(id, owner))).toBe(true)
          expect(yield* okOf(propose(id, owner))).toBe(true)
          expect(yield* okOf(cancel(id, owner))).toBe(true)
          const idRefusals = yield* refusalsOf("id")
          const refused = yield* charge(propose(id, owner))
          expect(refused).toMatchObject({ ok: false, tag: "RateLimited", retryAfter: DAY - 3_600 })
          expect(refused.ok === false && refused.message).toMatch(
            /^this account has had the 4 unpaid bind transactions/
          )
          expect(yield* charge(cancel(id, owner))).toMatchObject({ ok: false, retryAfter: DAY - 3_600 })
          expect((yield* refusalsOf("id")) - idRefusals).toBe(2)
          // The window is a day from the first charge: a second before its end, still refused.
          yield* TestClock.adjust(`${DAY - 3_600 - 1} seconds`)
          expect(yield* charge(propose(id, owner))).toMatchObject({ ok: false, retryAfter: 1 })
          // The id's window has ended; the owner's, started an hour later, has one left.
          yield* TestClock.adjust("1 second")
          expect(yield* okOf(cancel(id, owner))).toBe(true)
          const byOwner = yield* charge(propose(id, owner))
          expect(byOwner).toMatchObject({ ok: false, retryAfter: 3_600 })
          expect(byOwner.ok === false && byOwner.message).toMatch(/^this account's owner has had/)
          yield* TestClock.adjust("1 hour")
          expect(yield* okOf(propose(id, owner))).toBe(true)
        })
    )

    it.effect("a proposal keeps room for its cancel: refused with one left, while the cancel goes", () =>
      Effect.gen(function* () {
        const id = idOf(`${database.name} room`)
        const owner = ownerOf(`${database.name} room owner`)
        // A bind proposed elsewhere and cancelled here, then two proposals here: 3 of 4 spent.
        expect(yield* okOf(cancel(id, owner))).toBe(true)
        expect(yield* okOf(propose(id, owner))).toBe(true)
        expect(yield* okOf(propose(id, owner))).toBe(true)
        expect(yield* charge(propose(id, owner))).toMatchObject({ ok: false, tag: "RateLimited" })
        expect(yield* okOf(cancel(id, owner))).toBe(true)
        expect(yield* charge(cancel(id, owner))).toMatchObject({ ok: false, tag: "RateLimited" })
      })
    )

    it.effect(
      "an owner's budget spans its accounts; a refusal charges neither key; other owners are served",
      () =>
        Effect.gen(function* () {
          const owner = ownerOf(`${database.name} many`)
          const [a, b, c] = ["a", "b", "c"].map((label) => idOf(`${database.name} many ${label}`)) as [
            Hex,
            Hex,
            Hex
          ]
          expect(yield* okOf(propose(a, owner))).toBe(true)
          expect(yield* okOf(cancel(a, owner))).toBe(true)
          expect(yield* okOf(propose(b, owner))).toBe(true)
          expect(yield* okOf(cancel(b, owner))).toBe(true)
          // Account c has spent nothing; its owner has spent the day's budget.
          const ownerRefusals = yield* refusalsOf("owner")
          const refused = yield* charge(propose(c, owner))
          expect(refused).toMatchObject({ ok: false, tag: "RateLimited", retryAfter: DAY })
          expect(refused.ok === false && refused.message).toMatch(/^this account's owner has had the 4/)
          expect(yield* charge(cancel(c, owner))).toMatchObject({ ok: false, tag: "RateLimited" })
          expect((yield* refusalsOf("owner")) - ownerRefusals).toBe(2)
          // The refusals left c's own count untouched: its whole budget, under another owner.
          const other = ownerOf(`${database.name} many other`)
          expect(yield* okOf(propose(c, other))).toBe(true)
          expect(yield* okOf(cancel(c, other))).toBe(true)
          expect(yield* okOf(propose(c, other))).toBe(true)
          expect(yield* okOf(cancel(c, other))).toBe(true)
          expect(yield* charge(cancel(c, other))).toMatchObject({ ok: false, tag: "RateLimited" })
        })
    )

    it.effect("a charge given back (nothing was sent) is not counted, on the id and the owner", () =>
      Effect.gen(function* () {
        const id = idOf(`${database.name} given back`)
        const owner = ownerOf(`${database.name} given back owner`)
        for (let i = 0; i < BUDGET - 1; i++) expect(yield* okOf(cancel(id, owner))).toBe(true)
        const last = yield* charge(cancel(id, owner))
        if (!last.ok) throw new Error("the last charge was refused")
        expect(yield* charge(cancel(id, owner))).toMatchObject({ ok: false })
        yield* last.giveBack
        expect(yield* okOf(cancel(id, owner))).toBe(true)
        expect(yield* charge(cancel(id, owner))).toMatchObject({ ok: false })
      })
    )

    it.effect("concurrent charges of one account never exceed its budget", () =>
      Effect.gen(function* () {
        const id = idOf(`${database.name} concurrent`)
        const owner = ownerOf(`${database.name} concurrent owner`)
        const results = yield* Effect.all(
          Array.from({ length: 12 }, () => okOf(cancel(id, owner))),
          { concurrency: "unbounded" }
        )
        expect(results.filter((ok) => ok)).toHaveLength(BUDGET)
      })
    )

    it.effect("a second service on the same database (a restart, another replica) sees the spend", () =>
      Effect.gen(function* () {
        const id = idOf(`${database.name} shared`)
        const owner = ownerOf(`${database.name} shared owner`)
        for (let i = 0; i < BUDGET; i++) expect(yield* okOf(cancel(id, owner))).toBe(true)
        const second = yield* makeBindBudget
        const refused = yield* Effect.either(second.charge(cancel(id, owner)))
        expect(Either.isLeft(refused) && refused.left._tag).toBe("RateLimited")
        // Another owner's account is served by it.
        const fresh = yield* Effect.either(
          second.charge(cancel(idOf(`${database.name} shared 2`), ownerOf("fresh")))
        )
        expect(Either.isRight(fresh)).toBe(true)
      })
    )
  })

  // Its own vault, so its relayer-wide row is apart from the other tests' accounts.
  const TOTAL = 3
  layer(
    Layer.effect(BindBudget, makeBindBudget).pipe(
      Layer.provideMerge(
        Layer.mergeAll(settings(BUDGET, TOTAL, "0x00000000000000000000000000000000000000E2"), storage)
      )
    ),
    { timeout: 60_000 }
  )(`BIND_BUDGET_TOTAL_PER_DAY on ${database.name}`, (it) => {
    it.effect(
      "accounts of one handle, each under a fresh owner, stop at the relayer-wide budgets of proposals and of cancels: 429 until their window ends",
      () =>
        Effect.gen(function* () {
          // One launch per account, a fresh key per bind: each id and owner has its whole budget.
          const loops = Array.from({ length: 4 }, (_, i) => ({
            id: idOf(`${database.name} handle ${i}`),
            owner: ownerOf(`${database.name} handle owner ${i}`)
          }))
          for (const { id, owner } of loops.slice(0, TOTAL)) {
            expect(yield* okOf(propose(id))).toBe(true)
            expect(yield* okOf(cancel(id, owner))).toBe(true)
          }
          const fourth = loops[TOTAL] as (typeof loops)[0]
          const refusals = yield* refusalsOf("relayer")
          const refused = yield* charge(propose(fourth.id))
          expect(refused).toMatchObject({ ok: false, tag: "RateLimited", retryAfter: DAY })
          expect(refused.ok === false && refused.message).toMatch(
            /^this relayer has sent the 3 transactions of this kind/
          )
          // Cancels are counted apart: their own three went through above, and now they are spent
          // too (a cancel of a proposal sent elsewhere).
          expect(yield* charge(cancel(fourth.id, fourth.owner))).toMatchObject({
            ok: false,
            tag: "RateLimited"
          })
          expect((yield* refusalsOf("relayer")) - refusals).toBe(2)
          yield* TestClock.adjust(`${DAY} seconds`)
          expect(yield* okOf(propose(fourth.id))).toBe(true)
          expect(yield* okOf(cancel(fourth.id, fourth.owner))).toBe(true)
        })
    )
  })

  layer(
    Layer.effect(BindBudget, makeBindBudget).pipe(
      Layer.provideMerge(
        Layer.mergeAll(settings(0, 2, "0x00000000000000000000000000000000000000E3"), storage)
      )
    ),
    { timeout: 60_000 }
  )(`BIND_BUDGET_PER_DAY=0 beside BIND_BUDGET_TOTAL_PER_DAY on ${database.name}`, (it) => {
    it.effect("the relayer-wide budget still counts", () =>
      Effect.gen(function* () {
        const id = idOf(`${database.name} total only`)
        const owner = ownerOf(`${database.name} total only owner`)
        expect(yield* okOf(propose(id, owner))).toBe(true)
        expect(yield* okOf(propose(id, owner))).toBe(true)
        expect(yield* charge(propose(id, owner))).toMatchObject({ ok: false, tag: "RateLimited" })
        // Cancels have their own relayer-wide count, untouched by the proposals.
        expect(yield* okOf(cancel(id, owner))).toBe(true)
        expect(yield* okOf(cancel(id, owner))).toBe(true)
        expect(yield* charge(cancel(id, owner))).toMatchObject({ ok: false, tag: "RateLimited" })
      })
    )
  })

  layer(
    Layer.effect(BindBudget, makeBindBudget).pipe(Layer.provideMerge(Layer.mergeAll(settings(0), storage))),
    { timeout: 60_000 }
  )(`BIND_BUDGET_PER_DAY=0 on ${database.name}`, (it) => {
    it.effect("turns the budget off", () =>
      Effect.gen(function* () {
        const id = idOf(`${database.name} off`)
        const owner = ownerOf(`${database.name} off owner`)
        for (let i = 0; i < 3 * BUDGET; i++) expect(yield* okOf(propose(id, owner))).toBe(true)
      })
    )
  })
}
