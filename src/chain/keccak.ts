/**
 * keccak-256 compiled to WebAssembly by hash-wasm, where the services hash most: the attestor's
 * commitments (`POST /v1/commitment` and public handles: the user id hash and the handle
 * commitment, docs/protocol.md §2) and the sender's transactions (the digest it signs and the
 * hash it stores, each over the whole serialized transaction). The JavaScript keccak-256 takes
 * 12 to 15 µs for a commitment's input and about 95 µs for a kilobyte of calldata; this one about
 * 1 µs and 5 µs (bench/PROFILE.md). viem's stays the keccak-256 everywhere else.
 *
 * Made at start-up by each part that uses it, and checked against viem's on inputs either side of
 * keccak-256's 136-byte block before it is used: a hasher that disagrees stops the start-up
 * instead of answering.
 */
import { Effect } from "effect"
import { createKeccak } from "hash-wasm"
import type { Hex } from "viem"
import { type Keccak256, viemKeccak256 } from "../../schema/ids.js"

/** Lengths around the rate of keccak-256 (136 bytes), where padding is decided. */
const CHECKED_LENGTHS = [0, 1, 31, 32, 33, 96, 128, 135, 136, 137, 271, 272, 273, 1000]

/** `hash` if it agrees with viem's keccak-256 on every checked length; a defect otherwise. */
export const checkedAgainstViem = (hash: Keccak256): Effect.Effect<Keccak256> =>
  Effect.suspend(() => {
    for (const length of CHECKED_LENGTHS) {
      const sample = Uint8Array.from({ length }, (_, i) => (i * 131 + length) & 0xff)
      if (hash(sample) !== viemKeccak256(sample))
        return Effect.dieMessage(`the WebAssembly keccak-256 disagrees with viem's on ${length} bytes`)
    }
    return Effect.succeed(hash)
  })

export const wasmKeccak256: Effect.Effect<Keccak256> = Effect.flatMap(
  Effect.promise(() => createKeccak(256)),
  (hasher) =>
    // One instance, used start to finish within each synchronous call: calls cannot interleave.
    checkedAgainstViem((bytes) => {
      hasher.init()
      hasher.update(bytes)
      return `0x${hasher.digest("hex")}` as Hex
    })
)
