/**
 * The sender's decisions, pure: given what the store holds of the hot key's transactions and what
 * the chain said of them, which to settle, re-sign at a new nonce, re-broadcast or replace at
 * their nonce (with which fees), which nonces to fill with no-ops, and which mined ones a reorg
 * moved or took out. The shells (`submit.ts`, `monitor.ts`) read that state, ask these, and carry
 * the answer out; nothing here signs, sends, reads or writes.
 *
 * Spec: relayer.md §3 (a replaced transaction's hashes report the status of the one mined) and
 * §2 TxStatus; settings `TX_REPLACE_AFTER_SECONDS`, `TX_MAX_REPLACEMENTS`, `TX_MAX_FEE_GWEI`,
 * `TX_CONFIRMATIONS` in the README.
 */
import type { Hex } from "viem"
import type { RpcRejectionKind } from "../chain/ChainClient.js"
import { type Fees, replacementFees } from "./fees.js"
import type { MinedOutcome, StoredAttempt, StoredTx } from "./store.js"

// ---------------------------------------------------------------------------------------------
// Shared figures

export const maxBig = (a: bigint, b: bigint) => (a > b ? a : b)

export const feesOf = (attempt: Fees): Fees => ({
  maxFeePerGas: attempt.maxFeePerGas,
  maxPriorityFeePerGas: attempt.maxPriorityFeePerGas
})

export const lastAttempt = (tx: StoredTx): StoredAttempt => {
  const last = tx.attempts[tx.attempts.length - 1]
  // The store never returns a transaction without attempts.
  if (last === undefined) throw new Error("transaction without attempts")
  return last
}

/**
 * Replacements at the same nonce so far: fee bumps and no-op cancellations the node did not
 * refuse. A refused one reached no pool, so it spends none of `TX_MAX_REPLACEMENTS`; one whose
 * broadcast went unanswered may have, so it counts.
 */
export const replacementsOf = (tx: StoredTx): number =>
  tx.attempts.filter((a) => (a.kind === "bump" || a.kind === "cancel") && !a.refused).length

/** Whether the transaction is a no-op now: a gap filler, or one whose replacement cancels it. */
export const isNoop = (tx: StoredTx): boolean => tx.purpose === "filler" || lastAttempt(tx).kind === "cancel"

/** One attempt of a transaction the chain holds, and how it went. */
export interface Mined {
  readonly attempt: StoredAttempt
  readonly outcome: MinedOutcome
  readonly blockNumber: bigint
  readonly blockHash: Hex
}

/** A mined no-op replacement means the transaction itself did not happen: `cancelled`. */
export const minedOutcome = (attempt: StoredAttempt, status: "success" | "reverted"): MinedOutcome =>
  status === "reverted" ? "reverted" : attempt.kind === "cancel" ? "cancelled" : "success"

/** How the node answered a broadcast. */
export type Broadcast =
  | { readonly _tag: "Accepted" }
  | { readonly _tag: "Unavailable" }
  | { readonly _tag: "Refused"; readonly kind: RpcRejectionKind }

/** What an `eth_call` of a transaction's payload from the hot key said. */
export type Simulation = "succeeds" | "reverts" | "unanswered"

// ---------------------------------------------------------------------------------------------
// Submission

/** Broadcast rounds of one submission (re-priced, re-nonced or after healing a gap). */
export const MAX_SUBMIT_ROUNDS = 4

/**
 * After broadcasting a new request's attempt in `round` (from 1): done (accepted, or possibly lost
 * on the way; stored either way, so the monitor re-broadcasts it), or what to do before offering
 * it again. On the last round anything but missing funds counts as done and stays stored.
 */
export type SubmitStep = "done" | "renonce" | "heal_gap" | "reprice" | "drop"

export const nextSubmitStep = (result: Broadcast, round: number): SubmitStep => {
  if (result._tag !== "Refused") return "done"
  if (round >= MAX_SUBMIT_ROUNDS && result.kind !== "insufficient_funds") return "done"
  switch (result.kind) {
    case "nonce_too_low":
      // Another sender used this nonce.
      return "renonce"
    case "nonce_too_high":
      // A lower nonce is missing from the node.
      return "heal_gap"
    case "underpriced":
      return "reprice"
    case "insufficient_funds":
    case "range_too_large":
    case "other":
      // No node holds any attempt of it, so its nonce is free for the next request.
      return "drop"
  }
}

// ---------------------------------------------------------------------------------------------
// The monitor's round over pending transactions

/** What the chain said of a pending transaction whose nonce it has passed. */
export type ReceiptLookup =
  | { readonly _tag: "Found"; readonly mined: Mined }
  | { readonly _tag: "Missing" }
  | { readonly _tag: "Unanswered" }

/** Pending transactions whose nonce the chain has used: mined, or taken by another sender. */
export const passedByChain = (live: ReadonlyArray<StoredTx>, latestNonce: bigint): ReadonlyArray<StoredTx> =>
  live.filter((tx) => tx.nonce < latestNonce)

export interface PendingRound {
  /** The sender's pending transactions, lowest nonce first. */
  readonly live: ReadonlyArray<StoredTx>
  /** The hot key's nonce at the latest block: every lower nonce is used on chain. */
  readonly latestNonce: bigint
  /** The nonce the node's pool expects next (`pending` block tag). */
  readonly pendingNonce: bigint
  /** Receipt lookups, by transaction id, of those `passedByChain`. */
  readonly lookups: ReadonlyMap<string, ReceiptLookup>
  /** Transactions found passed and unmined on the previous round. */
  readonly suspects: ReadonlySet<string>
  readonly replaceAfterMs: number
}

export interface PendingPlan {
  /** Mined: record the outcome. */
  readonly settle: ReadonlyArray<{ readonly tx: StoredTx; readonly mined: Mined }>
  /**
   * Passed and unmined on two rounds in a row: another sender used their nonce. By id, with the
   * nonce they were judged at.
   */
  readonly taken: ReadonlyMap<string, bigint>
  /** Passed and unmined for the first time: the suspects of the next round. */
  readonly suspects: ReadonlySet<string>
  /** Transactions still pending after this round. */
  readonly stillPending: number
  /** Whether work under the key's lock is due: re-signing, a gap, or a replacement. */
  readonly maintain: boolean
}

export const planPendingRound = (round: PendingRound): PendingPlan => {
  const settle: Array<{ readonly tx: StoredTx; readonly mined: Mined }> = []
  const taken = new Map<string, bigint>()
  const suspects = new Set<string>()
  let stillPending = 0
  for (const tx of round.live) {
    const lookup = tx.nonce < round.latestNonce ? round.lookups.get(tx.id) : undefined
    if (lookup === undefined || lookup._tag === "Unanswered") {
      stillPending++
      continue
    }
    if (lookup._tag === "Found") {
      settle.push({ tx, mined: lookup.mined })
      continue
    }
    stillPending++
    // Seen twice, so not a node that updated its nonce before its receipts.
    if (round.suspects.has(tx.id)) taken.set(tx.id, tx.nonce)
    else suspects.add(tx.id)
  }
  const maintain =
    taken.size > 0 ||
    round.live.some(
      (tx) =>
        tx.nonce >= round.latestNonce &&
        (tx.nonce >= round.pendingNonce || lastAttempt(tx).ageMs >= round.replaceAfterMs)
    )
  return { settle, taken, suspects, stillPending, maintain }
}

// ---------------------------------------------------------------------------------------------
// Maintenance under the key's lock

export interface Maintenance {
  /** Taken transactions to re-sign at a free nonce (or drop). */
  readonly renonce: ReadonlyArray<StoredTx>
  /** Nonces `from..to-1` must reach the node: every one up to the highest still unmined. */
  readonly gap: { readonly from: bigint; readonly to: bigint }
  /** Transactions not yet passed by the chain, the candidates for replacement. */
  readonly unmined: ReadonlyArray<StoredTx>
}

export const planMaintenance = (state: {
  readonly live: ReadonlyArray<StoredTx>
  readonly latestNonce: bigint
  readonly pendingNonce: bigint
  readonly taken: ReadonlyMap<string, bigint>
}): Maintenance => {
  const unmined = state.live.filter((tx) => tx.nonce >= state.latestNonce)
  const highest = unmined.reduce((top, tx) => maxBig(top, tx.nonce), -1n)
  return {
    // Still at the nonce it was judged taken at: one moved since (another replica re-signed it
    // while this one waited for the lock) is judged again at its new nonce.
    renonce: state.live.filter((tx) => state.taken.get(tx.id) === tx.nonce && tx.nonce < state.latestNonce),
    gap: { from: state.pendingNonce, to: highest + 1n },
    unmined
  }
}

// ---------------------------------------------------------------------------------------------
// Gaps: nonces below the highest one in use that no node holds

/** No-ops sent per healing, so a database far ahead of a reset chain cannot flood it. */
export const MAX_GAP_FILLS = 64

export type GapStep =
  /** A stored transaction holds the nonce: offer its latest attempt again. */
  | { readonly _tag: "Rebroadcast"; readonly tx: StoredTx }
  /** Nobody holds the nonce: a no-op self-transfer fills it. */
  | { readonly _tag: "Fill"; readonly nonce: bigint }

/**
 * How nonces `from..to-1` reach the node again, lowest first; stops at the nonce that would need
 * more than `maxFills` no-ops (the rest waits for the next healing).
 */
export const planGap = (
  live: ReadonlyArray<StoredTx>,
  from: bigint,
  to: bigint,
  maxFills: number = MAX_GAP_FILLS
): ReadonlyArray<GapStep> => {
  const steps: Array<GapStep> = []
  const byNonce = new Map(live.map((tx) => [tx.nonce, tx] as const))
  let fills = 0
  for (let nonce = from; nonce < to; nonce++) {
    const tx = byNonce.get(nonce)
    if (tx !== undefined) {
      steps.push({ _tag: "Rebroadcast", tx })
      continue
    }
    if (fills >= maxFills) break
    fills++
    steps.push({ _tag: "Fill", nonce })
  }
  return steps
}

// ---------------------------------------------------------------------------------------------
// Re-signing at a new nonce

export type RenoncePlan =
  /** Its nonce is used and it need not happen: a no-op, or it would now revert. */
  | { readonly _tag: "Drop"; readonly because: "noop" | "reverts" }
  /** The simulation went unanswered: the next round asks again. */
  | { readonly _tag: "Wait" }
  /** Sign it again at a free nonce. */
  | { readonly _tag: "Resign" }

/** Whether re-signing `tx` needs its payload simulated first (a no-op never does). */
export const renonceNeedsSimulation = (tx: StoredTx): boolean => !isNoop(tx)

/** Someone else used the nonce of `tx`: what to do with it, given its simulation when one was needed. */
export const planRenonce = (tx: StoredTx, simulation: Simulation | undefined): RenoncePlan => {
  if (isNoop(tx)) return { _tag: "Drop", because: "noop" }
  switch (simulation) {
    case "succeeds":
      return { _tag: "Resign" }
    case "reverts":
      return { _tag: "Drop", because: "reverts" }
    default:
      return { _tag: "Wait" }
  }
}

// ---------------------------------------------------------------------------------------------
// Replacement at the same nonce

/**
 * Unmined transactions due for replacement: their latest attempt is older than the replacement
 * interval, or the node just refused their re-broadcast as underpriced. `isHead` when the
 * transaction holds the next nonce the chain will use.
 */
export const dueForReplacement = (
  unmined: ReadonlyArray<StoredTx>,
  latestNonce: bigint,
  replaceAfterMs: number,
  underpriced: ReadonlySet<string>
): ReadonlyArray<{ readonly tx: StoredTx; readonly isHead: boolean }> =>
  unmined
    .filter((tx) => lastAttempt(tx).ageMs >= replaceAfterMs || underpriced.has(tx.id))
    .map((tx) => ({ tx, isHead: tx.nonce === latestNonce }))

export type ReplacementPlan =
  /** The attempt limit or the fee cap forbids a replacement: it waits for the market. */
  | { readonly _tag: "Skip"; readonly reason: "max_replacements" | "fee_cap" }
  /** The simulation went unanswered: the next round asks again. */
  | { readonly _tag: "Wait" }
  /** Sign at the same nonce: the payload again (`bump`) or a no-op self-transfer (`cancel`). */
  | {
      readonly _tag: "Replace"
      readonly kind: "bump" | "cancel"
      readonly noop: boolean
      readonly fees: Fees
    }

export interface ReplacementContext {
  readonly isHead: boolean
  /** The node's current fee estimate. */
  readonly estimate: Fees
  /** `TX_MAX_FEE_GWEI`, in wei. */
  readonly cap: bigint
  readonly maxReplacements: number
  /**
   * Hashes of replacements the node refused as underpriced (`replacement transaction
   * underpriced`): the pool holds this nonce at least that high, so their fees are the next
   * bump's floor. Any other refusal reached no pool and sets no floor.
   */
  readonly underpricedRefusals?: ReadonlySet<Hex> | undefined
}

/**
 * The fees a replacement must beat: those of the latest attempt the node accepted (or may have:
 * its broadcast went unanswered), or of a later one it refused as underpriced. A refusal for any
 * other reason would otherwise ratchet every next bump up to `TX_MAX_FEE_GWEI` without a single
 * one reaching a pool (docs/relayer.md §3).
 */
export const replacementFloor = (tx: StoredTx, underpricedRefusals?: ReadonlySet<Hex>): Fees => {
  for (let i = tx.attempts.length - 1; i >= 0; i--) {
    const attempt = tx.attempts[i]
    if (attempt !== undefined && (!attempt.refused || underpricedRefusals?.has(attempt.hash) === true))
      return feesOf(attempt)
  }
  // Only a replacement is ever marked refused, so the first attempt always stands.
  return feesOf(lastAttempt(tx))
}

/**
 * What forbids replacing `tx` whatever its simulation would say: the attempt limit, or a minimum
 * bump over its `replacementFloor` that exceeds the cap. Otherwise the replacement's fees.
 */
const replacementAllowance = (
  tx: StoredTx,
  context: ReplacementContext
):
  | { readonly _tag: "Skip"; readonly reason: "max_replacements" | "fee_cap" }
  | { readonly _tag: "Fees"; readonly fees: Fees } => {
  if (replacementsOf(tx) >= context.maxReplacements) return { _tag: "Skip", reason: "max_replacements" }
  const fees = replacementFees(
    replacementFloor(tx, context.underpricedRefusals),
    context.estimate,
    context.cap
  )
  return fees._tag === "None" ? { _tag: "Skip", reason: "fee_cap" } : { _tag: "Fees", fees: fees.value }
}

/**
 * Whether replacing `tx` needs its payload simulated first: only a payload that is not a no-op,
 * and only when the limit and the cap allow a replacement at all, so a transaction that waits for
 * the market is not simulated under the lock on every round.
 */
export const replacementNeedsSimulation = (tx: StoredTx, context: ReplacementContext): boolean =>
  !isNoop(tx) && replacementAllowance(tx, context)._tag === "Fees"

/**
 * The replacement of a stuck transaction, with fees raised by at least the minimum bump over its
 * latest attempt and within the cap. If the head of the queue would now revert, a no-op takes its
 * place so the nonce is not held up; a later one that reverts is bumped as it is (it simulates
 * against a state its predecessors have not changed yet, so the revert proves nothing).
 */
export const planReplacement = (
  tx: StoredTx,
  context: ReplacementContext,
  simulation: Simulation | undefined
): ReplacementPlan => {
  // The limit and the cap first: neither depends on the simulation (`replacementNeedsSimulation`).
  const allowance = replacementAllowance(tx, context)
  if (allowance._tag === "Skip") return allowance
  let noop = isNoop(tx)
  let kind: "bump" | "cancel" = lastAttempt(tx).kind === "cancel" ? "cancel" : "bump"
  if (!noop) {
    if (simulation !== "succeeds" && simulation !== "reverts") return { _tag: "Wait" }
    if (simulation === "reverts" && context.isHead) {
      noop = true
      kind = "cancel"
    }
  }
  return { _tag: "Replace", kind, noop, fees: allowance.fees }
}

// ---------------------------------------------------------------------------------------------
// Reorgs: mined transactions watched until they are deep enough

export interface MinedRound {
  /** Mined transactions not yet confirmed, lowest nonce first. */
  readonly mined: ReadonlyArray<StoredTx>
  readonly head: { readonly number: bigint; readonly hash: Hex }
  /** Which attempt of each, by id, the chain holds now (none: no receipt for any of them). */
  readonly lookups: ReadonlyMap<string, Mined | undefined>
  /** Those whose receipt was missing on the previous round. */
  readonly vanishing: ReadonlySet<string>
  /** `TX_CONFIRMATIONS`: how deep, the including block counting as 1, before it is confirmed. */
  readonly confirmations: number
}

export type MinedStep =
  /** Its receipt is gone on two rounds in a row (not a lagging node): pending again. */
  | { readonly _tag: "Unmined"; readonly tx: StoredTx }
  /** Another attempt, block or outcome holds it now. */
  | { readonly _tag: "Moved"; readonly tx: StoredTx; readonly mined: Mined }
  /** Deep enough: never looked at again. */
  | { readonly _tag: "Confirmed"; readonly tx: StoredTx }

export interface MinedPlan {
  /** In order; a moved transaction may be confirmed right after. */
  readonly steps: ReadonlyArray<MinedStep>
  /** Those whose receipt is missing for the first time: looked up again next round. */
  readonly vanishing: ReadonlySet<string>
  /** The head at which every one was found where it was stored; none while any is missing. */
  readonly verifiedHead: Hex | undefined
}

/**
 * The blocks whose hash, read once each, tells where a round's mined transactions are: those that
 * recorded the hash of their block and are not above the head.
 */
export const blocksToVerify = (mined: ReadonlyArray<StoredTx>, head: bigint): ReadonlyArray<bigint> => [
  ...new Set(
    mined.flatMap((tx) =>
      tx.minedBlockHash !== null && tx.blockNumber !== null && tx.blockNumber <= head ? [tx.blockNumber] : []
    )
  )
]

/**
 * Where `tx` is mined, known without its receipt: the block at its height still has the hash its
 * receipt named, so it holds what it held then (a block's hash commits to its transactions and
 * receipts). None when that cannot be told this way: its receipt is looked up instead.
 */
export const stillWhereRecorded = (
  tx: StoredTx,
  blockHashes: ReadonlyMap<bigint, Hex>
): Mined | undefined => {
  if (tx.minedBlockHash === null || tx.blockNumber === null || tx.minedHash === null) return undefined
  if (blockHashes.get(tx.blockNumber) !== tx.minedBlockHash) return undefined
  const attempt = tx.attempts.find((a) => a.hash === tx.minedHash)
  const outcome = tx.outcome
  if (attempt === undefined || (outcome !== "success" && outcome !== "reverted" && outcome !== "cancelled"))
    return undefined
  return { attempt, outcome, blockNumber: tx.blockNumber, blockHash: tx.minedBlockHash }
}

export const planMinedRound = (round: MinedRound): MinedPlan => {
  const steps: Array<MinedStep> = []
  const vanishing = new Set<string>()
  for (const tx of round.mined) {
    const found = round.lookups.get(tx.id)
    if (found === undefined) {
      if (round.vanishing.has(tx.id)) steps.push({ _tag: "Unmined", tx })
      else vanishing.add(tx.id)
      continue
    }
    if (
      found.attempt.hash !== tx.minedHash ||
      found.blockNumber !== tx.blockNumber ||
      found.outcome !== tx.outcome ||
      (tx.minedBlockHash !== null && found.blockHash !== tx.minedBlockHash)
    ) {
      steps.push({ _tag: "Moved", tx, mined: found })
    }
    if (round.head.number - found.blockNumber + 1n >= BigInt(round.confirmations)) {
      steps.push({ _tag: "Confirmed", tx })
    }
  }
  return { steps, vanishing, verifiedHead: vanishing.size === 0 ? round.head.hash : undefined }
}
