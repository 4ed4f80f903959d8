/**
 * What a fee must be to pay for a transaction's gas (docs/relayer.md §8 "Gas cap and fee
 * margin"): its gas limit, the most gas it can burn, times the gas price, converted into the
 * asset at the quote's price and rounded up. Without the fee margin: the margin is the
 * relayer's headroom over a budget, not something a transaction may spend.
 */
import type { NativePrice } from "../../config/relayer.js"

export const feeCovering = (gasLimit: bigint, gasPrice: bigint, price: NativePrice): bigint => {
  const numerator = gasLimit * gasPrice * price.num
  return (numerator + price.den - 1n) / price.den
}
