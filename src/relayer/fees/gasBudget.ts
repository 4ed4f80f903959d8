/**
 * Gas budgets: how much gas the relayer expects each kind of transaction to need. A budget is
 * the `gasEstimate` of a quote (what the fee pays for) and, times `GAS_CAP_BPS`, the most gas the
 * relayer lets the transaction's `eth_estimateGas` reach before refusing it.
 *
 * Figures are worst cases on the reference contracts (`contracts/`): every storage slot the
 * transaction writes is still empty (first nonce, fresh recipient, a relayer that never held the
 * asset, templates written for the first time), calldata included, with 7-50% headroom over the
 * gas used. `test/relayer/gas-budget.test.ts` runs each case on anvil and checks
 * `gasUsed <= eth_estimateGas <= budget <= 2 x gasUsed`. Tokens or adapters that cost more than
 * the reference ones are covered by `GAS_BUDGET_BPS`, which scales the whole table.
 *
 * | Step                                                     | Budget (gas)        | estimateGas measured            |
 * |----------------------------------------------------------|---------------------|---------------------------------|
 * | claim, direct adapter, sent alone                        | 150 000             | 131 213 (ERC-1271, 2 KiB sig: 140 347) |
 * | claim, shield adapter, sent alone                        | 230 000             | 200 013                         |
 * | consolidate action + fee claim                           | 300 000             | 259 234                         |
 * | shield-templates + fee claim                             | 185 000 + 165 000 n | 312 524 (n=1), 4 908 684 (n=32) |
 * | rotate-owner + fee claim                                 | 150 000             | 132 093                         |
 * | ping + fee claim                                         | 140 000             | 120 534                         |
 * | + register=1 (kind 1 or 2, with fallback)                | + 100 000           | + 89 000 .. 96 000              |
 * | + consolidate=1 (quoted full-balance consolidation step) | + 150 000           | + 142 000 .. 143 000            |
 * | + a lone claim batched into a multicall                  | + 10 000            | (inside the two rows above)     |
 * | cancel-bind, sent alone                                  | 60 000              | 51 340                          |
 * | finalize-bind, sent alone                                | 60 000              | 51 504                          |
 * | propose-bind, s attestor signatures                      | 110 000 + 10 000 s  | 107 529 (s=1), 122 919 (s=3)    |
 * | propose-bind + register (kind 2)                         | + 110 000           | 203 841 (s=1)                   |
 *
 * Owner actions always travel as a multicall with their fee claim, so their rows include the
 * multicall; a claim is sent unwrapped unless a register or consolidate step joins it.
 */
import type { QuoteAction } from "../../../schema/relayer.js"

export type ClaimAdapterKind = "direct" | "shield"

/** The table above, in gas. */
export const gasTable = {
  claimDirect: 150_000n,
  claimShield: 230_000n,
  consolidateWithFee: 300_000n,
  shieldTemplatesWithFeeBase: 185_000n,
  shieldTemplatesPerTemplate: 165_000n,
  rotateOwnerWithFee: 150_000n,
  pingWithFee: 140_000n,
  register: 100_000n,
  consolidateStep: 150_000n,
  claimMulticall: 10_000n,
  cancelBind: 60_000n,
  finalizeBind: 60_000n,
  proposeBindBase: 110_000n,
  proposeBindPerSignature: 10_000n
} as const

export interface GasBudgetInput {
  readonly action: QuoteAction
  readonly adapter: ClaimAdapterKind
  /** 1..32, shield-templates only. */
  readonly templates?: number | undefined
  readonly consolidate: boolean
  readonly register: boolean
}

const scaled = (gas: bigint, scaleBps: number): bigint =>
  // Rounded up: a budget is a ceiling, never shaved.
  (gas * BigInt(scaleBps) + 9_999n) / 10_000n

const actionBase = (input: GasBudgetInput): bigint => {
  switch (input.action) {
    case "claim": {
      const claim = input.adapter === "shield" ? gasTable.claimShield : gasTable.claimDirect
      const batched = input.register || input.consolidate
      return (
        claim + (input.consolidate ? gasTable.consolidateStep : 0n) + (batched ? gasTable.claimMulticall : 0n)
      )
    }
    case "consolidate":
      return gasTable.consolidateWithFee
    case "shield-templates":
      return (
        gasTable.shieldTemplatesWithFeeBase +
        gasTable.shieldTemplatesPerTemplate * BigInt(Math.max(1, input.templates ?? 1))
      )
    case "rotate-owner":
      return gasTable.rotateOwnerWithFee
    case "ping":
      return gasTable.pingWithFee
  }
}

/** The gas budget of a claim or a paid owner action; `scaleBps` is `GAS_BUDGET_BPS`. */
export const gasBudgetOf = (input: GasBudgetInput, scaleBps = 10_000): bigint =>
  scaled(actionBase(input) + (input.register ? gasTable.register : 0n), scaleBps)

export type BindAction = "cancel-bind" | "propose-bind" | "finalize-bind"

export interface BindBudgetInput {
  readonly action: BindAction
  /** propose-bind: the kind-2 registration travels with it. */
  readonly register?: boolean | undefined
  /** propose-bind: attestor signatures sent (at least 1). */
  readonly signatures?: number | undefined
}

/** The gas budget of an unpaid bind transaction (gas-capped like every other one). */
export const bindGasBudgetOf = (input: BindBudgetInput, scaleBps = 10_000): bigint => {
  switch (input.action) {
    case "cancel-bind":
      return scaled(gasTable.cancelBind, scaleBps)
    case "finalize-bind":
      return scaled(gasTable.finalizeBind, scaleBps)
    case "propose-bind":
      return scaled(
        gasTable.proposeBindBase +
          gasTable.proposeBindPerSignature * BigInt(Math.max(1, input.signatures ?? 1)) +
          (input.register ? gasTable.register + gasTable.claimMulticall : 0n),
        scaleBps
      )
  }
}
