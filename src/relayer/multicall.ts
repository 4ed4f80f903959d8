/**
 * Vault calldata of the steps the relayer batches (docs/relayer.md §1, docs/protocol.md §5): an optional
 * registration, the owner-signed steps, and the main action, in that order, as one `multicall`
 * that succeeds or reverts as a whole. A single step is sent as itself.
 */
import type { NonEmptyReadonlyArray } from "effect/Array"
import { encodeFunctionData, type Hex } from "viem"
import { feeVaultAbi } from "../../contracts/abi.js"
import type { Bytes32 } from "../../schema/primitives.js"
import type { Claim, ConsolidateStep, Registration } from "../../schema/relayer.js"

export const registerCall = (registration: Registration): Hex =>
  registration.kind === 1
    ? encodeFunctionData({
        abi: feeVaultAbi,
        functionName: "registerOwner",
        args: [
          registration.owner,
          registration.salt,
          registration.fallbackRecipient,
          registration.fallbackDelay
        ]
      })
    : encodeFunctionData({
        abi: feeVaultAbi,
        functionName: "registerHandle",
        args: [registration.handleCommitment, registration.fallbackRecipient, registration.fallbackDelay]
      })

export const consolidateCall = (id: Bytes32, step: ConsolidateStep): Hex =>
  encodeFunctionData({
    abi: feeVaultAbi,
    functionName: "consolidate",
    args: [id, step.assetIn, step.amountIn, step.minOut, step.deadline, step.signature]
  })

export const claimCall = (claim: Claim, adapterData: Hex, signature: Hex): Hex =>
  encodeFunctionData({ abi: feeVaultAbi, functionName: "claim", args: [claim, adapterData, signature] })

/** The transaction data for the steps: one step unwrapped, several through `multicall`. */
export const batchCalls = (calls: NonEmptyReadonlyArray<Hex>): Hex =>
  calls.length === 1
    ? calls[0]
    : encodeFunctionData({ abi: feeVaultAbi, functionName: "multicall", args: [calls] })
