/**
 * The shared last step of every relayed write (the `Relay` service, src/relayer/Relay.ts) around its nonce
 * reservation, over stubs: a held nonce is refused before simulation, a refusal before sending
 * releases the reservation, a sent transaction is stored with its link to it, and a request interrupted once it
 * was handed to the sender, or refused by a sender unsure of its store, keeps it (the transaction may still
 * go out). A paid request's fee is checked against its gas limit at the fee oracle's gas price reading
 * after simulation, before anything is charged. A request's own charge (the unpaid bind budget) is
 * taken after the per-id limit and given back with the reservation when nothing was sent.
 */
import { unsafeFragment } from "@effect/sql/Statement"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Layer } from "effect"
import type { Hex } from "viem"
import { NonceMismatch, RateLimited, SimulationFailed, Unavailable } from "../../schema/errors.js"
import { FeeOracle } from "../../src/relayer/FeeOracle.js"
import { IdRateLimit } from "../../src/relayer/IdRateLimit.js"
import { NonceReservations } from "../../src/relayer/NonceReservations.js"
import { type FeePaid, Relay, type RelayRequest } from "../../src/relayer/Relay.js"
import { RevertCooldowns } from "../../src/relayer/RevertCooldowns.js"
import { TxPreflight } from "../../src/relayer/TxPreflight.js"
import { stubLayer } from "../../src/stubLayer.js"
import {
  HotKeyUnderfunded,
  SendUnavailable,
  TxSender,
  type TxSubmitError
} from "../../src/txsender/TxSender.js"
import { settingsLayer } from "./claimSupport.js"

const VAULT = "0x00000000000000000000000000000000000000e1"
const ID: Hex = `0x${"11".repeat(32)}`
const HASH: Hex = `0x${"22".repeat(32)}`

const request: RelayRequest = {
  id: ID,
  calls: ["0x1234"],
  budget: 100_000n,
  action: "claim",
  reserve: [{ kind: "nonce", value: 7n }]
}

const harness = (options: {
  readonly held?: boolean
  readonly simulation?: "ok" | "fails"
  readonly charge?: "ok" | "limited"
  readonly submit?: Effect.Effect<Hex, TxSubmitError>
  /** The fee oracle's gas price reading; none of its other members is used. */
  readonly gasPrice?: Effect.Effect<bigint, Unavailable>
  /**
   * The race of a revert's record: the cooldown is written just before the reverted transaction's
   * nonces are freed, so it is there once they can be taken (none before).
   */
  readonly cooledOnceFree?: boolean
}) => {
  const log: Array<string> = []
  let taken = false
  const reservations = Layer.succeed(NonceReservations, {
    take: (vault, id, keys) =>
      Effect.suspend(() => {
        log.push(`take ${keys.map((k) => `${k.kind}:${k.value}`).join(",")}`)
        if (options.held === true)
          return Effect.fail(
            new NonceMismatch({ message: "a transaction for this nonce is already in flight" })
          )
        taken = true
        return Effect.succeed({ vault, accountId: id, token: "t" })
      }),
    linkOnStore: () => (hash) => {
      log.push(`link ${hash === HASH}`)
      return unsafeFragment("UPDATE reservations")
    },
    release: () => Effect.sync(() => void log.push("release")),
    storedFor: () => Effect.succeedNone
  })
  const relay = Relay.layer.pipe(
    Layer.provide(reservations),
    Layer.provide(
      options.cooledOnceFree === true
        ? Layer.succeed(RevertCooldowns, {
            check: () =>
              Effect.suspend(() => {
                log.push("cooldown")
                return taken
                  ? Effect.fail(new RateLimited({ message: "reverted on chain", retryAfterSeconds: 3600 }))
                  : Effect.void
              }),
            settled: () => Effect.void
          })
        : RevertCooldowns.test
    ),
    Layer.provide(
      Layer.succeed(TxPreflight, {
        check: () =>
          Effect.suspend(() => {
            log.push("simulate")
            return options.simulation === "fails"
              ? Effect.fail(new SimulationFailed({ message: "reverted" }))
              : Effect.succeed({ estimate: 50_000n, gasLimit: 60_000n })
          })
      })
    ),
    Layer.provide(
      Layer.succeed(IdRateLimit, {
        charge: () =>
          Effect.suspend(() => {
            log.push("charge")
            return options.charge === "limited"
              ? Effect.fail(new RateLimited({ message: "slow down", retryAfterSeconds: 1 }))
              : Effect.void
          })
      })
    ),
    Layer.provide(
      TxSender.test({
        address: VAULT,
        // As the sender does: the request's own write goes with the stored transaction.
        submit: (tx) =>
          Effect.zipRight(
            Effect.sync(() => void log.push("submit")),
            (options.submit ?? Effect.succeed(HASH)).pipe(Effect.tap((hash) => void tx.storedWith?.(hash)))
          )
      })
    ),
    Layer.provide(
      stubLayer(FeeOracle, {
        quote: "function",
        gasBudget: "function",
        gasPrice: "effect",
        isCurrent: "function"
      })(
        options.gasPrice === undefined
          ? {}
          : { gasPrice: Effect.tap(options.gasPrice, () => Effect.sync(() => void log.push("gas price"))) }
      )
    ),
    Layer.provide(settingsLayer())
  )
  const send = (request: RelayRequest) =>
    Effect.flatMap(Relay, (r) => r.send(request)).pipe(Effect.provide(relay))
  const sendPaid = (request: RelayRequest, paid: FeePaid) =>
    Effect.flatMap(Relay, (r) => r.sendPaid(request, paid)).pipe(Effect.provide(relay))
  return { log, send, sendPaid }
}

/** A fee of `fee` units of an asset worth one wei a unit. */
const paying = (fee: bigint): FeePaid => ({ fee, field: "claim.relayerFee", price: { num: 1n, den: 1n } })

describe("relay with nonce reservations", () => {
  it.effect("sent: reserved first, then simulated, charged, and submitted with its link", () =>
    Effect.gen(function* () {
      const { log, send } = harness({})
      expect(yield* send(request)).toEqual({ txHash: HASH })
      expect(log).toEqual(["take nonce:7", "simulate", "charge", "submit", "link true"])
    })
  )

  it.effect(
    "a revert's cooldown written as its nonces were freed is seen by the request that takes them",
    () =>
      Effect.gen(function* () {
        const { log, send } = harness({ cooledOnceFree: true })
        const exit = yield* Effect.exit(send(request))
        expect(exit).toEqual(Exit.fail(expect.objectContaining({ _tag: "RateLimited" })))
        expect(log).toEqual(["take nonce:7", "cooldown", "release"])
      })
  )

  it.effect("a held nonce is 409 nonce_mismatch before simulation; nothing else happens", () =>
    Effect.gen(function* () {
      const { log, send } = harness({ held: true })
      const exit = yield* Effect.exit(send(request))
      expect(exit).toEqual(Exit.fail(expect.objectContaining({ _tag: "NonceMismatch" })))
      expect(log).toEqual(["take nonce:7"])
    })
  )

  it.effect("refused before sending (simulation, rate limit, sender): released", () =>
    Effect.gen(function* () {
      const simulation = harness({ simulation: "fails" })
      yield* Effect.exit(simulation.send(request))
      expect(simulation.log).toEqual(["take nonce:7", "simulate", "release"])

      const limited = harness({ charge: "limited" })
      yield* Effect.exit(limited.send(request))
      expect(limited.log).toEqual(["take nonce:7", "simulate", "charge", "release"])

      const refused = harness({ submit: Effect.fail(new HotKeyUnderfunded()) })
      const exit = yield* Effect.exit(refused.send(request))
      expect(exit).toEqual(Exit.fail(expect.objectContaining({ _tag: "Unavailable" })))
      expect(refused.log).toEqual(["take nonce:7", "simulate", "charge", "submit", "release"])
    })
  )

  it.effect("interrupted while the sender has it: kept (it may still be sent)", () =>
    Effect.gen(function* () {
      const submitted = yield* Deferred.make<void>()
      const { log, send } = harness({
        submit: Effect.zipRight(Deferred.succeed(submitted, undefined), Effect.never)
      })
      const fiber = yield* Effect.fork(send(request))
      yield* Deferred.await(submitted)
      yield* Fiber.interrupt(fiber)
      expect(log).toEqual(["take nonce:7", "simulate", "charge", "submit"])
    })
  )

  it.effect("refused by a sender unsure whether it stored the transaction: kept (it may still be sent)", () =>
    Effect.gen(function* () {
      const unsure = harness({ submit: Effect.fail(new SendUnavailable({ reason: "store_unsure" })) })
      const exit = yield* Effect.exit(unsure.send(request))
      expect(exit).toEqual(
        Exit.fail(
          expect.objectContaining({
            _tag: "Unavailable",
            message: expect.stringMatching(/may still be sent/)
          })
        )
      )
      expect(unsure.log).toEqual(["take nonce:7", "simulate", "charge", "submit"])
      // A store that refused the statement outright stored nothing: released.
      const refused = harness({ submit: Effect.fail(new SendUnavailable({ reason: "store" })) })
      yield* Effect.exit(refused.send(request))
      expect(refused.log).toEqual(["take nonce:7", "simulate", "charge", "submit", "release"])
    })
  )
})

describe("relay of a request with a charge of its own (the unpaid bind budget)", () => {
  /** `request` with a charge that logs itself and its give-back, or refuses as a spent budget. */
  const charged = (log: Array<string>, spent = false): RelayRequest => ({
    ...request,
    charge: Effect.suspend(() => {
      log.push("budget")
      return spent
        ? Effect.fail(new RateLimited({ message: "spent", retryAfterSeconds: 86_400 }))
        : Effect.succeed(Effect.sync(() => void log.push("give back")))
    })
  })

  it.effect("taken after the per-id limit, kept once sent, given back when nothing is sent", () =>
    Effect.gen(function* () {
      const sent = harness({})
      expect(yield* sent.send(charged(sent.log))).toEqual({ txHash: HASH })
      expect(sent.log).toEqual(["take nonce:7", "simulate", "charge", "budget", "submit", "link true"])

      // Not reached when the simulation or the per-id limit refuses.
      const limited = harness({ charge: "limited" })
      yield* Effect.exit(limited.send(charged(limited.log)))
      expect(limited.log).toEqual(["take nonce:7", "simulate", "charge", "release"])

      const spent = harness({})
      const exit = yield* Effect.exit(spent.send(charged(spent.log, true)))
      expect(exit).toEqual(
        Exit.fail(expect.objectContaining({ _tag: "RateLimited", retryAfterSeconds: 86_400 }))
      )
      expect(spent.log).toEqual(["take nonce:7", "simulate", "charge", "budget", "release"])

      const refused = harness({ submit: Effect.fail(new HotKeyUnderfunded()) })
      yield* Effect.exit(refused.send(charged(refused.log)))
      expect(refused.log).toEqual([
        "take nonce:7",
        "simulate",
        "charge",
        "budget",
        "submit",
        "give back",
        "release"
      ])

      // A sender unsure of its store may still send it: the charge stays with the reservation.
      const unsure = harness({ submit: Effect.fail(new SendUnavailable({ reason: "store_unsure" })) })
      yield* Effect.exit(unsure.send(charged(unsure.log)))
      expect(unsure.log).toEqual(["take nonce:7", "simulate", "charge", "budget", "submit"])
    })
  )
})

describe("relay of a paid request", () => {
  it.effect(
    "paid: the fee checked against the gas limit at the oracle's gas price after simulation, before the charge",
    () =>
      Effect.gen(function* () {
        // The stub's gas limit is 60k: at 3 wei a gas, 180k units.
        const covered = harness({ gasPrice: Effect.succeed(3n) })
        expect(yield* covered.sendPaid(request, paying(180_000n))).toEqual({ txHash: HASH })
        expect(covered.log).toEqual([
          "take nonce:7",
          "simulate",
          "gas price",
          "charge",
          "submit",
          "link true"
        ])

        const short = harness({ gasPrice: Effect.succeed(3n) })
        const exit = yield* Effect.exit(short.sendPaid(request, paying(179_999n)))
        expect(exit).toEqual(
          Exit.fail(
            expect.objectContaining({
              _tag: "FeeTooLow",
              message: expect.stringMatching(
                /gas limit of 60000 at the current gas price: it needs at least 180000$/
              )
            })
          )
        )
        expect(short.log).toEqual(["take nonce:7", "simulate", "gas price", "release"])
      })
  )

  it.effect(
    "paid, with no gas price reading (stale or never read): 503, not the quote's price; released",
    () =>
      Effect.gen(function* () {
        const { log, sendPaid } = harness({
          gasPrice: Effect.fail(new Unavailable({ message: "the gas price is stale: no good read for 61 s" }))
        })
        const exit = yield* Effect.exit(sendPaid(request, paying(10n ** 30n)))
        expect(exit).toEqual(Exit.fail(expect.objectContaining({ _tag: "Unavailable" })))
        expect(log).toEqual(["take nonce:7", "simulate", "release"])
      })
  )
})
