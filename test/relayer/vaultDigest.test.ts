/**
 * The vault's EIP-712 digests written out (src/relayer/validation/vaultDigest.ts) against viem's
 * `hashTypedData`: the same bytes for every type and any message, with either keccak-256; values
 * outside their type refused; a digest that disagrees stops the start-up.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, FastCheck as fc } from "effect"
import { type Address, getAddress, type Hex, hashTypedData, type TypedDataDefinition } from "viem"
import { type VaultPrimaryType, vaultDomain, vaultTypes } from "../../schema/eip712.js"
import { viemKeccak256 } from "../../schema/ids.js"
import { wasmKeccak256 } from "../../src/chain/keccak.js"
import { checkedAgainstViem, makeVaultDigest } from "../../src/relayer/validation/vaultDigest.js"

const hex = (bytes: number) =>
  fc
    .uint8Array({ minLength: bytes, maxLength: bytes })
    .map((b) => `0x${Buffer.from(b).toString("hex")}` as Hex)

/** Addresses as the request schemas hand them over (EIP-55) or lowercase. */
const address = fc
  .tuple(hex(20), fc.boolean())
  .map(([a, checksummed]) => (checksummed ? getAddress(a) : a.toLowerCase()) as Address)

const uint256 = fc.oneof(
  fc.bigInt({ min: 0n, max: (1n << 256n) - 1n }),
  fc.constantFrom(0n, 1n, (1n << 255n) - 1n, (1n << 256n) - 1n)
)

const fieldValue = (type: string) => (type === "uint256" ? uint256 : type === "address" ? address : hex(32))

const messageOf = (primaryType: VaultPrimaryType) =>
  fc.record(
    Object.fromEntries(
      vaultTypes[primaryType].map((field) => [field.name, fieldValue(field.type)])
    ) as Record<string, fc.Arbitrary<unknown>>
  )

const viemDigest = (chainId: number, vault: Address, primaryType: VaultPrimaryType, message: unknown) =>
  hashTypedData({
    domain: vaultDomain(chainId, vault),
    types: vaultTypes,
    primaryType,
    message
  } as TypedDataDefinition<typeof vaultTypes, typeof primaryType>)

const primaryTypes = Object.keys(vaultTypes) as Array<VaultPrimaryType>

describe("the vault's EIP-712 digest", () => {
  it.effect("is viem's hashTypedData for every type, chain, vault and message, with either keccak-256", () =>
    Effect.gen(function* () {
      const wasm = yield* wasmKeccak256
      fc.assert(
        fc.property(
          fc
            .constantFrom(...primaryTypes)
            .chain((primaryType) =>
              fc.tuple(
                fc.constant(primaryType),
                messageOf(primaryType),
                fc.integer({ min: 1, max: 2 ** 53 - 1 }),
                address
              )
            ),
          ([primaryType, message, chainId, vault]) => {
            const expected = viemDigest(chainId, vault, primaryType, message)
            expect(makeVaultDigest(wasm, chainId, vault)(primaryType, message as never)).toBe(expected)
            expect(makeVaultDigest(viemKeccak256, chainId, vault)(primaryType, message as never)).toBe(
              expected
            )
          }
        ),
        { numRuns: 400 }
      )
    })
  )

  it("refuses a field outside its type", () => {
    const vault = getAddress(`0x${"ab".repeat(20)}`)
    const digest = makeVaultDigest(viemKeccak256, 1, vault)
    const ping = { id: `0x${"11".repeat(32)}` as Hex, nonce: 1n, deadline: 2n }
    expect(() => digest("Ping", ping)).not.toThrow()
    for (const bad of [
      { ...ping, nonce: -1n },
      { ...ping, deadline: 1n << 256n },
      { ...ping, id: `0x${"11".repeat(31)}` as Hex }
    ]) {
      expect(() => digest("Ping", bad)).toThrow()
      expect(() => viemDigest(1, vault, "Ping", bad)).toThrow()
    }
    // Stricter than viem, which hashes whatever bytes it makes of non-hex digits.
    expect(() => digest("Ping", { ...ping, id: `0x${"zz".repeat(32)}` as Hex })).toThrow()
    const rotate = { id: ping.id, newOwner: `0x${"12".repeat(19)}` as Address, nonce: 0n, deadline: 0n }
    expect(() => digest("RotateOwner", rotate)).toThrow()
    expect(() => viemDigest(1, vault, "RotateOwner", rotate)).toThrow()
  })

  it.effect("a digest that disagrees with viem's stops the start-up", () =>
    Effect.gen(function* () {
      const vault = getAddress(`0x${"cd".repeat(20)}`)
      const right = makeVaultDigest(viemKeccak256, 10, vault)
      expect(Exit.isSuccess(yield* Effect.exit(checkedAgainstViem(right, 10, vault)))).toBe(true)
      // Right for every type but one.
      const wrongForBindOwner: typeof right = (primaryType, message) =>
        primaryType === "BindOwner"
          ? makeVaultDigest(viemKeccak256, 11, vault)(primaryType, message)
          : right(primaryType, message)
      const exit = yield* Effect.exit(checkedAgainstViem(wrongForBindOwner, 10, vault))
      expect(Exit.isFailure(exit) && String(exit.cause)).toMatch(/BindOwner digest disagrees/)
    })
  )
})
