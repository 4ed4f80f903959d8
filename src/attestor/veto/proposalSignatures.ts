/**
 * Whose signatures a pending bind proposal carries (docs/attestor.md "The committee"): the
 * `BindProposed` log of the proposal's block, its transaction, and the `BindOwner` signatures of
 * every `proposeBind` call for the id in it, each recovered over the pending proposal's message
 * (its bind nonce) in the vault's domain. The committee veto rule (`committeeVerdict` in
 * vetoVerdicts.ts) asks whether this attestor's own signature is among them: a member that was not
 * asked is spared; a proposal carrying its key's signature that it never issued is vetoed.
 *
 * One transaction may hold several calls for the id: the vault's `multicall` (nested, delegatecalls
 * to the vault itself) can propose, veto and propose again. Every `proposeBind` for the id is read,
 * so a decoy before the real call cannot hide this attestor's signature: `carried` when any of them
 * recovers to it at the pending bind nonce; `absent` only when one of them recovers to at least the
 * vault's threshold of distinct registered attestors (a call the vault could have accepted) without
 * it; else `unreadable`. A transaction that is not a call of the vault (a contract wallet's, say) is
 * `unreadable` too, and judged by the strict rule.
 *
 * `None`: judge on a later pass: the chain did not answer, or its node does not show the proposal's
 * log or transaction yet (a node behind the indexer, a reorg under way), for up to
 * `NOT_FOUND_PASSES` passes.
 */
import { Effect, Option } from "effect"
import {
  type Address,
  decodeFunctionData,
  getAbiItem,
  type Hash,
  type Hex,
  recoverTypedDataAddress,
  type Transaction
} from "viem"
import { feeVaultAbi } from "../../../contracts/abi.js"
import { vaultDomain, vaultTypes } from "../../../schema/eip712.js"
import type { ChainClientShape } from "../../chain/ChainClient.js"
import { type OwnSignature, type Proposal, same } from "./vetoVerdicts.js"

const bindProposedEvent = getAbiItem({ abi: feeVaultAbi, name: "BindProposed" })

/** How deep the vault's `multicall` is read: the vault's own calls, nested. */
const MAX_MULTICALL_DEPTH = 8
/** How many calls of one transaction are read at most; past it, `unreadable`. */
const MAX_CALLS = 256

/** A `proposeBind` call's arguments. */
export interface ProposeBindArgs {
  readonly deadline: bigint
  readonly signatures: ReadonlyArray<Hex>
}

/**
 * Every `proposeBind` for `proposal`'s id and new owner in vault calldata `data`, through the
 * vault's own (nested) `multicall`; `undefined` when the calldata cannot be read whole (a call that
 * does not decode, too deep, too many).
 */
export const proposeBindsIn = (data: Hex, proposal: Proposal): ReadonlyArray<ProposeBindArgs> | undefined => {
  const found: Array<ProposeBindArgs> = []
  let calls = 0
  const visit = (input: Hex, depth: number): boolean => {
    if (++calls > MAX_CALLS || depth > MAX_MULTICALL_DEPTH) return false
    let call: ReturnType<typeof decodeFunctionData<typeof feeVaultAbi>>
    try {
      call = decodeFunctionData({ abi: feeVaultAbi, data: input })
    } catch {
      return false
    }
    if (call.functionName === "multicall") return call.args[0].every((inner) => visit(inner, depth + 1))
    if (call.functionName !== "proposeBind") return true
    const [id, newOwner, deadline, signatures] = call.args
    if (same(id, proposal.id) && same(newOwner, proposal.newOwner)) found.push({ deadline, signatures })
    return true
  }
  return visit(data, 0) ? found : undefined
}

/**
 * The `proposeBind` calls of `tx` for `proposal`: a call of the vault, or calls inside its own
 * `multicall`; `undefined` for a transaction to another contract, or calldata not read whole.
 */
export const proposeBindCalls = (tx: Transaction, vault: Address, proposal: Proposal) => {
  if (tx.to === null || tx.to === undefined || !same(tx.to, vault)) return undefined
  return proposeBindsIn(tx.input, proposal)
}

/** The signers of `signatures` over the proposal's `BindOwner` message; an unrecoverable one is left out. */
export const signersOf = async (
  chainId: number,
  vault: Address,
  proposal: Proposal,
  deadline: bigint,
  signatures: ReadonlyArray<Hex>
): Promise<ReadonlyArray<Address>> => {
  const message = { id: proposal.id, newOwner: proposal.newOwner, bindNonce: proposal.bindNonce, deadline }
  const signers: Array<Address> = []
  for (const signature of signatures) {
    try {
      signers.push(
        await recoverTypedDataAddress({
          domain: vaultDomain(chainId, vault),
          types: vaultTypes,
          primaryType: "BindOwner",
          message,
          signature
        })
      )
    } catch {
      // A malformed signature signs for nobody; the vault would have refused it anyway.
    }
  }
  return signers
}

/** The hash of the transaction that made `proposal` (its `BindProposed` log in its block). */
const proposalTransaction = (chain: ChainClientShape, vault: Address, proposal: Proposal, block: bigint) =>
  Effect.map(
    chain.getLogs({
      address: vault,
      event: bindProposedEvent,
      args: { id: proposal.id },
      fromBlock: block,
      toBlock: block
    }),
    (logs) =>
      logs
        .filter(
          (log) =>
            log.args.newOwner !== undefined &&
            same(log.args.newOwner, proposal.newOwner) &&
            log.args.bindNonce === proposal.bindNonce
        )
        .at(-1)?.transactionHash as Hash | undefined
  )

/**
 * Whether some call's signers are at least the vault's threshold of distinct registered attestors:
 * a call the vault could have accepted at this bind nonce.
 */
const acceptable = (
  chain: ChainClientShape,
  vault: Address,
  signerSets: ReadonlyArray<ReadonlyArray<Address>>
) =>
  Effect.gen(function* () {
    const threshold = yield* chain.readContract({
      address: vault,
      abi: feeVaultAbi,
      functionName: "attestorThreshold"
    })
    for (const signers of signerSets) {
      const distinct = [...new Set(signers.map((s) => s.toLowerCase()))] as Array<Address>
      if (BigInt(distinct.length) < threshold || threshold === 0n) continue
      let registered = 0n
      for (const signer of distinct)
        if (
          yield* chain.readContract({
            address: vault,
            abi: feeVaultAbi,
            functionName: "isAttestor",
            args: [signer]
          })
        )
          registered++
      if (registered >= threshold) return true
    }
    return false
  })

/** What the transaction's calls say of `self`'s signature; `none`: not found on the node yet. */
const readOwnSignature = (chain: ChainClientShape, vault: Address, self: Address, proposal: Proposal) =>
  Effect.gen(function* () {
    if (proposal.block === undefined) return Option.some<OwnSignature>("unreadable")
    const hash = yield* proposalTransaction(chain, vault, proposal, BigInt(proposal.block))
    if (hash === undefined) return Option.none<OwnSignature>()
    const tx = yield* chain.getTransaction(hash)
    if (Option.isNone(tx)) return Option.none<OwnSignature>()
    const calls = proposeBindCalls(tx.value, vault, proposal)
    if (calls === undefined || calls.length === 0) return Option.some<OwnSignature>("unreadable")
    const chainId = yield* chain.chainId
    const signerSets = yield* Effect.promise(() =>
      Promise.all(calls.map((call) => signersOf(chainId, vault, proposal, call.deadline, call.signatures)))
    )
    if (signerSets.some((signers) => signers.some((signer) => same(signer, self))))
      return Option.some<OwnSignature>("carried")
    return Option.some<OwnSignature>((yield* acceptable(chain, vault, signerSets)) ? "absent" : "unreadable")
  })

/** How many passes a proposal whose log or transaction the node does not show yet waits. */
export const NOT_FOUND_PASSES = 12

/**
 * What a pass learns of `proposal`'s signatures: `read` once known; `notFound` when the node does
 * not show its log or transaction yet (after `passes` earlier such passes, `NOT_FOUND_PASSES` in
 * all, it is `unreadable`); `unavailable` when the chain did not answer (never counted: a chain
 * outage must not turn into vetoes).
 */
export type SignatureReading =
  | { readonly _tag: "read"; readonly own: OwnSignature }
  | { readonly _tag: "notFound" }
  | { readonly _tag: "unavailable" }

export const ownSignatureOf = (
  chain: ChainClientShape,
  vault: Address,
  self: Address,
  proposal: Proposal,
  passes = 0
): Effect.Effect<SignatureReading> =>
  readOwnSignature(chain, vault, self, proposal).pipe(
    Effect.map(
      (read): SignatureReading =>
        Option.isSome(read)
          ? { _tag: "read", own: read.value }
          : passes + 1 >= NOT_FOUND_PASSES
            ? { _tag: "read", own: "unreadable" }
            : { _tag: "notFound" }
    ),
    Effect.catchAll((error) =>
      Effect.as(
        Effect.logWarning("bind proposal not judged: its transaction could not be read; next pass").pipe(
          Effect.annotateLogs({ error: error._tag })
        ),
        { _tag: "unavailable" } as SignatureReading
      )
    )
  )
