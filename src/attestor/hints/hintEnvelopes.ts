/**
 * Hints (docs/protocol.md §6): the plaintext that lets an attestor recompute a handle account's id,
 * sealed to each committee member's hint key with eciesjs's default configuration, and packed as
 * `beneficiaryHint = abi.encode(bytes[] envelopes)` for `TokenLaunched`; and the opening side, a
 * pure function of the hint key and the event that the hint index folds with.
 */
import { ECIES_CONFIG, encrypt, PrivateKey, PublicKey } from "eciesjs"
import { symDecrypt } from "eciesjs/utils"
import { Either, Schema } from "effect"
import {
  type Address,
  bytesToHex,
  decodeAbiParameters,
  encodeAbiParameters,
  type Hex,
  hexToBytes
} from "viem"
import { Hint } from "../../../schema/attestor.js"
import { attestorSalt, computeId, handleCommitment, userIdHash, ZERO_ADDRESS } from "../../../schema/ids.js"
import type { EscrowHint } from "../../store/projections/hints.js"

export interface HintPlaintext {
  readonly platformId: number
  readonly userId: string
  readonly nonce: Hex
  readonly attestorSalt: Hex
  readonly fallbackRecipient?: Address
  /** Decimal string. */
  readonly fallbackDelay?: string
}

/** Field order as docs/protocol.md §6 shows it; optional fields only when present. */
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

/**
 * A creator's `beneficiaryHint` for a committee (docs/attestor.md §2 "Hint"): one envelope per
 * recipient hint key, each opened alone by its key's holder. Hints are threshold 1, so a threshold
 * above 1 (a hint only several recipients together could open) is refused, never sealed as if it
 * were 1. Refused too: no recipient, one key twice (in either encoding), and more recipients than
 * an attestor tries (`MAX_ENVELOPES`: such a hint is opened by no one). Throws a `RangeError`
 * naming the refusal.
 */
export const sealBeneficiaryHint = (
  hintPublicKeys: ReadonlyArray<Hex>,
  hint: HintPlaintext,
  options: { readonly threshold?: number } = {}
): Hex => {
  const threshold = options.threshold ?? 1
  if (threshold !== 1)
    throw new RangeError(
      `hints are threshold 1: each recipient opens its envelope alone; threshold ${threshold} is refused`
    )
  if (hintPublicKeys.length === 0) throw new RangeError("a hint needs at least one recipient hint key")
  if (hintPublicKeys.length > MAX_ENVELOPES)
    throw new RangeError(`a hint has at most ${MAX_ENVELOPES} recipients: attestors open no larger one`)
  const compressed = hintPublicKeys.map((key) => PublicKey.fromHex(key).toHex(true))
  if (new Set(compressed).size !== compressed.length)
    throw new RangeError("a recipient hint key is listed twice")
  return encodeBeneficiaryHint(hintPublicKeys.map((key) => sealHint(key, hint)))
}

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

// ---------------------------------------------------------------------------------------------
// Opening
// ---------------------------------------------------------------------------------------------

/** Envelopes one hint may carry; a hint with more is not opened at all. */
export const MAX_ENVELOPES = 16
/**
 * Bytes of one envelope: 65 (ephemeral key) + 16 (nonce) + 16 (tag) + the plaintext, whose
 * longest protocol form is about 260 bytes. Larger envelopes are not decrypted.
 */
export const MAX_ENVELOPE_BYTES = 1024
/** Bytes of a whole `beneficiaryHint`: the envelope limits plus the ABI framing. */
export const MAX_HINT_BYTES = 64 + MAX_ENVELOPES * (64 + MAX_ENVELOPE_BYTES)

/**
 * Why a hint, or one of its envelopes, was set aside, as `attestor_hints_rejected_total{reason}`
 * counts it. An envelope this attestor cannot decrypt is someone else's and counts nothing.
 * - `event`: the stored `TokenLaunched` itself is malformed;
 * - `encoding`: `beneficiaryHint` is not `abi.encode(bytes[])`;
 * - `too_large`: over `MAX_HINT_BYTES` or `MAX_ENVELOPES` (not opened), or an envelope over
 *   `MAX_ENVELOPE_BYTES` (skipped);
 * - `plaintext`: an envelope decrypted with this attestor's key is not a well-formed hint;
 * - `mismatch`: a well-formed hint that does not commit to the launch's beneficiary id.
 */
export const hintRejectionReasons = ["event", "encoding", "too_large", "plaintext", "mismatch"] as const
export type HintRejection = (typeof hintRejectionReasons)[number]

export interface HintOpening {
  /** The hint addressed to this attestor that commits to the id, if any envelope holds one. */
  readonly hint: EscrowHint | undefined
  /** One entry per rejected hint or envelope. */
  readonly rejected: ReadonlyArray<HintRejection>
}

const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })
const decodeHint = Schema.decodeUnknownEither(Hint, { onExcessProperty: "error" })

/**
 * A hint plaintext read strictly (docs/protocol.md §6): UTF-8 JSON of exactly the protocol's fields,
 * `platformId` 1..5, a canonical numeric `userId`, bytes32 `nonce` and `attestorSalt`, and the
 * fallback fields both or neither, naming a real fallback (recipient and delay both non-zero) or
 * none (both zero, the same as absent, as the vault's registration rule has it). Hex comes back
 * lowercase and the recipient checksummed. Undefined for anything else.
 */
export const parseHintPlaintext = (bytes: Uint8Array): HintPlaintext | undefined => {
  let json: unknown
  try {
    json = JSON.parse(decoder.decode(bytes))
  } catch {
    return undefined
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) return undefined
  const decoded = decodeHint(json)
  if (Either.isLeft(decoded)) return undefined
  const h = decoded.right
  if ((h.fallbackRecipient === undefined) !== (h.fallbackDelay === undefined)) return undefined
  const base = { platformId: h.platformId, userId: h.userId, nonce: h.nonce, attestorSalt: h.attestorSalt }
  if (h.fallbackRecipient === undefined || h.fallbackDelay === undefined) return base
  const noRecipient = h.fallbackRecipient === ZERO_ADDRESS
  const noDelay = h.fallbackDelay === 0n
  if (noRecipient !== noDelay) return undefined
  return noRecipient
    ? base
    : { ...base, fallbackRecipient: h.fallbackRecipient, fallbackDelay: h.fallbackDelay.toString() }
}

/** The escrow a hint describes, with its handle commitment. */
export const escrowHintOf = (hint: HintPlaintext): EscrowHint => ({
  platformId: hint.platformId,
  userId: hint.userId,
  nonce: hint.nonce,
  attestorSalt: hint.attestorSalt,
  handleCommitment: handleCommitment(hint.platformId, userIdHash(hint.userId), hint.attestorSalt, hint.nonce),
  fallback:
    hint.fallbackRecipient === undefined
      ? undefined
      : { recipient: hint.fallbackRecipient, delay: BigInt(hint.fallbackDelay ?? "0") }
})

const escrowHintId = (hint: EscrowHint): Hex =>
  computeId(2, hint.handleCommitment, hint.fallback?.recipient ?? ZERO_ADDRESS, hint.fallback?.delay ?? 0n)

/** The envelopes of `abi.encode(bytes[])`; `encoding` or `too_large` when they cannot be had. */
const envelopesOf = (beneficiaryHint: Hex): ReadonlyArray<Uint8Array> | HintRejection => {
  if (beneficiaryHint.length > 2 + 2 * MAX_HINT_BYTES) return "too_large"
  const bytes = hexToBytes(beneficiaryHint)
  // The array's length word, read before decoding so a huge count is refused without a loop.
  if (bytes.length < 64) return "encoding"
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const offset = BigInt(`0x${view.subarray(0, 32).toString("hex")}`)
  if (offset > BigInt(bytes.length - 32)) return "encoding"
  const count = BigInt(`0x${view.subarray(Number(offset), Number(offset) + 32).toString("hex")}`)
  if (count > BigInt(MAX_ENVELOPES)) return "too_large"
  try {
    const [envelopes] = decodeAbiParameters([{ type: "bytes[]" }], beneficiaryHint)
    return envelopes.map((e) => hexToBytes(e))
  } catch {
    return "encoding"
  }
}

/**
 * eciesjs's `decrypt` with its default configuration, with the receiver's key parsed once:
 * `decrypt` re-derives the receiver's public key on every call, which costs as much as the
 * decryption itself. The steps are `decrypt`'s own (`test/attestor/hint-open.test.ts` checks the
 * two agree). Throws when the envelope is not addressed to `receiver` or is not an envelope.
 */
const decryptWith = (receiver: PrivateKey, envelope: Uint8Array): Uint8Array => {
  const keySize = ECIES_CONFIG.ephemeralKeySize
  const ephemeral = new PublicKey(envelope.subarray(0, keySize), ECIES_CONFIG.ellipticCurve)
  const sharedKey = ephemeral.decapsulate(receiver, ECIES_CONFIG.isHkdfKeyCompressed)
  return symDecrypt(ECIES_CONFIG, sharedKey, envelope.subarray(keySize))
}

/** Opens the hints of launches with one hint key; see `openHint`. */
export type HintOpener = (beneficiaryId: Hex, beneficiaryHint: Hex) => HintOpening

/** The opener of one hint key; throws when the key is not a valid secp256k1 private key. */
export const hintOpener = (hintPrivateKey: Hex): HintOpener => {
  const receiver = new PrivateKey(hexToBytes(hintPrivateKey))
  return (beneficiaryId, beneficiaryHint) => {
    // An empty hint is a launch to an account that needs none (an owner account).
    if (beneficiaryHint === "0x") return { hint: undefined, rejected: [] }
    const envelopes = envelopesOf(beneficiaryHint)
    if (typeof envelopes === "string") return { hint: undefined, rejected: [envelopes] }
    const id = beneficiaryId.toLowerCase()
    const rejected: Array<HintRejection> = []
    let found: EscrowHint | undefined
    for (const envelope of envelopes) {
      if (envelope.length > MAX_ENVELOPE_BYTES) {
        rejected.push("too_large")
        continue
      }
      let plaintext: Uint8Array
      try {
        plaintext = decryptWith(receiver, envelope)
      } catch {
        continue
      }
      const parsed = parseHintPlaintext(plaintext)
      if (parsed === undefined) {
        rejected.push("plaintext")
        continue
      }
      const hint = escrowHintOf(parsed)
      if (escrowHintId(hint) !== id) {
        rejected.push("mismatch")
        continue
      }
      found ??= hint
    }
    return { hint: found, rejected }
  }
}

/**
 * The hint of a `TokenLaunched` event as the holder of `hintPrivateKey` reads it (docs/protocol.md
 * §6): decode `abi.encode(bytes[] envelopes)`, decrypt each envelope with the key (other
 * attestors' envelopes fail and are passed over), parse the plaintext strictly, recompute the
 * handle commitment and `computeId(2, …)`, and keep the hint only when that is `beneficiaryId`.
 * A pure function: the same key and event always give the same opening. Malformed input never
 * throws; an invalid key does.
 */
export const openHint = (hintPrivateKey: Hex, beneficiaryId: Hex, beneficiaryHint: Hex): HintOpening =>
  hintOpener(hintPrivateKey)(beneficiaryId, beneficiaryHint)
