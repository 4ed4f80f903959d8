/**
 * Where a settlement whose answer was lost is found (docs/attestor.md §4 "Paid handle lookup flow",
 * replay): a payment settled by the facilitator, whose answer never reached the attestor (it
 * restarted, or the facilitator's answer was cut), is read from the chain before anything is asked
 * again. A Permit2 nonce is spendable once (`nonceBitmap`), so a spent one is this payment's
 * settlement: its transaction is the token transfer from the payer to the payee, since the block
 * the attestor read before asking for the settlement, whose calldata carries the nonce.
 *
 * Nothing of the payer reaches a log line or a metric.
 */
import type { PaymentRequirements } from "@x402/core/types"
import { Effect, Option } from "effect"
import { type Address, getAddress, type Hex, numberToHex, parseAbiItem } from "viem"
import type { Unavailable } from "../../../../schema/errors.js"
import type { ChainClientShape } from "../../../chain/ChainClient.js"
import { chainUnavailable } from "../../../chain/errors.js"
import { CANONICAL_PERMIT2, type PresentedPayment } from "./x402.js"

/** What the chain says of an authorization. */
export type OnChainSettlement =
  | { readonly spent: false }
  /** Spent: by the transaction found, if one was (a nonce the payer cancelled has none). */
  | { readonly spent: true; readonly transaction: Option.Option<Hex> }

export interface SettlementChain {
  /** The latest block: where a settlement asked for from now on is looked for. */
  readonly blockNumber: Effect.Effect<bigint, Unavailable>
  readonly settlementOf: (
    presented: PresentedPayment,
    quoted: PaymentRequirements,
    fromBlock: bigint
  ) => Effect.Effect<OnChainSettlement, Unavailable>
}

const nonceBitmapAbi = [
  {
    type: "function",
    name: "nonceBitmap",
    stateMutability: "view",
    inputs: [
      { name: "owner", type: "address" },
      { name: "wordPos", type: "uint256" }
    ],
    outputs: [{ name: "", type: "uint256" }]
  }
] as const

const transferEvent = parseAbiItem("event Transfer(address indexed from, address indexed to, uint256 value)")

/** Whether Permit2 marks the authorization's unordered nonce used (bit `nonce & 255` of word `nonce >> 8`). */
const permit2NonceUsed = (chain: ChainClientShape, payer: Address, nonce: bigint) =>
  Effect.map(
    chain.readContract({
      address: CANONICAL_PERMIT2,
      abi: nonceBitmapAbi,
      functionName: "nonceBitmap",
      args: [payer, nonce >> 8n]
    }),
    (word) => ((word >> (nonce & 255n)) & 1n) === 1n
  )

/** The transfer from the payer to the payee since `fromBlock` whose calldata carries the nonce. */
const transferCarrying = (
  chain: ChainClientShape,
  presented: PresentedPayment,
  quoted: PaymentRequirements,
  fromBlock: bigint
) =>
  Effect.gen(function* () {
    const toBlock = yield* chain.blockNumber
    const logs = yield* chain.getLogs({
      address: getAddress(quoted.asset),
      event: transferEvent,
      args: { from: presented.authorization.payer, to: getAddress(quoted.payTo) },
      fromBlock,
      toBlock
    })
    const nonceWord = numberToHex(presented.authorization.nonce, { size: 32 }).slice(2).toLowerCase()
    for (const log of [...logs].reverse()) {
      if (log.transactionHash === null) continue
      const transaction = yield* chain.getTransaction(log.transactionHash)
      if (Option.isSome(transaction) && transaction.value.input.toLowerCase().includes(nonceWord))
        return Option.some(log.transactionHash)
    }
    return Option.none<Hex>()
  })

export const settlementChain = (chain: ChainClientShape): SettlementChain => ({
  blockNumber: Effect.mapError(chain.blockNumber, chainUnavailable),
  settlementOf: (presented, quoted, fromBlock) =>
    Effect.gen(function* () {
      const spent = yield* permit2NonceUsed(
        chain,
        presented.authorization.payer,
        presented.authorization.nonce
      )
      if (!spent) return { spent: false } as const
      return {
        spent: true,
        transaction: yield* transferCarrying(chain, presented, quoted, fromBlock)
      } as const
    }).pipe(Effect.mapError(chainUnavailable))
})
