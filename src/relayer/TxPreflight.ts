/**
 * The last checks before a relayed transaction is sent (docs/relayer.md §4 rule 5, §8): simulate
 * it from the hot key, so the vault itself judges everything the relayer could not (ERC-1271
 * owners, balances, the swap, the shield adapter), and refuse it when its gas exceeds the request's
 * gas budget times `GAS_CAP_BPS`. One `eth_estimateGas` does both: it executes the transaction and
 * answers a revert with the revert data, which is decoded as an `eth_call`'s would be. The gas limit
 * sent is the estimate times `GAS_LIMIT_MULTIPLIER_BPS`.
 */
import { Context, Effect, Layer } from "effect"
import type { Hex } from "viem"
import { feeVaultAbi } from "../../contracts/abi.js"
import { GasCapExceeded, SimulationFailed, type Unavailable } from "../../schema/errors.js"
import { ChainClient, type ChainRequestError, type ChainReverted } from "../chain/ChainClient.js"
import { chainUnavailable } from "../chain/errors.js"
import { RelayerSettings } from "../config/relayer.js"
import { TxSender } from "../txsender/TxSender.js"
import { recordSimulationFailure } from "./metrics.js"

export interface PreflightRequest {
  /** Vault calldata (see `multicall.ts`). */
  readonly data: Hex
  /** The request's gas budget (the quote's `gasEstimate`). */
  readonly budget: bigint
  /** Labels the simulation-failure metric: `claim`, `consolidate`, ... */
  readonly action: string
}

export interface Preflight {
  readonly estimate: bigint
  /** What to send the transaction with. */
  readonly gasLimit: bigint
}

export interface TxPreflightShape {
  readonly check: (
    request: PreflightRequest
  ) => Effect.Effect<Preflight, SimulationFailed | GasCapExceeded | Unavailable>
}

const BPS = 10_000n

const ceilBps = (value: bigint, bps: number): bigint => (value * BigInt(bps) + BPS - 1n) / BPS

export class TxPreflight extends Context.Tag("TxPreflight")<TxPreflight, TxPreflightShape>() {
  static readonly layer: Layer.Layer<TxPreflight, never, ChainClient | RelayerSettings | TxSender> =
    Layer.effect(
      TxPreflight,
      Effect.gen(function* () {
        const chain = yield* ChainClient
        const settings = yield* RelayerSettings
        const sender = yield* TxSender
        const refuse =
          (action: string) =>
          (error: ChainRequestError | ChainReverted): Effect.Effect<never, SimulationFailed | Unavailable> =>
            error._tag === "ChainReverted"
              ? Effect.zipRight(
                  recordSimulationFailure(action, error.errorName),
                  Effect.fail(
                    new SimulationFailed({ message: `the transaction would revert: ${error.description}` })
                  )
                )
              : Effect.fail(chainUnavailable())
        const tx = (data: Hex) => ({ from: sender.address, to: settings.vault, data, errorAbi: feeVaultAbi })
        return {
          check: ({ data, budget, action }) =>
            Effect.gen(function* () {
              const estimate = yield* chain.estimateGas(tx(data)).pipe(Effect.catchAll(refuse(action)))
              const cap = (budget * BigInt(settings.gasCapBps)) / BPS
              if (estimate > cap)
                return yield* new GasCapExceeded({
                  message: `estimated gas ${estimate} is above this request's cap of ${cap}`
                })
              return { estimate, gasLimit: ceilBps(estimate, settings.gasLimitMultiplierBps) }
            })
        }
      })
    )
}
