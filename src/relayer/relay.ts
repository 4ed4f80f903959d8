/**
 * The last step of every relayed write (spec/relayer.md §4 rule 5, §8): the nonces the
 * transaction will consume reserved (src/relayer/reservations.ts), the steps batched into one
 * transaction, simulated and gas-capped, the account's rate limit charged only once the vault has
 * accepted the simulation, and the transaction handed to the hot key's sender.
 */

import { Effect, Exit } from "effect"
import type { NonEmptyReadonlyArray } from "effect/Array"
import type { Address, Hex } from "viem"
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
import { TxSender, type TxSenderShape, txSubmitErrorToApi } from "../txsender/TxSender.js"
import { AccountReader } from "./AccountReader.js"
import { FeeOracle } from "./FeeOracle.js"
import { batchCalls } from "./multicall.js"
import { IdRateLimit, type IdRateLimitShape } from "./rateLimits.js"
import { NonceReservations, type NonceReservationsShape, type ReservationKey } from "./reservations.js"
import { TxPreflight, type TxPreflightShape } from "./simulate.js"
import { DenyList } from "./validation/denyList.js"
import { VaultSignatures } from "./validation/signatures.js"

/** The services every owner-signed write path (claims, owner actions) is built from. */
export type WritePathServices =
  | RelayerSettings
  | AccountReader
  | DenyList
  | VaultSignatures
  | FeeOracle
  | TxPreflight
  | IdRateLimit
  | TxSender
  | NonceReservations

export interface RelayDeps {
  readonly vault: Address
  readonly preflight: TxPreflightShape
  readonly idLimit: IdRateLimitShape
  readonly sender: TxSenderShape
  readonly reservations: NonceReservationsShape
}

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

export const relay =
  (deps: RelayDeps) =>
  (request: RelayRequest): Effect.Effect<TxHashResponse, RelayError> =>
    Effect.suspend(() => {
      // Set once the request is handed to the sender: interrupted after that, it may still be sent.
      let handedOver = false
      return Effect.acquireUseRelease(
        deps.reservations.take(deps.vault, request.id, request.reserve),
        (reservation) =>
          Effect.gen(function* () {
            const data = batchCalls(request.calls)
            const { gasLimit } = yield* deps.preflight.check({
              data,
              budget: request.budget,
              action: request.action
            })
            yield* deps.idLimit.charge(request.id)
            handedOver = true
            const txHash = yield* deps.sender
              .submit({ to: deps.vault, data, gas: gasLimit })
              .pipe(Effect.mapError(txSubmitErrorToApi))
            yield* deps.reservations.link(reservation, txHash)
            return { txHash: txHash as Bytes32 }
          }),
        // Refused before sending, or refused by the sender (which then stored or kept nothing):
        // the nonces are free again. Interrupted once handed over, the transaction may go out
        // anyway, so the unlinked reservation is left to expire instead.
        (reservation, exit) =>
          Exit.isSuccess(exit) || (handedOver && Exit.isInterrupted(exit))
            ? Effect.void
            : deps.reservations.release(reservation)
      )
    })

/** `relay` over the relayer's own preflight, account limits, sender and nonce reservations. */
export const makeRelay: Effect.Effect<
  (request: RelayRequest) => Effect.Effect<TxHashResponse, RelayError>,
  never,
  RelayerSettings | TxPreflight | IdRateLimit | TxSender | NonceReservations
> = Effect.gen(function* () {
  const settings = yield* RelayerSettings
  return relay({
    vault: settings.vault,
    preflight: yield* TxPreflight,
    idLimit: yield* IdRateLimit,
    sender: yield* TxSender,
    reservations: yield* NonceReservations
  })
})

/** Everything an owner-signed write path works with, gathered once when its layer is built. */
export const writePath = Effect.gen(function* () {
  const settings = yield* RelayerSettings
  return {
    settings,
    accounts: yield* AccountReader,
    denyList: yield* DenyList,
    signatures: yield* VaultSignatures,
    oracle: yield* FeeOracle,
    sender: yield* TxSender,
    send: yield* makeRelay,
    /** The claim and consolidation rules of this deployment. */
    rules: {
      settlementAsset: settings.settlementAsset,
      shieldAdapter: settings.shieldAdapter,
      quotedFullBalance: settings.quotedFullBalance
    }
  }
})
