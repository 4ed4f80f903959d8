/**
 * The WebAssembly keccak-256 (src/chain/keccak.ts) gives viem's answer on any input,
 * one call after another on its single instance, and a hasher that disagrees with viem's is refused
 * when it is made.
 */
import { randomBytes } from "node:crypto"
import { Cause, Effect, Exit } from "effect"
import { keccak256 } from "viem"
import { describe, expect, it } from "vitest"
import { handleCommitment, type Keccak256, userIdHash, viemKeccak256 } from "../../schema/ids.js"
import { checkedAgainstViem, wasmKeccak256 } from "../../src/chain/keccak.js"

describe("the attestor's keccak-256", () => {
  it("hashes the empty input to the known keccak-256 value", async () => {
    const hash = await Effect.runPromise(wasmKeccak256)
    expect(hash(new Uint8Array())).toBe("0xc5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470")
  })

  it("agrees with viem's on random inputs of every length up to three blocks, call after call", async () => {
    const hash = await Effect.runPromise(wasmKeccak256)
    for (let length = 0; length <= 3 * 136 + 1; length++) {
      // Two different inputs of each length in turn: nothing of one call is left in the next.
      for (const bytes of [randomBytes(length), randomBytes(length)])
        expect(hash(bytes), `${length} bytes`).toBe(keccak256(bytes))
    }
  })

  it("gives the protocol's user id hash and handle commitment as viem's does", async () => {
    const hash = await Effect.runPromise(wasmKeccak256)
    const userId = "80351110224678912"
    const salt = keccak256(randomBytes(32))
    const nonce = keccak256(randomBytes(32))
    expect(userIdHash(userId, hash)).toBe(userIdHash(userId))
    expect(handleCommitment(3, userIdHash(userId), salt, nonce, hash)).toBe(
      handleCommitment(3, userIdHash(userId), salt, nonce)
    )
  })

  it("refuses a hasher that disagrees with viem's on one length", async () => {
    // Right everywhere but at exactly one block, where padding is decided.
    const wrongAtOneBlock: Keccak256 = (bytes) =>
      bytes.length === 136 ? viemKeccak256(Uint8Array.of(...bytes, 0)) : viemKeccak256(bytes)
    const exit = await Effect.runPromiseExit(checkedAgainstViem(wrongAtOneBlock))
    expect(Exit.isFailure(exit)).toBe(true)
    if (Exit.isFailure(exit)) expect(Cause.pretty(exit.cause)).toContain("disagrees with viem's on 136 bytes")
    expect(await Effect.runPromise(checkedAgainstViem(viemKeccak256))).toBe(viemKeccak256)
  })
})
