/**
 * The EIP-712 digest of a vault message (docs/protocol.md §3), written out for the vault's types:
 * every one is flat, each field a `bytes32`, an `address` or a `uint256`, one 32-byte word each.
 * So the digest is `keccak256(0x1901 ‖ domainSeparator ‖ keccak256(typeHash ‖ words))`, with the
 * domain separator and the type hashes computed once instead of per request, and keccak-256 in
 * WebAssembly (src/chain/keccak.ts): about 190 µs a claim in viem's `hashTypedData` on this
 * machine, a few µs here (bench/PROFILE.md).
 *
 * The bytes are viem's: `checkedAgainstViem` compares both on a message of every type when the
 * relayer starts and stops the start-up if they differ, and a property test compares them on
 * random messages (test/relayer/vaultDigest.test.ts). The messages come decoded by the request
 * schemas; a value outside its type is a defect here as it is in viem.
 */
import { Effect } from "effect"
import { type Address, type Hex, hashTypedData, keccak256, type TypedDataDefinition } from "viem"
import { typeString, type VaultPrimaryType, vaultDomain, vaultTypes } from "../../../schema/eip712.js"
import type { Keccak256 } from "../../../schema/ids.js"

export type VaultMessage<P extends VaultPrimaryType> = TypedDataDefinition<typeof vaultTypes, P>["message"]

export type VaultDigest = <P extends VaultPrimaryType>(primaryType: P, message: VaultMessage<P>) => Hex

const WORD = 32
const MAX_UINT256 = (1n << 256n) - 1n
const HEX_WORD = /^0x[0-9a-fA-F]{64}$/
const HEX_ADDRESS = /^0x[0-9a-fA-F]{40}$/

/** Writes the 32-byte ABI word of `value` as a `type` field at `offset`. */
const writeWord = (into: Buffer, offset: number, type: string, value: unknown): void => {
  switch (type) {
    case "bytes32":
      if (typeof value !== "string" || !HEX_WORD.test(value)) throw new TypeError("not a bytes32")
      into.write(value.slice(2), offset, WORD, "hex")
      return
    case "address":
      if (typeof value !== "string" || !HEX_ADDRESS.test(value)) throw new TypeError("not an address")
      into.fill(0, offset, offset + 12)
      into.write(value.slice(2), offset + 12, 20, "hex")
      return
    case "uint256":
      if (typeof value !== "bigint" || value < 0n || value > MAX_UINT256) throw new TypeError("not a uint256")
      into.write(value.toString(16).padStart(64, "0"), offset, WORD, "hex")
      return
    default:
      throw new TypeError(`a vault message has no ${type} field`)
  }
}

const DOMAIN_TYPE = "EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"

/** The digest of every vault message on `chainId` for `vault`, with `keccak`. */
export const makeVaultDigest = (keccak: Keccak256, chainId: number, vault: Address): VaultDigest => {
  const text = (s: string) => Buffer.from(s, "utf8")
  const domain = vaultDomain(chainId, vault)
  const separator = Buffer.alloc(5 * WORD)
  separator.write(keccak(text(DOMAIN_TYPE)).slice(2), 0, WORD, "hex")
  separator.write(keccak(text(domain.name)).slice(2), WORD, WORD, "hex")
  separator.write(keccak(text(domain.version)).slice(2), 2 * WORD, WORD, "hex")
  writeWord(separator, 3 * WORD, "uint256", BigInt(chainId))
  writeWord(separator, 4 * WORD, "address", vault)
  // 0x1901 ‖ domain separator ‖ struct hash: the last 32 bytes are written per message.
  const prefix = Buffer.alloc(2 + 2 * WORD)
  prefix[0] = 0x19
  prefix[1] = 0x01
  prefix.write(keccak(separator).slice(2), 2, WORD, "hex")
  const typeHashes = new Map<string, string>(
    Object.keys(vaultTypes).map((name) => [name, keccak(text(typeString(name as VaultPrimaryType))).slice(2)])
  )

  return (primaryType, message) => {
    const fields = vaultTypes[primaryType]
    const struct = Buffer.allocUnsafe((fields.length + 1) * WORD)
    struct.write(typeHashes.get(primaryType) as string, 0, WORD, "hex")
    const values = message as Record<string, unknown>
    fields.forEach((field, i) => {
      writeWord(struct, (i + 1) * WORD, field.type, values[field.name])
    })
    const digestInput = Buffer.from(prefix)
    digestInput.write(keccak(struct).slice(2), 2 + WORD, WORD, "hex")
    return keccak(digestInput)
  }
}

/** A message of every vault type, with fields that are neither zero nor all ones. */
const SAMPLES: ReadonlyArray<{
  readonly primaryType: VaultPrimaryType
  readonly message: Record<string, unknown>
}> = Object.entries(vaultTypes).map(([primaryType, fields]) => ({
  primaryType: primaryType as VaultPrimaryType,
  message: Object.fromEntries(
    fields.map((field, i) => {
      const seed = keccak256(
        `0x${(i + 1).toString(16).padStart(2, "0")}${primaryType.length.toString(16).padStart(2, "0")}`
      )
      return [
        field.name,
        field.type === "uint256"
          ? BigInt(seed) >> BigInt(i * 8)
          : field.type === "address"
            ? `0x${seed.slice(26)}`
            : seed
      ]
    })
  )
}))

/** `digest` if it gives viem's `hashTypedData` for a message of every vault type; a defect otherwise. */
export const checkedAgainstViem = (
  digest: VaultDigest,
  chainId: number,
  vault: Address
): Effect.Effect<VaultDigest> =>
  Effect.suspend(() => {
    for (const { primaryType, message } of SAMPLES) {
      const theirs = hashTypedData({
        domain: vaultDomain(chainId, vault),
        types: vaultTypes,
        primaryType,
        message
      } as TypedDataDefinition<typeof vaultTypes, typeof primaryType>)
      if (digest(primaryType, message as never) !== theirs)
        return Effect.dieMessage(`the vault's ${primaryType} digest disagrees with viem's hashTypedData`)
    }
    return Effect.succeed(digest)
  })
