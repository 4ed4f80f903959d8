/**
 * The paid lookup's order and refusals (src/attestor/lookups/payments/paidLookup.ts; docs/attestor.md §4
 * "Paid handle lookup flow"), with the payment record on PGlite and a recording facilitator: a
 * challenge without payment; an authorization that does not pay what the quote asks, or for too
 * long, or whose deadline has passed, refused before the facilitator is asked; one naming a payer
 * who did not sign it (unsigned, or signed by another key) refused before any lease, row or
 * facilitator call, so the payer's own payment beside it pays; one payment per payer in flight; an
 * authorization held before verification and refused the second time, also once its row is
 * pruned; nothing settled for an unknown handle; a settle without answer recorded indeterminate;
 * and the facilitator never told the handle or the platform.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { describe, expect, layer } from "@effect/vitest"
import type { FacilitatorClient } from "@x402/core/http"
import {
  decodePaymentRequiredHeader,
  decodePaymentResponseHeader,
  decodePaymentSignatureHeader,
  encodePaymentSignatureHeader
} from "@x402/core/http"
import type { PaymentPayload } from "@x402/core/types"
import { Effect, Either, Fiber, Layer, Logger, Option, TestClock } from "effect"
import type { Address, Hex, LocalAccount } from "viem"
import { devnetAccount } from "../../contracts/deploy.js"
import { Unavailable } from "../../schema/errors.js"
import type { LookupAnswer } from "../../src/attestor/commitments/commitmentRules.js"
import { resolveHandle } from "../../src/attestor/lookups/HandleLookups.js"
import type { Resolve } from "../../src/attestor/lookups/handleResolvers.js"
import {
  DEFAULT_PAYMENT_RETENTION_SECONDS,
  makePaymentStore,
  type PaymentStoreShape
} from "../../src/attestor/lookups/payments/PaymentStore.js"
import { paidLookup } from "../../src/attestor/lookups/payments/paidLookup.js"
import type {
  OnChainSettlement,
  SettlementChain
} from "../../src/attestor/lookups/payments/settlementOnChain.js"
import { lookupRequirements, PAYMENT_CLOCK_SKEW_SECONDS } from "../../src/attestor/lookups/payments/x402.js"
import { nowSeconds } from "../../src/clock.js"
import { migrate } from "../../src/store/migrations.js"
import { testDatabases } from "../support/database.js"
import { signPermit2Payment } from "../support/x402Payer.js"

const requirements = lookupRequirements({
  chainId: 31337,
  asset: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
  assetName: "Tether USD",
  assetVersion: "1",
  amount: 10n ** 16n,
  payTo: "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
  maxTimeoutSeconds: 60,
  signerAddress: "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
  spenderAddress: "0x402085c248EeA27D92E8b30b2C58ed07f9E20001"
})

/** The attestor's clock in these tests (unix seconds); payments end `maxTimeoutSeconds` later. */
const NOW = 1_800_000_000
const PAYER: Address = "0x90F79bf6EB2c4f870365E785982E1f101E93b906"
/** The payer's own key (anvil's account #3). */
const payerAccount = devnetAccount(3)
const OTHER = "0x0000000000000000000000000000000000000007"

interface AuthorizationOverrides {
  readonly token?: string
  readonly amount?: string
  readonly spender?: string
  readonly to?: string
  readonly deadline?: string
  /** Sent instead of the payer's signature. */
  readonly signature?: Hex
  /** The `payment-identifier` id sent. */
  readonly paymentId?: string
}

let nonces = 1000n
/**
 * A `PAYMENT-SIGNATURE` of `PAYER` at the test clock's now with a fresh nonce, signed by `signer`
 * (default: the payer's own key).
 */
const payment = (
  accepted = requirements,
  overrides: AuthorizationOverrides = {},
  signer: LocalAccount = payerAccount
) =>
  Effect.flatMap(nowSeconds, (now) =>
    Effect.promise(async () =>
      encodePaymentSignatureHeader(
        await signPermit2Payment(signer, requirements, {
          accepted,
          from: PAYER,
          nonce: ++nonces,
          now,
          ...(overrides.token === undefined ? {} : { token: overrides.token as Address }),
          ...(overrides.amount === undefined ? {} : { amount: BigInt(overrides.amount) }),
          ...(overrides.spender === undefined ? {} : { spender: overrides.spender as Address }),
          ...(overrides.to === undefined
            ? {}
            : { to: overrides.to as Address, signedTo: overrides.to as Address }),
          ...(overrides.deadline === undefined ? {} : { deadlineIn: Number(overrides.deadline) - now }),
          ...(overrides.signature === undefined ? {} : { signature: overrides.signature }),
          ...(overrides.paymentId === undefined ? {} : { paymentId: overrides.paymentId })
        })
      )
    )
  )

let ids = 0
/** A fresh `payment-identifier` id (one id names one payment of a payer): the payer's replay secret. */
const freshId = () => `payer-secret-id-${String(++ids).padStart(4, "0")}`

type Verdict = "ok" | "refuse" | "throw"

const facilitatorOf = (
  verify: Verdict,
  settle: Verdict,
  settling?: Promise<void>,
  verifying?: Promise<void>,
  settleAnswer?: () => unknown
) => {
  const calls: Array<string> = []
  const client = {
    verify: async (payload: unknown, reqs: unknown) => {
      calls.push(`verify ${JSON.stringify({ payload, reqs })}`)
      await verifying
      if (verify === "throw") throw new Error("down")
      return { isValid: verify === "ok", payer: "0x90f79bf6eb2c4f870365e785982e1f101e93b906" }
    },
    settle: async (payload: unknown, reqs: unknown) => {
      calls.push(`settle ${JSON.stringify({ payload, reqs })}`)
      await settling
      if (settleAnswer !== undefined) return settleAnswer()
      if (settle === "throw") throw new Error("timed out")
      return settle === "ok"
        ? {
            success: true,
            transaction: "0xfeed",
            network: "eip155:31337",
            payer: "0x90f79bf6eb2c4f870365e785982e1f101e93b906"
          }
        : { success: false, errorReason: "insufficient_funds", transaction: "", network: "eip155:31337" }
    },
    getSupported: async () => ({ kinds: [], extensions: [], signers: {} })
  } as unknown as FacilitatorClient
  return { client, calls }
}

const resolvers: Record<"microblog", Resolve> = {
  microblog: (handle) => Effect.succeed(handle === "dev42" ? Option.some("42") : Option.none())
}

/** An answer that is the user id itself. */
const userIdAnswer = (body: unknown): LookupAnswer<string> => ({
  request: { route: "/v1/commitment", body },
  make: Effect.succeed,
  encode: (answer) => JSON.stringify(answer),
  decode: (text) => Either.try(() => JSON.parse(text) as string)
})

/** A chain on which no authorization was ever spent. */
const notSpent: SettlementChain = {
  blockNumber: Effect.succeed(1n),
  settlementOf: () => Effect.succeed({ spent: false })
}

const database = testDatabases()[0]
if (database === undefined) throw new Error("no test database")

layer(Layer.effectDiscard(migrate).pipe(Layer.provideMerge(database.layer)), { timeout: 60_000 })((it) => {
  const setup = (
    verify: Verdict,
    settle: Verdict,
    options: {
      readonly settling?: Promise<void>
      readonly verifying?: Promise<void>
      readonly recordsSettled?: boolean
      readonly chain?: SettlementChain
      readonly settleAnswer?: () => unknown
    } = {}
  ) =>
    Effect.gen(function* () {
      yield* TestClock.setTime(NOW * 1000)
      const store = yield* makePaymentStore(yield* SqlClient)
      const facilitator = facilitatorOf(
        verify,
        settle,
        options.settling,
        options.verifying,
        options.settleAnswer
      )
      const buy = paidLookup({
        requirements: Effect.succeed(requirements),
        publicUrl: "http://127.0.0.1:8081",
        facilitator: facilitator.client,
        // A database that fails exactly when the settlement is to be recorded.
        store:
          options.recordsSettled === false
            ? {
                ...store,
                mark: (id, state, transaction) =>
                  state === "settled"
                    ? Effect.fail(new Unavailable({ message: "the database is not answering" }))
                    : store.mark(id, state, transaction)
              }
            : store,
        resolve: resolveHandle(resolvers),
        chain: options.chain ?? notSpent
      })
      /** The lookup answering with the user id itself, for the request `{ platform, handle }` or `request`. */
      const lookup = (
        platform: "microblog",
        handle: string,
        signature: string | undefined,
        request: unknown = { platform, handle }
      ) => buy(platform, handle, signature, userIdAnswer(request))
      return { lookup, calls: facilitator.calls, store }
    })

  /** The stored state of the authorization `payment()` made last. */
  const lastPaymentState = (store: PaymentStoreShape) =>
    Effect.map(
      store.get({ payer: PAYER, nonce: nonces }),
      Option.map((s) => s.state)
    )

  describe("paid lookups", () => {
    it.effect("without a payment: 402 payment_required with the challenge", () =>
      Effect.gen(function* () {
        const { lookup, calls } = yield* setup("ok", "ok")
        const error = yield* Effect.flip(lookup("microblog", "dev42", undefined))
        expect(error._tag).toBe("PaymentRequired")
        const challenge = error._tag === "PaymentRequired" ? error.challenge : undefined
        expect(decodePaymentRequiredHeader(challenge ?? "").accepts).toEqual([requirements])
        expect(calls).toEqual([])
      })
    )

    it.effect(
      "paid and found: the answer, PAYMENT-RESPONSE, settled once; the same payment for the same request is given both again, for another request refused",
      () =>
        Effect.gen(function* () {
          const { lookup, calls } = yield* setup("ok", "ok")
          const signature = yield* payment(requirements, { paymentId: freshId() })
          const result = yield* lookup("microblog", "dev42", signature)
          expect(result.body).toBe("42")
          expect(decodePaymentResponseHeader(result.paymentResponse ?? "")).toMatchObject({
            success: true,
            transaction: "0xfeed"
          })
          expect(yield* lookup("microblog", "dev42", signature)).toEqual(result)
          const again = yield* Effect.flip(
            lookup("microblog", "dev42", signature, { platform: "microblog", handle: "dev43" })
          )
          expect(again._tag).toBe("PaymentFailed")
          expect(calls.map((c) => c.split(" ")[0])).toEqual(["verify", "settle"])
          // Neither the handle nor the platform reached the facilitator.
          expect(calls.join("\n")).not.toMatch(/dev42|microblog/)
        })
    )

    it.effect("an unknown handle: 404, nothing settled, the authorization spent", () =>
      Effect.gen(function* () {
        const { lookup, calls } = yield* setup("ok", "ok")
        const signature = yield* payment()
        expect((yield* Effect.flip(lookup("microblog", "nosuchuser", signature)))._tag).toBe("NotFound")
        expect(calls.map((c) => c.split(" ")[0])).toEqual(["verify"])
        expect((yield* Effect.flip(lookup("microblog", "dev42", signature)))._tag).toBe("PaymentFailed")
      })
    )

    it.effect("other requirements, a refused verification, a failed settle: 402 payment_failed", () =>
      Effect.gen(function* () {
        const quoted = yield* setup("ok", "ok")
        const other = { ...requirements, amount: "1" }
        expect((yield* Effect.flip(quoted.lookup("microblog", "dev42", yield* payment(other))))._tag).toBe(
          "PaymentFailed"
        )
        expect(quoted.calls).toEqual([])
        const refused = yield* setup("refuse", "ok")
        expect((yield* Effect.flip(refused.lookup("microblog", "dev42", yield* payment())))._tag).toBe(
          "PaymentFailed"
        )
        const unsettled = yield* setup("ok", "refuse")
        expect((yield* Effect.flip(unsettled.lookup("microblog", "dev42", yield* payment())))._tag).toBe(
          "PaymentFailed"
        )
      })
    )

    it.effect(
      "a facilitator not answering: 503; a settle without answer is indeterminate, and presented again it is answered from the chain's settlement, never settled again",
      () =>
        Effect.gen(function* () {
          const down = yield* setup("throw", "ok")
          expect((yield* Effect.flip(down.lookup("microblog", "dev42", yield* payment())))._tag).toBe(
            "Unavailable"
          )
          // The settlement happens, but is mined only after the attestor looked: then the chain
          // shows the authorization spent by 0xbeef.
          const onChain: { now: OnChainSettlement } = { now: { spent: false } }
          const lost = yield* setup("ok", "throw", {
            chain: { blockNumber: Effect.succeed(1n), settlementOf: () => Effect.sync(() => onChain.now) }
          })
          const signature = yield* payment(requirements, { paymentId: freshId() })
          const lines: Array<string> = []
          const capture = Logger.replace(
            Logger.defaultLogger,
            Logger.map(Logger.logfmtLogger, (line) => {
              lines.push(line)
            })
          )
          expect(
            (yield* Effect.flip(lost.lookup("microblog", "dev42", signature)).pipe(Effect.provide(capture)))
              ._tag
          ).toBe("Unavailable")
          // The operator hears of it, but not whose payment or which handle.
          expect(lines.join("\n")).toMatch(/indeterminate/)
          expect(lines.join("\n")).not.toMatch(/dev42|microblog|90f79bf6|0x90F79/i)
          const stored = yield* lost.store.get({ payer: PAYER, nonce: nonces })
          expect(Option.map(stored, (s) => s.state)).toEqual(Option.some("indeterminate"))
          onChain.now = { spent: true, transaction: Option.some("0xbeef" as Hex) }
          const recovered = yield* lost.lookup("microblog", "dev42", signature)
          expect(recovered.body).toBe("42")
          expect(decodePaymentResponseHeader(recovered.paymentResponse ?? "")).toEqual({
            success: true,
            transaction: "0xbeef",
            network: "eip155:31337",
            payer: PAYER
          })
          expect(lost.calls.filter((c) => c.startsWith("settle"))).toHaveLength(1)
          const settledRow = yield* lost.store.get({ payer: PAYER, nonce: nonces })
          expect(Option.map(settledRow, (s) => s.state)).toEqual(Option.some("settled"))
        })
    )

    it.effect("a client that hangs up while its payment settles: the settlement is still recorded", () =>
      Effect.gen(function* () {
        let release = () => {}
        const settling = new Promise<void>((resolve) => {
          release = resolve
        })
        const { lookup, calls, store } = yield* setup("ok", "ok", { settling })
        const fiber = yield* Effect.fork(lookup("microblog", "dev42", yield* payment()))
        while (!calls.some((c) => c.startsWith("settle")))
          yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
        // The request is dropped (its handler interrupted) while the facilitator settles.
        const interrupted = yield* Effect.fork(Fiber.interrupt(fiber))
        release()
        yield* Fiber.join(interrupted)
        expect(yield* lastPaymentState(store)).toEqual(Option.some("settled"))
      })
    )

    it.effect("a settled payment whose record fails is answered all the same", () =>
      Effect.gen(function* () {
        const { lookup, store } = yield* setup("ok", "ok", { recordsSettled: false })
        const result = yield* lookup("microblog", "dev42", yield* payment())
        expect(result.body).toBe("42")
        expect(decodePaymentResponseHeader(result.paymentResponse ?? "")).toMatchObject({ success: true })
        expect(yield* lastPaymentState(store)).toEqual(Option.some("authorized"))
      })
    )

    it.effect(
      "an authorization for another token, amount, spender or payee, or with a far deadline: 402 payment_failed, the facilitator never asked, nothing held",
      () =>
        Effect.gen(function* () {
          const { lookup, calls, store } = yield* setup("ok", "ok")
          for (const overrides of [
            { token: OTHER },
            { amount: (BigInt(requirements.amount) / 2n).toString() },
            { spender: OTHER },
            { to: OTHER },
            { deadline: String(NOW + requirements.maxTimeoutSeconds + PAYMENT_CLOCK_SKEW_SECONDS + 1) }
          ]) {
            const error = yield* Effect.flip(
              lookup("microblog", "dev42", yield* payment(requirements, overrides))
            )
            expect(error._tag).toBe("PaymentFailed")
            expect(yield* lastPaymentState(store)).toEqual(Option.none())
          }
          expect(calls).toEqual([])
        })
    )

    it.effect(
      "two concurrent payments of one payer: the second is 429 rate_limited before anyone is asked, and may be sent again once the first has ended",
      () =>
        Effect.gen(function* () {
          let release = () => {}
          const verifying = new Promise<void>((resolve) => {
            release = resolve
          })
          const { lookup, calls, store } = yield* setup("ok", "ok", { verifying })
          const first = yield* Effect.fork(lookup("microblog", "dev42", yield* payment()))
          while (!calls.some((c) => c.startsWith("verify")))
            yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
          const second = yield* payment()
          const refused = yield* Effect.flip(lookup("microblog", "dev42", second))
          expect(refused._tag).toBe("RateLimited")
          // Its authorization was not held: it is not spent.
          expect(yield* lastPaymentState(store)).toEqual(Option.none())
          expect(calls.map((c) => c.split(" ")[0])).toEqual(["verify"])
          release()
          expect((yield* Fiber.join(first)).body).toBe("42")
          expect((yield* lookup("microblog", "dev42", second)).body).toBe("42")
          expect(calls.map((c) => c.split(" ")[0])).toEqual(["verify", "settle", "verify", "settle"])
        })
    )

    it.effect("a payment whose flow ended in a refusal gives its payer's lease back", () =>
      Effect.gen(function* () {
        const refused = yield* setup("refuse", "ok")
        expect((yield* Effect.flip(refused.lookup("microblog", "dev42", yield* payment())))._tag).toBe(
          "PaymentFailed"
        )
        const paid = yield* setup("ok", "ok")
        expect((yield* paid.lookup("microblog", "dev42", yield* payment())).body).toBe("42")
      })
    )

    /**
     * The attack of a forged authorization naming `PAYER`: sent first, while the facilitator holds
     * verifications, then the payer's own payment beside it. The forged one must be refused before
     * any lease, row or facilitator call, so the payer's own is verified, settled and answered.
     */
    const forgedBesideOwn = (forge: () => Effect.Effect<string>) =>
      Effect.gen(function* () {
        let release = () => {}
        const verifying = new Promise<void>((resolve) => {
          release = resolve
        })
        const { lookup, calls, store } = yield* setup("ok", "ok", { verifying })
        const forged = yield* Effect.fork(lookup("microblog", "dev42", yield* forge()))
        const forgedNonce = nonces
        // Until it is answered, or (were the payer's lease taken for it) waits at the facilitator.
        while (calls.length === 0 && Option.isNone(yield* Fiber.poll(forged)))
          yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
        const own = yield* Effect.fork(lookup("microblog", "dev42", yield* payment()))
        const ownNonce = nonces
        release()
        expect((yield* Fiber.join(own)).body).toBe("42")
        const refused = yield* Effect.flip(Fiber.join(forged))
        expect(refused).toMatchObject({
          _tag: "PaymentFailed",
          message: expect.stringMatching(/not signed by its payer/)
        })
        expect(yield* store.get({ payer: PAYER, nonce: forgedNonce })).toEqual(Option.none())
        // The facilitator heard of the payer's own payment only.
        expect(calls.map((c) => c.split(" ")[0])).toEqual(["verify", "settle"])
        expect(calls.every((c) => c.includes(`"nonce":"${ownNonce}"`))).toBe(true)
      })

    it.effect(
      "an unsigned authorization naming the payer, sent beside the payer's own payment: 402 payment_failed, nothing held, no lease, the facilitator never asked; the payer's own pays",
      () => forgedBesideOwn(() => payment(requirements, { signature: `0x${"11".repeat(65)}` }))
    )

    it.effect(
      "an authorization naming the payer signed by another key, beside the payer's own payment: refused the same way; the payer's own pays",
      () => forgedBesideOwn(() => payment(requirements, {}, devnetAccount(7)))
    )

    it.effect(
      "an authorization whose deadline has passed: 402 payment_failed, nothing held, the facilitator never asked",
      () =>
        Effect.gen(function* () {
          const { lookup, calls, store } = yield* setup("ok", "ok")
          const signature = yield* payment()
          yield* TestClock.adjust(`${requirements.maxTimeoutSeconds + 1} seconds`)
          const error = yield* Effect.flip(lookup("microblog", "dev42", signature))
          expect(error).toMatchObject({
            _tag: "PaymentFailed",
            message: expect.stringMatching(/deadline has passed/)
          })
          expect(yield* lastPaymentState(store)).toEqual(Option.none())
          expect(calls).toEqual([])
        })
    )

    it.effect(
      "a settled payment's row is pruned after its retention; presented again then, it is refused without a facilitator call",
      () =>
        Effect.gen(function* () {
          const { lookup, calls, store } = yield* setup("ok", "ok")
          const signature = yield* payment()
          const id = { payer: PAYER, nonce: nonces }
          expect((yield* lookup("microblog", "dev42", signature)).body).toBe("42")
          yield* TestClock.adjust(
            `${requirements.maxTimeoutSeconds + DEFAULT_PAYMENT_RETENTION_SECONDS} seconds`
          )
          // Another payment's row is written, and the expired ones pruned in passing.
          expect((yield* lookup("microblog", "dev42", yield* payment())).body).toBe("42")
          expect(yield* store.get(id)).toEqual(Option.none())
          expect((yield* Effect.flip(lookup("microblog", "dev42", signature)))._tag).toBe("PaymentFailed")
          expect(calls.map((c) => c.split(" ")[0])).toEqual(["verify", "settle", "verify", "settle"])
        })
    )

    it.effect(
      "a lease whose holder stopped blocks its payer until maxTimeoutSeconds have passed, no longer",
      () =>
        Effect.gen(function* () {
          const { lookup, calls, store } = yield* setup("ok", "ok")
          // A replica took the lease and stopped before giving it back.
          expect(
            yield* store.lease({ payer: PAYER, nonce: ++nonces }, NOW + requirements.maxTimeoutSeconds)
          ).toBe(true)
          expect((yield* Effect.flip(lookup("microblog", "dev42", yield* payment())))._tag).toBe(
            "RateLimited"
          )
          yield* TestClock.adjust(`${requirements.maxTimeoutSeconds - 1} seconds`)
          expect((yield* Effect.flip(lookup("microblog", "dev42", yield* payment())))._tag).toBe(
            "RateLimited"
          )
          expect(calls).toEqual([])
          yield* TestClock.adjust("1 second")
          expect((yield* lookup("microblog", "dev42", yield* payment())).body).toBe("42")
        })
    )
  })
  describe("replays of a kept answer", () => {
    /** A chain whose word on every authorization is `state.now`. */
    const chainSaying = (state: { now: OnChainSettlement }): SettlementChain => ({
      blockNumber: Effect.succeed(1n),
      settlementOf: () => Effect.sync(() => state.now)
    })

    /** The same authorization as anyone can rebuild it from the settlement's calldata: no extensions. */
    const rebuilt = (signature: string) => {
      const { x402Version, accepted, payload } = decodePaymentSignatureHeader(signature) as PaymentPayload
      return encodePaymentSignatureHeader({ x402Version, accepted, payload })
    }
    const withId = (signature: string, id: string) =>
      encodePaymentSignatureHeader({
        ...(decodePaymentSignatureHeader(signature) as PaymentPayload),
        extensions: { "payment-identifier": { info: { required: false, id } } }
      } as PaymentPayload)

    it.effect(
      "a settled answer is given again only with its payment-identifier id and the same request: without the id, with another, or for another handle, the same 402",
      () =>
        Effect.gen(function* () {
          const { lookup, calls } = yield* setup("ok", "ok")
          const signature = yield* payment(requirements, { paymentId: freshId() })
          const paid = yield* lookup("microblog", "dev42", signature)
          expect(paid.body).toBe("42")
          const refusals = [
            yield* Effect.flip(lookup("microblog", "dev42", rebuilt(signature))),
            yield* Effect.flip(lookup("microblog", "dev42", withId(signature, "another-guessed-id-01"))),
            yield* Effect.flip(lookup("microblog", "nosuchuser", signature))
          ]
          for (const refusal of refusals)
            expect(refusal).toMatchObject({ _tag: "PaymentFailed", message: refusals[0]?.message })
          expect(yield* lookup("microblog", "dev42", signature)).toEqual(paid)
          expect(calls.map((c) => c.split(" ")[0])).toEqual(["verify", "settle"])
        })
    )

    it.effect("an answer kept for a payment without a payment-identifier id is not given again", () =>
      Effect.gen(function* () {
        const { lookup } = yield* setup("ok", "ok")
        const signature = yield* payment()
        expect((yield* lookup("microblog", "dev42", signature)).body).toBe("42")
        expect(yield* Effect.flip(lookup("microblog", "dev42", signature))).toMatchObject({
          _tag: "PaymentFailed",
          message: expect.stringMatching(/presented before/)
        })
      })
    )

    it.effect(
      "a settle the facilitator calls settlement_pending is indeterminate (503); mined later, the replay finds it on chain and answers without settling again",
      () =>
        Effect.gen(function* () {
          const onChain: { now: OnChainSettlement } = { now: { spent: false } }
          const { lookup, calls, store } = yield* setup("ok", "ok", {
            chain: chainSaying(onChain),
            settleAnswer: () => ({
              success: false,
              errorReason: "settlement_pending",
              transaction: "0xabc",
              network: "eip155:31337"
            })
          })
          const signature = yield* payment(requirements, { paymentId: freshId() })
          expect((yield* Effect.flip(lookup("microblog", "dev42", signature)))._tag).toBe("Unavailable")
          expect(yield* lastPaymentState(store)).toEqual(Option.some("indeterminate"))
          onChain.now = { spent: true, transaction: Option.some<Hex>(`0x${"ab".repeat(32)}`) }
          const replayed = yield* lookup("microblog", "dev42", signature)
          expect(replayed.body).toBe("42")
          expect(decodePaymentResponseHeader(replayed.paymentResponse ?? "").transaction).toBe(
            `0x${"ab".repeat(32)}`
          )
          expect(yield* lastPaymentState(store)).toEqual(Option.some("settled"))
          expect(calls.map((c) => c.split(" ")[0])).toEqual(["verify", "settle"])
        })
    )

    it.effect("a refusal whose settlement is on chain after all: the answer, recorded settled", () =>
      Effect.gen(function* () {
        const { lookup, store } = yield* setup("ok", "refuse", {
          chain: chainSaying({ now: { spent: true, transaction: Option.some<Hex>(`0x${"cd".repeat(32)}`) } })
        })
        const paid = yield* lookup(
          "microblog",
          "dev42",
          yield* payment(requirements, { paymentId: freshId() })
        )
        expect(paid.body).toBe("42")
        expect(yield* lastPaymentState(store)).toEqual(Option.some("settled"))
      })
    )

    it.effect(
      "a Permit2 nonce the payer cancelled after a settle without answer: not paid, the replay is 402 payment_failed and nothing is settled again",
      () =>
        Effect.gen(function* () {
          const onChain: { now: OnChainSettlement } = { now: { spent: false } }
          const { lookup, calls, store } = yield* setup("ok", "throw", { chain: chainSaying(onChain) })
          const signature = yield* payment(requirements, { paymentId: freshId() })
          expect((yield* Effect.flip(lookup("microblog", "dev42", signature)))._tag).toBe("Unavailable")
          onChain.now = { spent: true, transaction: Option.none() }
          expect(yield* Effect.flip(lookup("microblog", "dev42", signature))).toMatchObject({
            _tag: "PaymentFailed"
          })
          expect(yield* lastPaymentState(store)).toEqual(Option.some("failed"))
          expect(calls.map((c) => c.split(" ")[0])).toEqual(["verify", "settle"])
        })
    )

    it.effect(
      "a retry while the first settlement is under way: 429 rate_limited, one settle; then the answer",
      () =>
        Effect.gen(function* () {
          let release = () => {}
          const settling = new Promise<void>((resolve) => {
            release = resolve
          })
          const { lookup, calls } = yield* setup("ok", "ok", { settling })
          const signature = yield* payment(requirements, { paymentId: freshId() })
          const first = yield* Effect.fork(lookup("microblog", "dev42", signature))
          while (!calls.some((c) => c.startsWith("settle")))
            yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
          expect((yield* Effect.flip(lookup("microblog", "dev42", signature)))._tag).toBe("RateLimited")
          release()
          const paid = yield* Fiber.join(first)
          expect(yield* lookup("microblog", "dev42", signature)).toEqual(paid)
          expect(calls.map((c) => c.split(" ")[0])).toEqual(["verify", "settle"])
        })
    )

    it.effect(
      "a client hanging up while its payment settles: the settlement finishes and is kept; the replay gives its answer",
      () =>
        Effect.gen(function* () {
          let release = () => {}
          const settling = new Promise<void>((resolve) => {
            release = resolve
          })
          const { lookup, calls, store } = yield* setup("ok", "ok", { settling })
          const signature = yield* payment(requirements, { paymentId: freshId() })
          const first = yield* Effect.fork(lookup("microblog", "dev42", signature))
          while (!calls.some((c) => c.startsWith("settle")))
            yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
          const interrupted = yield* Effect.fork(Fiber.interrupt(first))
          release()
          yield* Fiber.join(interrupted)
          expect(yield* lastPaymentState(store)).toEqual(Option.some("settled"))
          const replayed = yield* lookup("microblog", "dev42", signature)
          expect(replayed.body).toBe("42")
          expect(decodePaymentResponseHeader(replayed.paymentResponse ?? "").transaction).toBe("0xfeed")
          expect(calls.map((c) => c.split(" ")[0])).toEqual(["verify", "settle"])
        })
    )
  })
})
