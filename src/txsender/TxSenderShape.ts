/**
 * What callers of the sender see: the request, the sender's operations, and the refusals of a
 * submission (each means nothing was sent). Spec: relayer.md §2 TxStatus and §3 (every hash of a
 * replaced transaction reports the one that was mined).
 */
import type * as Statement from "@effect/sql/Statement"
import { Data, type Effect } from "effect"
import type { Address, Hex } from "viem"
import { Unavailable } from "../../schema/errors.js"
import type { TxStatus } from "../../schema/relayer.js"
import { CHAIN_UNAVAILABLE } from "../chain/errors.js"

export interface TxRequest {
  readonly to: Address
  readonly data: Hex
  readonly value?: bigint
  /** Gas limit to send with (the pipeline already applied GAS_LIMIT_MULTIPLIER_BPS). */
  readonly gas: bigint
  /**
   * The requester's own write, given the transaction's first hash and made by the statement that
   * stores the transaction, before it is broadcast: durable with it, or not at all. One
   * data-modifying statement (the relayer's nonce reservations tie themselves to the hash).
   */
  readonly storedWith?: (txHash: Hex) => Statement.Fragment
}

/** The hot key cannot pay for the transaction: an operator must top it up. */
export class HotKeyUnderfunded extends Data.TaggedError("HotKeyUnderfunded")<{}> {
  override get message() {
    return "the relayer's hot key cannot pay for gas"
  }
}

const unavailableMessages = {
  chain: CHAIN_UNAVAILABLE,
  store: "the transaction store is not answering",
  store_unsure:
    "the transaction store did not confirm the transaction; it may still be sent, so wait before signing it again",
  lock: "another relayer replica is holding the hot key",
  stopping: "the relayer is shutting down",
  internal: "the transaction sender failed"
} as const

/**
 * Nothing was sent: the chain, the store or the key's lock could not be had, or the sender is
 * stopping. Except `store_unsure`: the store's answer was lost, and what it stored is sent.
 */
export class SendUnavailable extends Data.TaggedError("SendUnavailable")<{
  readonly reason: keyof typeof unavailableMessages
}> {
  override get message() {
    return unavailableMessages[this.reason]
  }
}

/** The node refused the transaction itself (not its nonce, fee or funds); nothing was sent. */
export class TxRejected extends Data.TaggedError("TxRejected")<{}> {
  override get message() {
    return "the node refused the transaction"
  }
}

export type TxSubmitError = HotKeyUnderfunded | SendUnavailable | TxRejected

/** The refusal a client sees for a failed submission: 503 `unavailable`, nothing internal. */
export const txSubmitErrorToApi = (error: TxSubmitError): Unavailable =>
  new Unavailable({
    message: error._tag === "TxRejected" ? "the transaction could not be sent" : error.message
  })

export interface TxSenderShape {
  /** The hot key's address. */
  readonly address: Address
  /** Signs with the next nonce, stores the signed transaction, then broadcasts; returns its hash. */
  readonly submit: (request: TxRequest) => Effect.Effect<Hex, TxSubmitError>
  /** pending | success (with blockNumber) | reverted | unknown; any hash it was ever sent under follows the mined one. */
  readonly status: (hash: Hex) => Effect.Effect<TxStatus, Unavailable>
}

/** A request of this sender found mined, as the monitor records it. */
export interface SettledTx {
  readonly to: Address
  readonly data: Hex
  /** `cancelled`: the no-op that replaced it was mined instead. */
  readonly outcome: "success" | "reverted" | "cancelled"
  /** The hash that was mined. */
  readonly hash: Hex
  readonly blockNumber: bigint
}

/**
 * Told of the requests each monitor round finds mined, before it records them: what the observer
 * writes is in place before anything reading the record (the relayer's nonce reservations, which
 * free with it) learns of them. The relayer's revert cooldowns (docs/relayer.md §8). It must not
 * fail; the monitor waits for it, so it should be quick. Told again should the record then fail.
 */
export type SettledObserver = (settled: ReadonlyArray<SettledTx>) => Effect.Effect<void>

export interface SenderState {
  readonly address: Address
  /** Transactions sent and not yet mined or dropped. */
  readonly pending: number
  /** The nonce the next transaction gets (unless another sender uses it first). */
  readonly nextNonce: bigint
  /** Native balance in wei, as of the monitor's last round. */
  readonly balance: bigint
}
