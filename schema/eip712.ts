/**
 * Every EIP-712 domain and type of the protocol (docs/protocol.md §3), in one place. The vault, the
 * relayer, the attestor and the tests all sign and verify against these definitions.
 */
import type { Address } from "viem"

export const vaultDomainName = "FeeVault"
export const vaultDomainVersion = "1"
export const publicHandleDomainName = "FeeVault PublicHandle"

export const vaultDomain = (chainId: number, vault: Address) =>
  ({
    name: vaultDomainName,
    version: vaultDomainVersion,
    chainId,
    verifyingContract: vault
  }) as const

/** No verifying contract: a public-handle attestation is about a platform account, not a vault. */
export const publicHandleDomain = (chainId: number) =>
  ({ name: publicHandleDomainName, version: "1", chainId }) as const

export const vaultTypes = {
  Claim: [
    { name: "beneficiaryId", type: "bytes32" },
    { name: "asset", type: "address" },
    { name: "amount", type: "uint256" },
    { name: "adapter", type: "address" },
    { name: "dataHash", type: "bytes32" },
    { name: "relayer", type: "address" },
    { name: "relayerFee", type: "uint256" },
    { name: "nonce", type: "uint256" },
    { name: "deadline", type: "uint256" }
  ],
  Consolidate: [
    { name: "id", type: "bytes32" },
    { name: "assetIn", type: "address" },
    { name: "amountIn", type: "uint256" },
    { name: "minOut", type: "uint256" },
    { name: "nonce", type: "uint256" },
    { name: "deadline", type: "uint256" }
  ],
  RegisterShieldTemplates: [
    { name: "id", type: "bytes32" },
    { name: "templatesHash", type: "bytes32" },
    { name: "nonce", type: "uint256" },
    { name: "deadline", type: "uint256" }
  ],
  RotateOwner: [
    { name: "id", type: "bytes32" },
    { name: "newOwner", type: "address" },
    { name: "nonce", type: "uint256" },
    { name: "deadline", type: "uint256" }
  ],
  Ping: [
    { name: "id", type: "bytes32" },
    { name: "nonce", type: "uint256" },
    { name: "deadline", type: "uint256" }
  ],
  CancelBind: [
    { name: "id", type: "bytes32" },
    { name: "bindNonce", type: "uint256" },
    { name: "deadline", type: "uint256" }
  ],
  BindOwner: [
    { name: "id", type: "bytes32" },
    { name: "newOwner", type: "address" },
    { name: "bindNonce", type: "uint256" },
    { name: "deadline", type: "uint256" }
  ]
} as const

export const publicHandleTypes = {
  PublicHandle: [
    { name: "platformId", type: "uint8" },
    { name: "userId", type: "string" },
    { name: "handle", type: "string" },
    { name: "issuedAt", type: "uint64" }
  ]
} as const

export type VaultPrimaryType = keyof typeof vaultTypes

/** The canonical type strings, as the vault hashes them (`keccak256` of these is the typehash). */
export const typeString = (primaryType: VaultPrimaryType | "PublicHandle"): string => {
  const fields = primaryType === "PublicHandle" ? publicHandleTypes.PublicHandle : vaultTypes[primaryType]
  return `${primaryType}(${fields.map((f) => `${f.type} ${f.name}`).join(",")})`
}

/** Permit2's domain (no version; docs/protocol.md §10 "Paid lookups"). */
export const permit2Domain = (chainId: number, permit2: Address) =>
  ({ name: "Permit2", chainId, verifyingContract: permit2 }) as const

/** The `PermitWitnessTransferFrom` a payer signs for a paid lookup, witness `Witness(address to,uint256 validAfter)`. */
export const permit2WitnessTypes = {
  PermitWitnessTransferFrom: [
    { name: "permitted", type: "TokenPermissions" },
    { name: "spender", type: "address" },
    { name: "nonce", type: "uint256" },
    { name: "deadline", type: "uint256" },
    { name: "witness", type: "Witness" }
  ],
  TokenPermissions: [
    { name: "token", type: "address" },
    { name: "amount", type: "uint256" }
  ],
  Witness: [
    { name: "to", type: "address" },
    { name: "validAfter", type: "uint256" }
  ]
} as const
