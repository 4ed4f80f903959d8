/**
 * The last step of every relayed write (docs/relayer.md §4 rule 5, §8): the nonces the
 * transaction will consume reserved (src/relayer/NonceReservations.ts), an account or owner
 * contract on a revert cooldown refused (src/relayer/RevertCooldowns.ts), the steps batched into one
 * transaction, simulated and gas-capped, a paid request's fee checked against the gas limit it
 * would be sent with at the current gas price, the account's rate limit (and an unpaid bind's
 * daily budget) charged only once the vault has accepted the simulation, and the transaction
 * handed to the hot key's sender.
 */

import { Context, Data, Effect, Exit, Layer, Option } from "effect"
import type { NonEmptyReadonlyArray } from "effect/Array"
import type { Address, Hex } from "viem"
import {
  FeeTooLow,
  type GasCapExceeded,
  type NonceMismatch,
  type RateLimited,
  type SimulationFailed,
  type Unavailable
} from "../../schema/errors.js"
import type { Bytes32 } from "../../schema/primitives.js"
import type { TxHashResponse } from "../../schema/relayer.js"
import { type NativePrice, RelayerSettings } from "../config/relayer.js"
import { TxSender, txSubmitErrorToApi } from "../txsender/TxSender.js"
import { FeeOracle, type FeeOracleShape, type QuoteRequest } from "./FeeOracle.js"
import { feeCovering } from "./fees/cover.js"
import { IdRateLimit } from "./IdRateLimit.js"
import { batchCalls } from "./multicall.js"
import { NonceReservations, type ReservationKey } from "./NonceReservations.js"
import { RevertCooldowns, registersAccount } from "./RevertCooldowns.js"
import { TxPreflight } from "./TxPreflight.js"
import { minimumFee } from "./validation/claimRules.js"

export interface RelayRequest {
  /** The account whose rate limit the transaction is charged to. */
  readonly id: Hex
  /** Vault calls in order; one call is sent unwrapped, several as one `multicall`. */
  readonly calls: NonEmptyReadonlyArray<Hex>
  /** The request's gas budget (its quote's `gasEstimate`). */
  readonly budget: bigint
  /** Labels the simulation-failure metric. */
  readonly action: string
  /**
   * Every nonce of `id` the transaction consumes: any two transactions that would consume the
   * same one conflict, and the later request is refused before simulation.
   */
  readonly reserve: NonEmptyReadonlyArray<ReservationKey>
  /**
   * Owners whose ERC-1271 contract the vault asks to check a signature: when `calls` register the
   * account, their code hashes are refused while on a revert cooldown, like the account itself.
   */
  readonly erc1271Owners?: ReadonlyArray<Address>
  /**
   * Whether the same calls stored before answer this request with their hash (`replay`), here
   * too when a take is refused. False for a call that repeats across different requests
   * (finalize-bind is `finalizeBind(id)` for every bind of the account).
   */
  readonly replayable?: boolean
  /**
   * A charge beyond the per-id limit (the unpaid bind budget, src/relayer/BindBudget.ts), taken
   * right after it; what it succeeds with gives the charge back, and runs when the transaction is
   * then not sent.
   */
  readonly charge?: Effect.Effect<Effect.Effect<void>, RateLimited | Unavailable>
}

/**
 * What a paid request's fee is worth: the fee, and the asset's price its quote was converted at.
 * The gas price is not the quote's: see `sendPaid`.
 */
export interface FeePaid {
  /** In base units of the asset. */
  readonly fee: bigint
  /** Names the fee in the refusal: `claim.relayerFee`, `fee.claim.relayerFee`. */
  readonly field: string
  readonly price: NativePrice
}

/**
 * Rule 4 of a paid request (docs/relayer.md §4): its `fee`, named `field`, against the current
 * quote for `request` less `QUOTE_TOLERANCE_BPS`; what `sendPaid` then checks against the gas.
 */
export const feePaidAgainstQuote = (
  oracle: FeeOracleShape,
  request: QuoteRequest,
  paying: {
    readonly fee: bigint
    readonly field: string
    readonly toleranceBps: number
    readonly what: string
  }
) =>
  Effect.flatMap(oracle.quote(request), (quote) =>
    paying.fee < minimumFee(quote.relayerFee, paying.toleranceBps)
      ? Effect.fail(
          new FeeTooLow({
            message: `${paying.field} is below the current quote of ${quote.relayerFee} for this ${paying.what}`
          })
        )
      : Effect.succeed<FeePaid>({ fee: paying.fee, field: paying.field, price: quote.price })
  )

export type RelayError = NonceMismatch | SimulationFailed | GasCapExceeded | RateLimited | Unavailable

export interface RelayShape {
  /**
   * The hash this relayer stored the same calls under, unless that transaction was dropped: a
   * signed request sent again, pending or mined, is answered as it was the first time
   * (docs/relayer.md §4 "Retries"). Checked before a request's rules, which a request already
   * executed would no longer pass.
   */
  readonly replay: (
    calls: NonEmptyReadonlyArray<Hex>
  ) => Effect.Effect<Option.Option<TxHashResponse>, Unavailable>
  /** Refuses cooldowns, reserves, simulates, caps, charges and hands the transaction to the sender. */
  readonly send: (request: RelayRequest) => Effect.Effect<TxHashResponse, RelayError>
  /**
   * `send` for a request that pays: refused with 402 `fee_too_low` when its fee does not cover the
   * gas limit at the fee oracle's current gas price reading, and 503 `unavailable` when there is
   * none (docs/relayer.md §8 "Gas cap and fee margin").
   */
  readonly sendPaid: (
    request: RelayRequest,
    paid: FeePaid
  ) => Effect.Effect<TxHashResponse, RelayError | FeeTooLow>
}

/**
 * The refusal of a request whose nonce a mined transaction consumed, other than its own stored one
 * (docs/relayer.md §4 "Retries").
 */
export const nonceUsed = (accountNonce: bigint) =>
  `the nonce of this request is used: no transaction of this request is on record here, and the account's nonce is now ${accountNonce}; sign a new request at that nonce`

/** A refused take whose request turned out stored already: answered with its hash. */
class Replayed extends Data.TaggedError("Replayed")<{ readonly response: TxHashResponse }> {}

/** The one write path every relayed endpoint (claims, owner actions, bind transactions) ends in. */
export class Relay extends Context.Tag("Relay")<Relay, RelayShape>() {
  static readonly layer: Layer.Layer<
    Relay,
    never,
    RelayerSettings | TxPreflight | IdRateLimit | TxSender | NonceReservations | RevertCooldowns | FeeOracle
  > = Layer.effect(
    Relay,
    Effect.gen(function* () {
      const vault = (yield* RelayerSettings).vault
      const preflight = yield* TxPreflight
      const idLimit = yield* IdRateLimit
      const sender = yield* TxSender
      const reservations = yield* NonceReservations
      const cooldowns = yield* RevertCooldowns
      const oracle = yield* FeeOracle
      const replay: RelayShape["replay"] = (calls) =>
        Effect.map(reservations.storedFor(vault, batchCalls(calls)), (hash) =>
          Option.map(hash, (txHash) => ({ txHash: txHash as Bytes32 }))
        )
      /** `covered` refuses a gas limit the request does not pay for. */
      const relay = <E>(
        request: RelayRequest,
        covered: (gasLimit: bigint) => Effect.Effect<void, E>
      ): Effect.Effect<TxHashResponse, RelayError | E> =>
        Effect.suspend(() => {
          // Set once the request is handed to the sender: interrupted after that, it may still be sent.
          let handedOver = false
          // The sender could not tell whether it stored the transaction, which then goes out.
          let maybeStored = false
          // Gives back `request.charge` once taken.
          let giveBack: Effect.Effect<void> = Effect.void
          return Effect.acquireUseRelease(
            reservations.take(vault, request.id, request.reserve).pipe(
              // Held by this very request, stored since its replay was looked up: its hash.
              Effect.catchTag(
                "NonceMismatch",
                (refused): Effect.Effect<never, NonceMismatch | Replayed | Unavailable> =>
                  request.replayable === false
                    ? Effect.fail(refused)
                    : Effect.flatMap(
                        replay(request.calls),
                        (found): Effect.Effect<never, NonceMismatch | Replayed> =>
                          Option.isSome(found)
                            ? Effect.fail(new Replayed({ response: found.value }))
                            : Effect.fail(refused)
                      )
              )
            ),
            (reservation) =>
              Effect.gen(function* () {
                // Once the nonces are ours: the sender records a revert's cooldown before it frees
                // the reverted transaction's nonces, so a request that could take them sees it.
                yield* cooldowns.check(
                  request.id,
                  request.erc1271Owners ?? [],
                  registersAccount(request.calls)
                )
                const data = batchCalls(request.calls)
                const { gasLimit } = yield* preflight.check({
                  data,
                  budget: request.budget,
                  action: request.action
                })
                yield* covered(gasLimit)
                yield* idLimit.charge(request.id)
                if (request.charge !== undefined) giveBack = yield* request.charge
                handedOver = true
                const storedWith = reservations.linkOnStore(reservation)
                const txHash = yield* sender
                  .submit({
                    to: vault,
                    data,
                    gas: gasLimit,
                    ...(storedWith === undefined ? {} : { storedWith })
                  })
                  .pipe(
                    Effect.tapError((error) =>
                      Effect.sync(() => {
                        maybeStored = error._tag === "SendUnavailable" && error.reason === "store_unsure"
                      })
                    ),
                    Effect.mapError(txSubmitErrorToApi)
                  )
                return { txHash: txHash as Bytes32 }
              }),
            // Refused before sending, or refused by the sender (which then stored or kept nothing):
            // the nonces are free again. Interrupted once handed over, or refused by a sender
            // unsure of its store, the transaction may go out anyway, so the reservation stays:
            // linked if the sender stored it, else until it expires. So does the request's own
            // charge: given back only with the nonces, when nothing can go out.
            (reservation, exit) =>
              Exit.isSuccess(exit) || (handedOver && Exit.isInterrupted(exit)) || maybeStored
                ? Effect.void
                : Effect.zipRight(giveBack, reservations.release(reservation))
          ).pipe(
            Effect.catchIf(
              (error): error is Replayed => error instanceof Replayed,
              (replayed) => Effect.succeed(replayed.response)
            )
          )
        })
      return {
        replay,
        send: (request) => relay(request, () => Effect.void),
        sendPaid: (request, paid) =>
          relay(request, (gasLimit) =>
            // The most gas the transaction may burn, at the price it pays per gas if sent now: the
            // quote's own may be a quote's lifetime old, priced when gas was cheaper. No reading
            // (stale or never read) is 503, as a quote would be, not the quote's price: that
            // fallback would let through exactly what this check refuses, at a time the relayer
            // cannot see the price it sends at.
            Effect.flatMap(oracle.gasPrice, (gasPrice) => {
              const needed = feeCovering(gasLimit, gasPrice, paid.price)
              return paid.fee >= needed
                ? Effect.void
                : Effect.fail(
                    new FeeTooLow({
                      message: `${paid.field} does not pay for this transaction's gas limit of ${gasLimit} at the current gas price: it needs at least ${needed}`
                    })
                  )
            })
          )
      }
    })
  )
}
