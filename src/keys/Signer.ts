/**
 * The `Signer`: the only thing that holds or reaches a service's signing key (docs/operations.md
 * "Keys"). The relayer's hot key signs its transactions with one; the attestor's key signs
 * `BindOwner`, `PublicHandle`, commitments and its veto transactions with another. Everything else
 * sees the address and asks for signatures of 32-byte digests.
 *
 * Backends: `local` (the key given as a setting or a file) and `keystore` (a Web3 Secret Storage
 * v3 file opened at start-up, src/keys/keystore.ts). Both keep the key in this process's memory
 * and sign with libsecp256k1 (src/chain/secp256k1.ts); a backend that signs elsewhere (a token)
 * gives the same shape, its `sign` an effect that may wait on it.
 */
import { Effect } from "effect"
import {
  type Address,
  type Hex,
  hashTypedData,
  hexToBytes,
  type Signature,
  serializeSignature,
  type TypedData,
  type TypedDataDefinition
} from "viem"
import { privateKeyToAccount } from "viem/accounts"
import { signDigest } from "../chain/secp256k1.js"

/** The backends a `*_SIGNER` setting names. */
export const signerBackends = ["local", "keystore"] as const
export type SignerBackend = (typeof signerBackends)[number]

export interface Signer {
  /** The key's address, read from the backend at start-up. */
  readonly address: Address
  /** The uncompressed public key (`0x04…`, 65 bytes): `/v1/commitment`'s `attestorPubKey`. */
  readonly publicKey: Hex
  readonly backend: SignerBackend
  /**
   * The deterministic (RFC 6979), low-s signature of a 32-byte digest, with its recovery bit, as
   * viem's `sign` gives it.
   */
  readonly sign: (digest: Hex) => Effect.Effect<Signature>
}

/** A signer over a key held in memory (the `local` and `keystore` backends). */
export const inMemorySigner = (privateKey: Hex, backend: SignerBackend): Signer => {
  const key = hexToBytes(privateKey)
  const account = privateKeyToAccount(privateKey)
  return {
    address: account.address,
    publicKey: account.publicKey,
    backend,
    sign: (digest) => Effect.sync(() => signDigest(digest, key))
  }
}

/** The `local` backend: a key given in hex (tests, the devnet, `*_PRIVATE_KEY`). */
export const localSigner = (privateKey: Hex): Signer => inMemorySigner(privateKey, "local")

/** An EIP-712 signature by `signer`, as the 65-byte hex `r || s || v` viem's `signTypedData` gives. */
export const signTypedDataWith = <
  const T extends TypedData | Record<string, unknown>,
  P extends keyof T | "EIP712Domain"
>(
  signer: Signer,
  definition: TypedDataDefinition<T, P>
): Effect.Effect<Hex> =>
  Effect.map(signer.sign(hashTypedData(definition)), (signature) => serializeSignature(signature))

/** The line a service logs at start-up: which backend holds the key, and its address. */
export const signerStartupLine = (key: string, signer: Signer): string =>
  `${key}: ${signer.backend} signer, address ${signer.address}`
