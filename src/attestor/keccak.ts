/**
 * The keccak-256 of the attestor's commitments (`POST /v1/commitment` and public handles: the user
 * id hash and the handle commitment, docs/protocol.md §2), compiled to WebAssembly by hash-wasm.
 * Under load the JavaScript keccak-256 took 12 to 15 µs a call, two calls a commitment, about a
 * sixth of the route's CPU (bench/PROFILE.md); this one takes about 1 µs. viem's stays the
 * keccak-256 everywhere else.
 *
 * Made at start-up by each handler group that computes commitments, and checked against viem's on
 * inputs either side of keccak-256's 136-byte block before it is used: a hasher that disagrees
 * stops the start-up instead of answering.
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
