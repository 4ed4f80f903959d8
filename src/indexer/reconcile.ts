/**
 * Nonce reconciliation: after a batch, the nonces counted from events for the accounts whose
 * nonces the batch moved are compared with the vault's `nonces(id)` and `bindNonces(id)` at the
 * batch's last block. Where they disagree the chain wins. The reads go through the vault's own `multicall`
 * (a delegatecall to itself, so view calls work in `eth_call`), many ids per request.
 */
import { Data, Effect } from "effect"
import { type Address, decodeFunctionResult, encodeFunctionData, type Hex, hexToBigInt } from "viem"
import { feeVaultAbi } from "../../contracts/abi.js"
import type { ChainClientShape, ChainRequestError, ChainReverted } from "../chain/ChainClient.js"

/** Ids per `eth_call`; each costs two inner calls. */
const IDS_PER_CALL = 500
/** `eth_call`s in flight at once. */
const CONCURRENT_CALLS = 4

export interface ChainNonces {
  readonly nonce: bigint
  readonly bindNonce: bigint
}

/** The vault answered with data that is not what `multicall` of two uint256 views returns. */
export class NonceReadInvalid extends Data.TaggedError("NonceReadInvalid")<{ readonly reason: string }> {}

const word = (data: Hex | undefined): bigint | undefined =>
  data !== undefined && data.length === 66 ? hexToBigInt(data) : undefined

export const readChainNonces = (
  chain: ChainClientShape,
  vault: Address,
  ids: ReadonlyArray<Hex>,
  blockNumber: number
): Effect.Effect<ReadonlyMap<Hex, ChainNonces>, ChainRequestError | ChainReverted | NonceReadInvalid> =>
  Effect.forEach(
    Array.from({ length: Math.ceil(ids.length / IDS_PER_CALL) }, (_, i) =>
      ids.slice(i * IDS_PER_CALL, (i + 1) * IDS_PER_CALL)
    ),
    (part) => readPart(chain, vault, part, blockNumber),
    { concurrency: CONCURRENT_CALLS }
  ).pipe(Effect.map((parts) => new Map(parts.flat())))

const readPart = (chain: ChainClientShape, vault: Address, part: ReadonlyArray<Hex>, blockNumber: number) =>
  Effect.gen(function* () {
    const calls = part.flatMap((id) => [
      encodeFunctionData({ abi: feeVaultAbi, functionName: "nonces", args: [id] }),
      encodeFunctionData({ abi: feeVaultAbi, functionName: "bindNonces", args: [id] })
    ])
    const data = yield* chain.call({
      to: vault,
      data: encodeFunctionData({ abi: feeVaultAbi, functionName: "multicall", args: [calls] }),
      blockNumber: BigInt(blockNumber)
    })
    const results = yield* Effect.try({
      try: () => decodeFunctionResult({ abi: feeVaultAbi, functionName: "multicall", data }),
      catch: () => new NonceReadInvalid({ reason: "undecodable multicall result" })
    })
    const out: Array<readonly [Hex, ChainNonces]> = []
    for (const [j, id] of part.entries()) {
      const nonce = word(results[2 * j])
      const bindNonce = word(results[2 * j + 1])
      if (nonce === undefined || bindNonce === undefined)
        return yield* Effect.fail(new NonceReadInvalid({ reason: "a nonce result is not one word" }))
      out.push([id, { nonce, bindNonce }])
    }
    return out
  })
