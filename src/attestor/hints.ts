/**
 * Hints (PROTOCOL.md §6): the plaintext that lets an attestor recompute a handle account's id,
 * sealed to each committee member's hint key with eciesjs's default configuration, and packed as
 * `beneficiaryHint = abi.encode(bytes[] envelopes)` for `TokenLaunched`.
 */
import { encrypt, PrivateKey } from "eciesjs"
import { type Address, bytesToHex, encodeAbiParameters, type Hex, hexToBytes } from "viem"
import { attestorSalt, computeId, handleCommitment, userIdHash, ZERO_ADDRESS } from "../../schema/ids.js"

export interface HintPlaintext {
  readonly platformId: number
  readonly userId: string
  readonly nonce: Hex
  readonly attestorSalt: Hex
  readonly fallbackRecipient?: Address
  /** Decimal string. */
  readonly fallbackDelay?: string
}

/** Field order as PROTOCOL.md §6 shows it; optional fields only when present. */
export const hintJson = (hint: HintPlaintext): string =>
  JSON.stringify({
    platformId: hint.platformId,
    userId: hint.userId,
    nonce: hint.nonce,
    attestorSalt: hint.attestorSalt,
    ...(hint.fallbackRecipient !== undefined ? { fallbackRecipient: hint.fallbackRecipient } : {}),
    ...(hint.fallbackDelay !== undefined ? { fallbackDelay: hint.fallbackDelay } : {})
  })

/** The compressed secp256k1 public key hints are sealed to. */
export const hintPublicKeyOf = (hintPrivateKey: Hex): Hex =>
  `0x${new PrivateKey(hexToBytes(hintPrivateKey)).publicKey.toHex(true)}`

export const sealHint = (hintPublicKey: Hex, hint: HintPlaintext): Hex =>
  bytesToHex(encrypt(hexToBytes(hintPublicKey), new TextEncoder().encode(hintJson(hint))))

export const encodeBeneficiaryHint = (envelopes: ReadonlyArray<Hex>): Hex =>
  encodeAbiParameters([{ type: "bytes[]" }], [envelopes])

/** The kind-2 beneficiary id a hint commits to. */
export const hintBeneficiaryId = (hint: HintPlaintext): Hex =>
  computeId(
    2,
    handleCommitment(hint.platformId, userIdHash(hint.userId), hint.attestorSalt, hint.nonce),
    hint.fallbackRecipient ?? ZERO_ADDRESS,
    BigInt(hint.fallbackDelay ?? "0")
  )

/** A creator's hint for `(platformId, userId)` under an attestor's pepper. */
export const makeHint = (
  pepper: Uint8Array,
  platformId: number,
  userId: string,
  nonce: Hex,
  fallback?: { readonly recipient: Address; readonly delay: bigint }
): HintPlaintext => ({
  platformId,
  userId,
  nonce,
  attestorSalt: attestorSalt(pepper, platformId, userId),
  ...(fallback !== undefined
    ? { fallbackRecipient: fallback.recipient, fallbackDelay: fallback.delay.toString() }
    : {})
})
