/**
 * Whose signatures a pending bind proposal carries (docs/attestor.md "The committee"): the
 * `BindProposed` log of the proposal's block, its transaction, and the `BindOwner` signatures of its
 * `proposeBind` call, each recovered over the proposal's message in the vault's domain. The
 * committee veto rule (`committeeVerdict` in vetoVerdicts.ts) asks whether this attestor's own
 * signature is among them: a member that was not asked is spared; a proposal carrying its key's
 * signature that it never issued is vetoed.
 *
 * A transaction that is not a call of the vault (`proposeBind`, or the vault's `multicall` holding
 * it, as the relayer sends) — a contract wallet's, say — is `unreadable`, and judged by the strict
 * rule. The chain not answering is `None`: judged on a later
 * pass.
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
import type { OwnSignature, Proposal } from "./vetoVerdicts.js"

const bindProposedEvent = getAbiItem({ abi: feeVaultAbi, name: "BindProposed" })

const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase()

/** The `proposeBind` call for `proposal` in vault calldata `data`, or inside its `multicall`. */
const proposeBindIn = (data: Hex, proposal: Proposal, depth = 0): ProposeBindArgs | undefined => {
  try {
    const call = decodeFunctionData({ abi: feeVaultAbi, data })
    if (call.functionName === "multicall" && depth === 0) {
      // The relayer sends a registration and a proposal as one `multicall` (docs/relayer.md).
      for (const inner of call.args[0]) {
        const found = proposeBindIn(inner, proposal, depth + 1)
        if (found !== undefined) return found
      }
      return undefined
    }
    if (call.functionName !== "proposeBind") return undefined
    const [id, newOwner, deadline, signatures] = call.args
    if (!same(id, proposal.id) || !same(newOwner, proposal.newOwner)) return undefined
    return { deadline, signatures }
  } catch {
    return undefined
  }
}

interface ProposeBindArgs {
  readonly deadline: bigint
  readonly signatures: ReadonlyArray<Hex>
}

/**
 * The `proposeBind` call of `tx` for `proposal`: a direct call of the vault, or one inside the
 * vault's own `multicall`. A call through any other contract is not read.
 */
export const proposeBindCall = (tx: Transaction, vault: Address, proposal: Proposal) => {
  if (tx.to === null || tx.to === undefined || !same(tx.to, vault)) return undefined
  return proposeBindIn(tx.input, proposal)
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
 * Whether `proposal` carries `self`'s signature; `None` when the chain did not answer.
 */
export const ownSignatureOf = (
  chain: ChainClientShape,
  vault: Address,
  self: Address,
  proposal: Proposal
): Effect.Effect<Option.Option<OwnSignature>> =>
  Effect.gen(function* () {
    if (proposal.block === undefined) return Option.some<OwnSignature>("unreadable")
    const hash = yield* proposalTransaction(chain, vault, proposal, BigInt(proposal.block))
    if (hash === undefined) return Option.some<OwnSignature>("unreadable")
    const tx = yield* chain.getTransaction(hash)
    const call = Option.isSome(tx) ? proposeBindCall(tx.value, vault, proposal) : undefined
    if (call === undefined) return Option.some<OwnSignature>("unreadable")
    const chainId = yield* chain.chainId
    const signers = yield* Effect.promise(() =>
      signersOf(chainId, vault, proposal, call.deadline, call.signatures)
    )
    return Option.some<OwnSignature>(signers.some((signer) => same(signer, self)) ? "carried" : "absent")
  }).pipe(
    Effect.catchAll((error) =>
      Effect.as(
        Effect.logWarning("bind proposal not judged: its transaction could not be read; next pass").pipe(
          Effect.annotateLogs({ error: error._tag })
        ),
        Option.none<OwnSignature>()
      )
    )
  )
