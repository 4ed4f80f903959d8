/**
 * secp256k1 in WebAssembly (src/chain/secp256k1.ts) gives what viem gives: the same signer for any
 * signature, no signer where viem finds none, and the same deterministic signature, so the same
 * signed transaction.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import {
  type Hex,
  hexToBytes,
  keccak256,
  parseGwei,
  recoverAddress,
  serializeTransaction,
  signatureToHex,
  toHex,
  zeroAddress
} from "viem"
import { generatePrivateKey, privateKeyToAccount, sign } from "viem/accounts"
import { checkedAgainstViem, recoverSigner, signDigest } from "../../src/chain/secp256k1.js"

/** secp256k1's group order. */
const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n

const viemSigner = (digest: Hex, signature: Hex) =>
  recoverAddress({ hash: digest, signature }).catch(() => undefined)

const word = (value: bigint) => toHex(value, { size: 32 }).slice(2)

describe("secp256k1 in WebAssembly", () => {
  it.effect("agrees with viem when the check a service runs at start-up runs", () => checkedAgainstViem)

  it.live("signs as viem signs and recovers the signer viem recovers, over random keys and digests", () =>
    Effect.gen(function* () {
      for (let i = 0; i < 64; i++) {
        const key = generatePrivateKey()
        const digest = keccak256(toHex(`digest ${i} ${Math.random()}`))
        const ours = signDigest(digest, hexToBytes(key))
        const theirs = yield* Effect.promise(() => sign({ hash: digest, privateKey: key }))
        expect(ours).toEqual({ r: theirs.r, s: theirs.s, yParity: theirs.yParity })
        const signature = signatureToHex(theirs)
        expect(recoverSigner(digest, signature)).toBe(privateKeyToAccount(key).address)
        // Another digest: some other signer, the same one viem finds.
        const other = keccak256(digest)
        expect(recoverSigner(other, signature)).toBe(
          yield* Effect.promise(() => viemSigner(other, signature))
        )
      }
    })
  )

  it.live("finds no signer where viem finds none: r or s zero or not below the order, v not 27 or 28", () =>
    Effect.gen(function* () {
      const digest = keccak256("0x01")
      const valid = signatureToHex(
        yield* Effect.promise(() => sign({ hash: digest, privateKey: generatePrivateKey() }))
      )
      const r = valid.slice(2, 66)
      const s = valid.slice(66, 130)
      const broken: ReadonlyArray<Hex> = [
        `0x${word(0n)}${s}1b`,
        `0x${r}${word(0n)}1b`,
        `0x${word(N)}${s}1b`,
        `0x${r}${word(N)}1c`,
        `0x${word(2n ** 256n - 1n)}${s}1b`,
        `0x${r}${s}1d`,
        `0x${r}${s}00`,
        `0x${r}${s}`
      ]
      for (const signature of broken) {
        expect(recoverSigner(digest, signature)).toBeUndefined()
        const viems = yield* Effect.promise(() => viemSigner(digest, signature))
        if (signature.length === 132 && ["1b", "1c"].includes(signature.slice(130)))
          expect(viems === undefined || viems === zeroAddress).toBe(true)
      }
    })
  )

  it("signs a transaction viem's account signs to the same bytes", async () => {
    const key = generatePrivateKey()
    const transaction = {
      type: "eip1559",
      chainId: 31337,
      nonce: 7,
      to: privateKeyToAccount(generatePrivateKey()).address,
      data: "0xdeadbeef",
      value: 1n,
      gas: 100_000n,
      maxFeePerGas: parseGwei("3"),
      maxPriorityFeePerGas: parseGwei("1")
    } as const
    const ours = serializeTransaction(
      transaction,
      signDigest(keccak256(serializeTransaction(transaction)), hexToBytes(key))
    )
    expect(ours).toBe(await privateKeyToAccount(key).signTransaction(transaction))
  })
})
