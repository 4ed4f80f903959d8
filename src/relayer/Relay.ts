/**
 * The last step of every relayed write (docs/relayer.md §4 rule 5, §8): the nonces the
 * transaction will consume reserved (src/relayer/reservations.ts), the steps batched into one
 * transaction, simulated and gas-capped, the account's rate limit charged only once the vault has
 * accepted the simulation, and the transaction handed to the hot key's sender.
 */

import { Context, Effect, Exit, Layer } from "effect"
import type { NonEmptyReadonlyArray } from "effect/Array"
import type { Hex } from "viem"
import type {
  GasCapExceeded,
  NonceMismatch,
  RateLimited,
  SimulationFailed,
  Unavailable
} from "../../schema/errors.js"
import type { Bytes32 } from "../../schema/primitives.js"
import type { TxHashResponse } from "../../schema/relayer.js"
import { RelayerSettings } from "../config/relayer.js"
import { TxSender, txSubmitErrorToApi } from "../txsender/TxSender.js"
import { batchCalls } from "./multicall.js"
import { IdRateLimit } from "./rateLimits.js"
import { NonceReservations, type ReservationKey } from "./reservations.js"
import { TxPreflight } from "./simulate.js"

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
}

export type RelayError = NonceMismatch | SimulationFailed | GasCapExceeded | RateLimited | Unavailable

export interface RelayShape {
  /** Reserves, simulates, caps, charges and hands the transaction to the sender. */
  readonly send: (request: RelayRequest) => Effect.Effect<TxHashResponse, RelayError>
}

/** The one write path every relayed endpoint (claims, owner actions, bind transactions) ends in. */
export class Relay extends Context.Tag("Relay")<Relay, RelayShape>() {
  static readonly layer: Layer.Layer<
    Relay,
    never,
    RelayerSettings | TxPreflight | IdRateLimit | TxSender | NonceReservations
  > = Layer.effect(
    Relay,
    Effect.gen(function* () {
      const vault = (yield* RelayerSettings).vault
      const preflight = yield* TxPreflight
      const idLimit = yield* IdRateLimit
      const sender = yield* TxSender
      const reservations = yield* NonceReservations
      const send = (request: RelayRequest): Effect.Effect<TxHashResponse, RelayError> =>
        Effect.suspend(() => {
          // Set once the request is handed to the sender: interrupted after that, it may still be sent.
          let handedOver = false
          // The sender could not tell whether it stored the transaction, which then goes out.
          let maybeStored = false
          return Effect.acquireUseRelease(
            reservations.take(vault, request.id, request.reserve),
            (reservation) =>
              Effect.gen(function* () {
                const data = batchCalls(request.calls)
                const { gasLimit } = yield* preflight.check({
                  data,
                  budget: request.budget,
                  action: request.action
                })
                yield* idLimit.charge(request.id)
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
            // linked if the sender stored it, else until it expires.
            (reservation, exit) =>
              Exit.isSuccess(exit) || (handedOver && Exit.isInterrupted(exit)) || maybeStored
                ? Effect.void
                : reservations.release(reservation)
          )
        })
      return { send }
    })
  )
}
