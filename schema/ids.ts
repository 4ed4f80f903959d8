/**
 * Account ids, commitments and template hashes (docs/protocol.md §2 and §5). Pure functions: the
 * vault computes the same values on-chain and independent clients compute them off-chain.
 */
import { createHmac } from "node:crypto"
import {
  type Address,
  concat,
  encodeAbiParameters,
  type Hex,
  hexToBytes,
  keccak256,
  stringToBytes
} from "viem"

/** `amount == FULL`: the whole balance at execution. */
export const FULL: bigint = 2n ** 256n - 1n
/** `QUOTED | q`: the whole balance, with `minOut` sized for `q` and scaled down when less is left. */
export const QUOTED: bigint = 2n ** 255n

export const isQuotedForm = (amount: bigint): boolean => amount !== FULL && (amount & QUOTED) !== 0n
export const quotedAmount = (amount: bigint): bigint => amount & (QUOTED - 1n)

export const ZERO_ADDRESS: Address = "0x0000000000000000000000000000000000000000"
/** `keccak256(0x)`: the `dataHash` of a fee-only claim. */
export const EMPTY_DATA_HASH: Hex = keccak256("0x")

export const platformIds = {
  microblog: 1,
  messenger: 2,
  codehost: 3,
  fedsocial: 4,
  community: 5
} as const
export type PlatformName = keyof typeof platformIds

export const computeId = (
  kind: 1 | 2,
  commitment: Hex,
  fallbackRecipient: Address,
  fallbackDelay: bigint
): Hex =>
  keccak256(
    encodeAbiParameters(
      [{ type: "uint8" }, { type: "bytes32" }, { type: "address" }, { type: "uint256" }],
      [kind, commitment, fallbackRecipient, fallbackDelay]
    )
  )

/** Kind-1 commitment: hides nothing but binds the owner key to a salt. */
export const ownerCommitment = (owner: Address, salt: Hex): Hex =>
  keccak256(encodeAbiParameters([{ type: "address" }, { type: "bytes32" }], [owner, salt]))

/**
 * A keccak-256 of bytes. viem's unless a caller passes another: the attestor's commitments pass a
 * WebAssembly one (src/chain/keccak.ts), which is checked against viem's when it is made.
 */
export type Keccak256 = (bytes: Uint8Array) => Hex
export const viemKeccak256: Keccak256 = (bytes) => keccak256(bytes)

export const userIdHash = (userId: string, hash: Keccak256 = viemKeccak256): Hex =>
  hash(stringToBytes(userId))

/** HMAC-SHA256 keyed by the attestor's pepper over `decimal(platformId) ":" userId`. */
export const attestorSalt = (pepper: Uint8Array, platformId: number, userId: string): Hex =>
  `0x${createHmac("sha256", pepper).update(`${platformId}:${userId}`, "utf8").digest("hex")}`

export const handleCommitment = (
  platformId: number,
  userIdHashValue: Hex,
  salt: Hex,
  nonce: Hex,
  hash: Keccak256 = viemKeccak256
): Hex =>
  hash(
    hexToBytes(
      encodeAbiParameters(
        [{ type: "uint8" }, { type: "bytes32" }, { type: "bytes32" }, { type: "bytes32" }],
        [platformId, userIdHashValue, salt, nonce]
      )
    )
  )

/** `keccak256(keccak256(t_0) || ... || keccak256(t_n))`. */
export const templatesHash = (templates: readonly Hex[]): Hex =>
  keccak256(templates.length === 0 ? "0x" : concat(templates.map((t) => keccak256(t))))

export const SHIELD_PAYLOAD_BYTES = 320
export const MAX_TEMPLATES = 32
/** Note values are `uint120`. */
export const MAX_NOTE_VALUE: bigint = 2n ** 120n - 1n

export const shieldRequestAbi = [
  { type: "bytes32", name: "id" },
  {
    type: "tuple",
    name: "request",
    components: [
      {
        type: "tuple",
        name: "preimage",
        components: [
          { type: "bytes32", name: "npk" },
          {
            type: "tuple",
            name: "token",
            components: [
              { type: "uint8", name: "tokenType" },
              { type: "address", name: "tokenAddress" },
              { type: "uint256", name: "tokenSubID" }
            ]
          },
          { type: "uint120", name: "value" }
        ]
      },
      {
        type: "tuple",
        name: "ciphertext",
        components: [
          { type: "bytes32[3]", name: "encryptedBundle" },
          { type: "bytes32", name: "shieldKey" }
        ]
      }
    ]
  }
] as const

const ZERO32: Hex = `0x${"00".repeat(32)}`

/** A canonical 320-byte shield template: settlement asset, token type 0, sub id 0. */
export const shieldPayload = (
  id: Hex,
  settlementAsset: Address,
  value: bigint,
  npk: Hex = ZERO32,
  encryptedBundle: readonly [Hex, Hex, Hex] = [ZERO32, ZERO32, ZERO32],
  shieldKey: Hex = ZERO32
): Hex =>
  encodeAbiParameters(shieldRequestAbi, [
    id,
    {
      preimage: { npk, token: { tokenType: 0, tokenAddress: settlementAsset, tokenSubID: 0n }, value },
      ciphertext: { encryptedBundle, shieldKey }
    }
  ])
