/**
 * Where a settlement whose answer was lost is found (src/attestor/lookups/payments/settlementOnChain.ts;
 * docs/attestor.md §4 "Paid handle lookup flow", replay), on a recorded chain: a spent Permit2 nonce
 * is paid only by the quoted spender's settle call for this owner and nonce that moved exactly the
 * quoted amount to payTo; a nonce the payer cancelled, or a transfer made by another call, is not;
 * the logs are read in chunks of at most LOG_CHUNK_BLOCKS blocks, no further than the deadline.
 */
import { describe, expect, it } from "@effect/vitest"
import { x402ExactPermit2ProxyABI } from "@x402/evm"
import { Effect, Option } from "effect"
import { type Address, encodeFunctionData, type Hex } from "viem"
import { LOG_CHUNK_BLOCKS, settlementChain } from "../../src/attestor/lookups/payments/settlementOnChain.js"
import { lookupRequirements, type PresentedPayment } from "../../src/attestor/lookups/payments/x402.js"
import type { ChainClientShape } from "../../src/chain/ChainClient.js"

const PROXY: Address = "0x402085c248EeA27D92E8b30b2C58ed07f9E20001"
const PAY_TO: Address = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
const ASSET: Address = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
const PAYER: Address = "0x90F79bf6EB2c4f870365E785982E1f101E93b906"
const AMOUNT = 10n ** 16n
const requirements = lookupRequirements({
  chainId: 31337,
  asset: ASSET,
  assetName: "Tether USD",
  assetVersion: "1",
  amount: AMOUNT,
  payTo: PAY_TO,
  maxTimeoutSeconds: 60,
  signerAddress: PAY_TO,
  spenderAddress: PROXY
})
/** Block n is mined at T0 + n seconds. */
const T0 = 1_800_000_000n
const NONCE = 77n
const presented = (deadlineBlock: bigint) =>
  ({
    authorization: { payer: PAYER, nonce: NONCE },
    deadline: T0 + deadlineBlock
  }) as unknown as PresentedPayment

const settleCall = (nonce: bigint, amount = AMOUNT): Hex =>
  encodeFunctionData({
    abi: x402ExactPermit2ProxyABI,
    functionName: "settle",
    args: [
      { permitted: { token: ASSET, amount }, nonce, deadline: T0 + 100n },
      PAYER,
      { to: PAY_TO, validAfter: 0n },
      "0x"
    ]
  })

interface Transfer {
  readonly block: bigint
  readonly hash: Hex
  readonly to: Address
  readonly input: Hex
  readonly value: bigint
}

/** A chain whose payer nonce is `spent`, with `transfers` from the payer to payTo; it records log ranges. */
const chainWith = (spent: boolean, latest: bigint, transfers: ReadonlyArray<Transfer>) => {
  const ranges: Array<readonly [bigint, bigint]> = []
  const chain = {
    blockNumber: Effect.succeed(latest),
    readContract: () => Effect.succeed(spent ? 1n << (NONCE & 255n) : 0n),
    getLogs: (request: { fromBlock: bigint; toBlock: bigint }) =>
      Effect.sync(() => {
        ranges.push([request.fromBlock, request.toBlock])
        return transfers
          .filter((t) => t.block >= request.fromBlock && t.block <= request.toBlock)
          .map((t) => ({
            address: ASSET.toLowerCase(),
            transactionHash: t.hash,
            args: { from: PAYER, to: PAY_TO, value: t.value }
          }))
      }),
    getTransaction: (hash: Hex) =>
      Effect.succeed(
        Option.map(Option.fromNullable(transfers.find((t) => t.hash === hash)), (t) => ({
          to: t.to,
          input: t.input
        }))
      ),
    getBlock: (request: { blockNumber: bigint }) =>
      Effect.succeed({ number: request.blockNumber, timestamp: T0 + request.blockNumber })
  } as unknown as ChainClientShape
  return { chain: settlementChain(chain), ranges }
}

const hash = (n: number): Hex => `0x${n.toString(16).padStart(64, "0")}`

describe("settlementOf", () => {
  it.effect("an unspent nonce: not spent, no logs read", () =>
    Effect.gen(function* () {
      const { chain, ranges } = chainWith(false, 100n, [])
      expect(yield* chain.settlementOf(presented(50n), requirements, 0n)).toEqual({ spent: false })
      expect(ranges).toEqual([])
    })
  )

  it.effect("the quoted spender's settle of this nonce, moving the quoted amount: paid by it", () =>
    Effect.gen(function* () {
      const { chain } = chainWith(true, 100n, [
        { block: 10n, hash: hash(1), to: PROXY, input: settleCall(NONCE), value: AMOUNT }
      ])
      expect(yield* chain.settlementOf(presented(50n), requirements, 0n)).toEqual({
        spent: true,
        transaction: Option.some(hash(1))
      })
    })
  )

  it.effect(
    "a nonce the payer cancelled, beside transfers by another call, another nonce, another spender or another amount: not paid",
    () =>
      Effect.gen(function* () {
        const other = `${settleCall(NONCE)}` as Hex
        const { chain } = chainWith(true, 100n, [
          // A plain transfer whose calldata merely carries the nonce word.
          { block: 5n, hash: hash(2), to: ASSET, input: `0xa9059cbb${other.slice(10)}`, value: AMOUNT },
          { block: 6n, hash: hash(3), to: PROXY, input: settleCall(NONCE + 1n), value: AMOUNT },
          { block: 7n, hash: hash(4), to: PAY_TO, input: settleCall(NONCE), value: AMOUNT },
          { block: 8n, hash: hash(5), to: PROXY, input: settleCall(NONCE), value: AMOUNT - 1n }
        ])
        expect(yield* chain.settlementOf(presented(50n), requirements, 0n)).toEqual({
          spent: true,
          transaction: Option.none()
        })
      })
  )

  it.effect("logs are read in chunks of at most LOG_CHUNK_BLOCKS, and not past the deadline's blocks", () =>
    Effect.gen(function* () {
      const { chain, ranges } = chainWith(true, 20_000n, [
        { block: 9_000n, hash: hash(6), to: PROXY, input: settleCall(NONCE), value: AMOUNT }
      ])
      // Its deadline is block 3,000's time: a settlement at block 9,000 cannot be this one.
      expect(yield* chain.settlementOf(presented(3_000n), requirements, 1n)).toEqual({
        spent: true,
        transaction: Option.none()
      })
      expect(ranges.length).toBeGreaterThan(1)
      for (const [from, to] of ranges) expect(to - from + 1n).toBeLessThanOrEqual(LOG_CHUNK_BLOCKS)
      expect(ranges[0]?.[0]).toBe(1n)
      expect(Math.max(...ranges.map(([, to]) => Number(to)))).toBeLessThan(
        3_000 + 60 + Number(LOG_CHUNK_BLOCKS)
      )
    })
  )
})
