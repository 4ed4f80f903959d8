/**
 * secp256k1 on the relayer's claim path in WebAssembly (libsecp256k1, by tiny-secp256k1): the
 * recovery of an owner's signature and the signature of each transaction the sender sends. In
 * JavaScript (@noble/curves, viem's) they were the largest share of the relayer's CPU per claim
 * that it controls; here the recovery takes about a ninth of that time and the signature about a
 * third (bench/PROFILE.md). geth's `ecrecover` (in its cgo builds) is libsecp256k1's as well.
 *
 * Both give what viem gives, byte for byte: the recovered address, and the deterministic (RFC 6979)
 * low-s signature, so the same transaction and hash. `checkedAgainstViem` compares them with viem's
 * on fixed keys and digests when a service starts, and stops the start-up if they disagree.
 */
import { Effect } from "effect"
import * as libsecp256k1 from "tiny-secp256k1"
import {
  type Address,
  bytesToHex,
  type Hex,
  hexToBytes,
  keccak256,
  recoverAddress,
  type Signature,
  signatureToHex
} from "viem"
import { publicKeyToAddress, sign as viemSign } from "viem/accounts"

/**
 * The address whose key made the 65-byte `r || s || v` `signature` (v 27 or 28) of the 32-byte
 * `digest`, or undefined when it recovers to no point. The caller checks the low `s` and `v`
 * (src/relayer/validation/VaultSignatures.ts), as the vault does.
 */
export const recoverSigner = (digest: Hex, signature: Hex): Address | undefined => {
  const v = Number.parseInt(signature.slice(130, 132), 16)
  if (signature.length !== 132 || (v !== 27 && v !== 28)) return undefined
  try {
    const point = libsecp256k1.recover(
      hexToBytes(digest),
      hexToBytes(`0x${signature.slice(2, 130)}`),
      (v - 27) as 0 | 1,
      false
    )
    return point === null ? undefined : publicKeyToAddress(bytesToHex(point))
  } catch {
    // r or s zero or not below the curve's order: no signer, as ecrecover answers.
    return undefined
  }
}

/** The deterministic signature of a 32-byte `digest` with `privateKey`, as viem's `sign` gives it. */
export const signDigest = (digest: Hex, privateKey: Uint8Array): Signature => {
  const { signature, recoveryId } = libsecp256k1.signRecoverable(hexToBytes(digest), privateKey)
  return {
    r: bytesToHex(signature.subarray(0, 32)),
    s: bytesToHex(signature.subarray(32, 64)),
    yParity: recoveryId
  }
}

/** Fixed keys and digests the start-up check signs and recovers with both implementations. */
const SAMPLES = [1, 2, 3, 4, 5, 6, 7, 8].map((i) => ({
  key: keccak256(`0x${i.toString(16).padStart(2, "0")}`),
  digest: keccak256(`0x${(i + 100).toString(16).padStart(4, "0")}`)
}))

/** Whether `recoverSigner` and `signDigest` agree with viem's recovery and signature. */
const agreement: Effect.Effect<void> = Effect.gen(function* () {
  for (const { key, digest } of SAMPLES) {
    const ours = signDigest(digest, hexToBytes(key))
    const theirs = yield* Effect.promise(() => viemSign({ hash: digest, privateKey: key }))
    if (ours.r !== theirs.r || ours.s !== theirs.s || ours.yParity !== theirs.yParity)
      return yield* Effect.dieMessage("the WebAssembly secp256k1 signature disagrees with viem's")
    const signature = signatureToHex(theirs)
    const expected = yield* Effect.promise(() => recoverAddress({ hash: digest, signature }))
    if (recoverSigner(digest, signature) !== expected)
      return yield* Effect.dieMessage("the WebAssembly secp256k1 recovery disagrees with viem's")
  }
})

let agreed = false
/** `agreement`, once per process (each service that signs or recovers asks it at start-up). */
export const checkedAgainstViem: Effect.Effect<void> = Effect.suspend(() =>
  agreed
    ? Effect.void
    : Effect.tap(agreement, () => {
        agreed = true
      })
)
