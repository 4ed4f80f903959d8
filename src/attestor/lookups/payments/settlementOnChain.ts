/**
 * Where a settlement whose answer was lost is found (docs/attestor.md §4 "Paid handle lookup flow",
 * replay): a payment settled by the facilitator, whose answer never reached the attestor (it
 * restarted, or the facilitator's answer was cut), is read from the chain before anything is asked
 * again. A Permit2 nonce is spendable once (`nonceBitmap`), but its payer can also cancel it
 * (`invalidateUnorderedNonces`) without paying: a spent nonce is this payment's settlement only
 * when a transaction is found that is the quoted spender's `settle` (or `settleWithPermit`) call
 * for this owner and nonce, and that moved exactly the quoted amount of the settlement asset from
 * the payer to `payTo`. A spent nonce without one was not paid.
 *
 * The search is bounded: from the block read before the settlement was asked for to the blocks
 * whose time passes the authorization's deadline (Permit2 refuses a transfer after it) plus a
 * margin, in chunks of `LOG_CHUNK_BLOCKS` blocks (providers cap the range of `eth_getLogs`).
 *
 * Nothing of the payer reaches a log line or a metric.
 */
import type { PaymentRequirements } from "@x402/core/types"
import { x402ExactPermit2ProxyABI } from "@x402/evm"
import { Effect, Either, Option } from "effect"
import { type Address, decodeFunctionData, getAddress, type Hex, isAddressEqual, parseAbiItem } from "viem"
import type { Unavailable } from "../../../../schema/errors.js"
import type { ChainClientShape } from "../../../chain/ChainClient.js"
import { chainUnavailable } from "../../../chain/errors.js"
import { CANONICAL_PERMIT2, type PresentedPayment, quotedSpender } from "./x402.js"

/**
 * What the chain says of an authorization: not spent; or spent, by the settlement `transaction`
 * found, or by none (the payer cancelled its nonce: not paid).
 */
export type OnChainSettlement =
  | { readonly spent: false }
  | { readonly spent: true; readonly transaction: Option.Option<Hex> }

/** Whether the chain shows the authorization paid: spent by its settlement transaction. */
export const paidOnChain = (settlement: OnChainSettlement): Option.Option<Hex> =>
  settlement.spent ? settlement.transaction : Option.none()

export interface SettlementChain {
  /** The latest block: where a settlement asked for from now on is looked for. */
  readonly blockNumber: Effect.Effect<bigint, Unavailable>
  readonly settlementOf: (
    presented: PresentedPayment,
    quoted: PaymentRequirements,
    fromBlock: bigint
  ) => Effect.Effect<OnChainSettlement, Unavailable>
}

/** The most blocks one `eth_getLogs` asks for (common provider caps are 2,000 to 10,000). */
export const LOG_CHUNK_BLOCKS = 2_000n
/** Seconds past the deadline still searched: block times are the chain's, not the attestor's. */
export const DEADLINE_MARGIN_SECONDS = 60n

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

/** Whether `input`, sent to `to`, is the quoted spender's settlement of exactly this authorization. */
export const settlesAuthorization = (
  to: Address | null | undefined,
  input: Hex,
  presented: PresentedPayment,
  quoted: PaymentRequirements
): boolean => {
  const spender = quotedSpender(quoted)
  if (to == null || typeof spender !== "string" || !isAddressEqual(to, spender as Address)) return false
  const decoded = Either.try(() => decodeFunctionData({ abi: x402ExactPermit2ProxyABI, data: input }))
  if (Either.isLeft(decoded)) return false
  const call = decoded.right
  if (call.functionName !== "settle" && call.functionName !== "settleWithPermit") return false
  const [permit, owner, witness] =
    call.functionName === "settle" ? call.args : [call.args[1], call.args[2], call.args[3]]
  return (
    isAddressEqual(owner, presented.authorization.payer) &&
    permit.nonce === presented.authorization.nonce &&
    isAddressEqual(permit.permitted.token, getAddress(quoted.asset)) &&
    permit.permitted.amount === BigInt(quoted.amount) &&
    isAddressEqual(witness.to, getAddress(quoted.payTo))
  )
}

/** The transactions of one chunk that moved exactly the quoted amount from the payer to `payTo`. */
const transfersIn = (
  chain: ChainClientShape,
  presented: PresentedPayment,
  quoted: PaymentRequirements,
  fromBlock: bigint,
  toBlock: bigint
) =>
  Effect.map(
    chain.getLogs({
      address: getAddress(quoted.asset),
      event: transferEvent,
      args: { from: presented.authorization.payer, to: getAddress(quoted.payTo) },
      fromBlock,
      toBlock
    }),
    (logs) =>
      logs.flatMap((log) =>
        log.transactionHash !== null &&
        isAddressEqual(log.address, getAddress(quoted.asset)) &&
        log.args.value === BigInt(quoted.amount)
          ? [log.transactionHash]
          : []
      )
  )

/**
 * The settlement transaction of the authorization: a transfer of exactly the quoted amount from
 * the payer to `payTo` (its receipt's log) made by the quoted spender's call for this owner and
 * nonce, searched chunk by chunk from `fromBlock` until the chain's time passes the deadline.
 */
const settlementTransaction = (
  chain: ChainClientShape,
  presented: PresentedPayment,
  quoted: PaymentRequirements,
  fromBlock: bigint
) =>
  Effect.gen(function* () {
    const latest = yield* chain.blockNumber
    const lastTime = presented.deadline + DEADLINE_MARGIN_SECONDS
    for (let from = fromBlock; from <= latest; from += LOG_CHUNK_BLOCKS) {
      const to = from + LOG_CHUNK_BLOCKS - 1n < latest ? from + LOG_CHUNK_BLOCKS - 1n : latest
      for (const hash of yield* transfersIn(chain, presented, quoted, from, to)) {
        const transaction = yield* chain.getTransaction(hash)
        if (
          Option.isSome(transaction) &&
          settlesAuthorization(transaction.value.to, transaction.value.input, presented, quoted)
        )
          return Option.some(hash)
      }
      // Permit2 refuses the transfer after its deadline: later blocks cannot hold it.
      const last = yield* chain.getBlock({ blockNumber: to })
      if (last.timestamp > lastTime) break
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
        transaction: yield* settlementTransaction(chain, presented, quoted, fromBlock)
      } as const
    }).pipe(Effect.mapError(chainUnavailable))
})
