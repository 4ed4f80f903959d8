/**
 * EIP-1559 fees of the sender's transactions: the first signature takes the node's estimate under
 * the operator's ceiling; a replacement at the same nonce must raise both fee fields by at least
 * 12.5% (nodes refuse smaller bumps as "replacement underpriced"; geth wants 10%).
 */
import { Option } from "effect"

export interface Fees {
  readonly maxFeePerGas: bigint
  readonly maxPriorityFeePerGas: bigint
}

/** The smallest accepted bump: 12.5%, rounded up, and at least 1 wei. */
export const bumped = (value: bigint): bigint => {
  const raised = (value * 1125n + 999n) / 1000n
  return raised > value ? raised : value + 1n
}

const max = (a: bigint, b: bigint) => (a > b ? a : b)
const min = (a: bigint, b: bigint) => (a < b ? a : b)

/** The estimate, capped; the tip never exceeds the fee cap. */
export const initialFees = (estimate: Fees, cap: bigint): Fees => {
  const maxFeePerGas = min(max(estimate.maxFeePerGas, estimate.maxPriorityFeePerGas), cap)
  return { maxFeePerGas, maxPriorityFeePerGas: min(estimate.maxPriorityFeePerGas, maxFeePerGas) }
}

/**
 * Fees of a replacement for a transaction signed with `previous`: the current estimate or the
 * minimum bump, whichever is higher, within `cap`. None when even the minimum bump exceeds the
 * cap: the transaction then waits for the market instead of being replaced.
 */
export const replacementFees = (previous: Fees, estimate: Fees, cap: bigint): Option.Option<Fees> => {
  const minFee = bumped(previous.maxFeePerGas)
  const minTip = bumped(previous.maxPriorityFeePerGas)
  if (minFee > cap || minTip > cap) return Option.none()
  const tip = min(max(estimate.maxPriorityFeePerGas, minTip), cap)
  const fee = min(max(max(estimate.maxFeePerGas, minFee), tip), cap)
  return Option.some({ maxFeePerGas: fee, maxPriorityFeePerGas: min(tip, fee) })
}
