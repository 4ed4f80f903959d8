/**
 * A signed direct claim request as an outside client writes it (docs/protocol.md §3, §5), ready for
 * `POST /v1/claim`. Free of vitest, so benchmarks use it too.
 */
import { type Address, encodeAbiParameters, type Hex, keccak256, zeroAddress } from "viem"
import type { PrivateKeyAccount } from "viem/accounts"
import { vaultDomain, vaultTypes } from "../../schema/eip712.js"

export interface DirectClaimInput {
  readonly signer: PrivateKeyAccount
  readonly chainId: number
  readonly vault: Address
  readonly id: Hex
  readonly asset: Address
  readonly amount: bigint
  readonly recipient: Address
  readonly relayer: Address
  readonly relayerFee: bigint
  readonly nonce: bigint
  readonly deadline: bigint
  /** The registration step, for an account not registered yet. */
  readonly register?: unknown
}

/** The request body, bigints as decimal strings. */
export const directClaimBody = async (input: DirectClaimInput): Promise<string> => {
  const adapterData = encodeAbiParameters([{ type: "address" }], [input.recipient])
  const claim = {
    beneficiaryId: input.id,
    asset: input.asset,
    amount: input.amount,
    adapter: zeroAddress,
    dataHash: keccak256(adapterData),
    relayer: input.relayer,
    relayerFee: input.relayerFee,
    nonce: input.nonce,
    deadline: input.deadline
  }
  const signature = await input.signer.signTypedData({
    domain: vaultDomain(input.chainId, input.vault),
    types: vaultTypes,
    primaryType: "Claim",
    message: claim
  })
  return JSON.stringify(
    { claim, adapterData, signature, ...(input.register === undefined ? {} : { register: input.register }) },
    (_, v) => (typeof v === "bigint" ? v.toString() : v)
  )
}
