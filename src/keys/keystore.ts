/**
 * Web3 Secret Storage v3 keystores (docs/operations.md "Keys"): the encrypted key files geth,
 * foundry (`cast wallet`) and clef write. The key is derived from the passphrase with scrypt or
 * PBKDF2-HMAC-SHA256, the private key is AES-128-CTR encrypted under its first 16 bytes, and
 * `keccak256(derived[16..32] || ciphertext)` is the MAC that tells a wrong passphrase.
 */
import { ctr } from "@noble/ciphers/aes"
import { randomBytes } from "@noble/ciphers/webcrypto"
import { pbkdf2 } from "@noble/hashes/pbkdf2"
import { scrypt } from "@noble/hashes/scrypt"
import { sha256 } from "@noble/hashes/sha2"
import { keccak_256 } from "@noble/hashes/sha3"
import { type Address, bytesToHex, getAddress, type Hex, hexToBytes } from "viem"
import { privateKeyToAddress } from "viem/accounts"

/** Why a keystore cannot be opened; never carries the passphrase or the key. */
export class KeystoreError extends Error {
  constructor(
    readonly reason: "wrong-passphrase" | "malformed" | "unsupported",
    message: string
  ) {
    super(message)
    this.name = "KeystoreError"
  }
}

/** The JSON a keystore file holds (the fields this reads and writes). */
export interface KeystoreV3 {
  readonly version: 3
  readonly id: string
  readonly address: string
  readonly crypto: {
    readonly cipher: "aes-128-ctr"
    readonly ciphertext: string
    readonly cipherparams: { readonly iv: string }
    readonly kdf: "scrypt" | "pbkdf2"
    readonly kdfparams: Record<string, unknown>
    readonly mac: string
  }
}

/** geth's "standard" scrypt cost (`keystore.StandardScryptN`): about a second at start-up. */
export const STANDARD_SCRYPT_N = 262_144

/** Ceilings on what a file may ask of the key derivation, so a hostile file cannot exhaust memory. */
const MAX_SCRYPT_N = 1 << 20
const MAX_PBKDF2_ROUNDS = 10_000_000

const unhex = (value: unknown, field: string, bytes?: number): Uint8Array => {
  if (typeof value !== "string") throw new KeystoreError("malformed", `${field} is missing`)
  const text = value.startsWith("0x") ? value.slice(2) : value
  if (!/^(?:[0-9a-fA-F]{2})*$/.test(text) || (bytes !== undefined && text.length !== bytes * 2))
    throw new KeystoreError(
      "malformed",
      `${field} is not ${bytes === undefined ? "hex" : `${bytes} bytes of hex`}`
    )
  return hexToBytes(`0x${text}`)
}

const positiveInteger = (value: unknown, field: string, max: number): number => {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 1 || value > max)
    throw new KeystoreError("malformed", `${field} must be an integer from 1 to ${max}`)
  return value
}

const field = (value: unknown, name: string): unknown =>
  typeof value === "object" && value !== null ? (value as Record<string, unknown>)[name] : undefined

/** The 32 bytes the passphrase derives under the file's KDF. */
const derive = (kdf: unknown, params: unknown, passphrase: Uint8Array): Uint8Array => {
  const salt = unhex(field(params, "salt"), "kdfparams.salt")
  const dklen = positiveInteger(field(params, "dklen"), "kdfparams.dklen", 64)
  if (dklen < 32) throw new KeystoreError("malformed", "kdfparams.dklen must be at least 32")
  if (kdf === "scrypt") {
    const N = positiveInteger(field(params, "n"), "kdfparams.n", MAX_SCRYPT_N)
    if ((N & (N - 1)) !== 0) throw new KeystoreError("malformed", "kdfparams.n must be a power of two")
    const r = positiveInteger(field(params, "r"), "kdfparams.r", 64)
    const p = positiveInteger(field(params, "p"), "kdfparams.p", 64)
    return scrypt(passphrase, salt, { N, r, p, dkLen: dklen, maxmem: 256 * N * r + 1024 * 1024 })
  }
  if (kdf === "pbkdf2") {
    if (field(params, "prf") !== "hmac-sha256")
      throw new KeystoreError("unsupported", "kdfparams.prf must be hmac-sha256")
    const c = positiveInteger(field(params, "c"), "kdfparams.c", MAX_PBKDF2_ROUNDS)
    return pbkdf2(sha256, passphrase, salt, { c, dkLen: dklen })
  }
  throw new KeystoreError("unsupported", "crypto.kdf must be scrypt or pbkdf2")
}

const macOf = (derived: Uint8Array, ciphertext: Uint8Array): Uint8Array =>
  keccak_256(Uint8Array.from([...derived.subarray(16, 32), ...ciphertext]))

/** Constant-time equality of two byte strings of the same length (the MAC). */
const sameBytes = (a: Uint8Array, b: Uint8Array): boolean => {
  if (a.length !== b.length) return false
  let difference = 0
  for (let i = 0; i < a.length; i++) difference |= a[i]! ^ b[i]!
  return difference === 0
}

/**
 * The private key a keystore's JSON text holds, opened with `passphrase`; a `KeystoreError` when
 * the text is no v3 keystore, uses a KDF or cipher this does not know, or the MAC refuses the
 * passphrase. Upper-case `Crypto`, as some old writers spell it, is read too.
 */
export const decryptKeystore = (text: string, passphrase: string): Hex => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    throw new KeystoreError("malformed", "not JSON")
  }
  if (field(json, "version") !== 3) throw new KeystoreError("unsupported", "not a version 3 keystore")
  const crypto = field(json, "crypto") ?? field(json, "Crypto")
  if (field(crypto, "cipher") !== "aes-128-ctr")
    throw new KeystoreError("unsupported", "crypto.cipher must be aes-128-ctr")
  const ciphertext = unhex(field(crypto, "ciphertext"), "crypto.ciphertext", 32)
  const iv = unhex(field(field(crypto, "cipherparams"), "iv"), "crypto.cipherparams.iv", 16)
  const mac = unhex(field(crypto, "mac"), "crypto.mac", 32)
  const derived = derive(
    field(crypto, "kdf"),
    field(crypto, "kdfparams"),
    new TextEncoder().encode(passphrase)
  )
  if (!sameBytes(macOf(derived, ciphertext), mac))
    throw new KeystoreError("wrong-passphrase", "the passphrase does not open this keystore")
  const key = ctr(derived.subarray(0, 16), iv).decrypt(ciphertext)
  return bytesToHex(key)
}

/** The address a keystore's JSON names (no passphrase needed); undefined when it names none. */
export const keystoreAddress = (text: string): Address | undefined => {
  try {
    const named = field(JSON.parse(text), "address")
    return typeof named === "string" && /^(0x)?[0-9a-fA-F]{40}$/.test(named)
      ? getAddress(named.startsWith("0x") ? named : `0x${named}`)
      : undefined
  } catch {
    return undefined
  }
}

/** A random version 4 UUID, as the `id` of a new keystore. */
const uuidV4 = (): string => {
  const b = randomBytes(16)
  b[6] = (b[6]! & 0x0f) | 0x40
  b[8] = (b[8]! & 0x3f) | 0x80
  const h = bytesToHex(b).slice(2)
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`
}

/**
 * A new v3 keystore of `privateKey` under `passphrase`: scrypt (r 8, p 1, cost `scryptN`, geth's
 * standard by default), a random salt and IV, as geth writes it.
 */
export const encryptKeystore = (
  privateKey: Hex,
  passphrase: string,
  options: { readonly scryptN?: number } = {}
): KeystoreV3 => {
  const n = options.scryptN ?? STANDARD_SCRYPT_N
  const salt = randomBytes(32)
  const iv = randomBytes(16)
  const kdfparams = { dklen: 32, n, p: 1, r: 8, salt: bytesToHex(salt).slice(2) }
  const derived = derive("scrypt", kdfparams, new TextEncoder().encode(passphrase))
  const ciphertext = ctr(derived.subarray(0, 16), iv).encrypt(hexToBytes(privateKey))
  return {
    version: 3,
    id: uuidV4(),
    address: privateKeyToAddress(privateKey).slice(2).toLowerCase(),
    crypto: {
      cipher: "aes-128-ctr",
      ciphertext: bytesToHex(ciphertext).slice(2),
      cipherparams: { iv: bytesToHex(iv).slice(2) },
      kdf: "scrypt",
      kdfparams,
      mac: bytesToHex(macOf(derived, ciphertext)).slice(2)
    }
  }
}
