import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Schema } from "effect"
import { getAddress } from "viem"
import {
  Address,
  AddressFromSelf,
  addressRecord,
  BlockNumber,
  Bytes32,
  bytesBetween,
  bytesOfLength,
  ChainId,
  CompressedPublicKey,
  EcdsaSignature,
  ErrorBody,
  Hex,
  MAX_UINT256,
  PublicKey,
  Signature,
  Uint64,
  Uint256,
  ZeroAddress,
  ZeroAddressOnly
} from "../../schema/primitives.js"
import { addr } from "./fixtures.js"

const refuses = (schema: Schema.Schema.AnyNoContext, input: unknown) =>
  Either.isLeft(Schema.decodeUnknownEither(schema)(input))

describe("Address", () => {
  it.effect("decodes any uniform case to the EIP-55 form and encodes that form", () =>
    Effect.gen(function* () {
      const lower = addr.a.toLowerCase()
      const upper = `0x${addr.a.slice(2).toUpperCase()}`
      for (const input of [lower, upper, addr.a]) {
        const decoded = yield* Schema.decodeUnknown(Address)(input)
        expect(decoded).toBe(addr.a)
        expect(yield* Schema.encode(Address)(decoded)).toBe(addr.a)
      }
    })
  )

  it("accepts every EIP-55 test vector and refuses each with one letter's case flipped", () => {
    for (const a of Object.values(addr)) {
      expect(Schema.decodeUnknownSync(Address)(a)).toBe(a)
      const i = [...a].findIndex((c, n) => n > 1 && /[a-fA-F]/.test(c))
      if (i < 0) continue
      const flipped =
        a.slice(0, i) +
        (a[i] === a[i]?.toLowerCase() ? a[i]?.toUpperCase() : a[i]?.toLowerCase()) +
        a.slice(i + 1)
      expect(refuses(Address, flipped)).toBe(true)
    }
  })

  it("refuses a bad checksum", () => {
    expect(refuses(Address, "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD")).toBe(true)
  })

  it("refuses to encode an address that is not checksummed", () => {
    expect(Either.isLeft(Schema.encodeEither(Address)(addr.a.toLowerCase() as typeof ZeroAddress))).toBe(true)
  })

  it("exports the zero address and a schema admitting nothing else", () => {
    expect(ZeroAddress).toBe(addr.zero)
    expect(Schema.decodeUnknownSync(ZeroAddressOnly)(addr.zero)).toBe(ZeroAddress)
    expect(refuses(ZeroAddressOnly, addr.a)).toBe(true)
  })

  it("AddressFromSelf is the checksummed Type side", () => {
    expect(AddressFromSelf.make(getAddress(addr.b.toLowerCase()))).toBe(addr.b)
    expect(() => AddressFromSelf.make(addr.b.toLowerCase() as `0x${string}`)).toThrow()
  })
})

describe("byte strings", () => {
  it("lowercases hex on decode", () => {
    expect(Schema.decodeUnknownSync(Hex)("0xABcdEF")).toBe("0xabcdef")
    expect(Schema.decodeUnknownSync(Hex)("0x")).toBe("0x")
    expect(Schema.decodeUnknownSync(Bytes32)(`0x${"AB".repeat(32)}`)).toBe(`0x${"ab".repeat(32)}`)
  })

  it("bytesOfLength / bytesBetween bound the byte length", () => {
    expect(Schema.decodeUnknownSync(bytesOfLength(3))("0x010203")).toBe("0x010203")
    expect(refuses(bytesOfLength(3), "0x0102")).toBe(true)
    expect(refuses(bytesOfLength(3), "0x01020304")).toBe(true)
    expect(Schema.decodeUnknownSync(bytesBetween(1, 2))("0x01")).toBe("0x01")
    expect(refuses(bytesBetween(1, 2), "0x")).toBe(true)
    expect(refuses(bytesBetween(1, 2), "0x010203")).toBe(true)
  })

  it("Signature admits 1..2048 bytes (EOA 65, ERC-1271 any of them)", () => {
    for (const n of [1, 65, 2048]) {
      expect(Schema.decodeUnknownSync(Signature)(`0x${"ab".repeat(n)}`)).toHaveLength(2 + 2 * n)
    }
    expect(Schema.decodeUnknownSync(EcdsaSignature)(`0x${"ab".repeat(65)}`)).toHaveLength(132)
    expect(refuses(EcdsaSignature, `0x${"ab".repeat(64)}`)).toBe(true)
  })

  it("public keys", () => {
    expect(Schema.decodeUnknownSync(CompressedPublicKey)(`0x02${"AA".repeat(32)}`)).toBe(
      `0x02${"aa".repeat(32)}`
    )
    expect(refuses(CompressedPublicKey, `0x04${"aa".repeat(64)}`)).toBe(true)
    expect(refuses(CompressedPublicKey, `0x05${"aa".repeat(32)}`)).toBe(true)
    expect(Schema.decodeUnknownSync(PublicKey)(`0x04${"aa".repeat(64)}`)).toBe(`0x04${"aa".repeat(64)}`)
  })
})

describe("Uint256", () => {
  it("decodes canonical decimals to bigint and back", () => {
    for (const [s, n] of [
      ["0", 0n],
      ["1", 1n],
      ["1000000000000000000", 10n ** 18n],
      [MAX_UINT256.toString(), MAX_UINT256]
    ] as const) {
      expect(Schema.decodeUnknownSync(Uint256)(s)).toBe(n)
      expect(Schema.encodeSync(Uint256)(n)).toBe(s)
    }
  })

  it("refuses to encode out-of-range bigints", () => {
    expect(Either.isLeft(Schema.encodeEither(Uint256)(-1n))).toBe(true)
    expect(Either.isLeft(Schema.encodeEither(Uint256)(MAX_UINT256 + 1n))).toBe(true)
    expect(Either.isLeft(Schema.encodeEither(Uint64)(2n ** 64n))).toBe(true)
  })
})

describe("numbers", () => {
  it("chain ids are positive safe integers, block numbers non-negative ones", () => {
    expect(Schema.decodeUnknownSync(ChainId)(31337)).toBe(31337)
    expect(Schema.decodeUnknownSync(BlockNumber)(0)).toBe(0)
    for (const bad of [0, -1, 1.5, 2 ** 53, "1", Number.NaN]) expect(refuses(ChainId, bad)).toBe(true)
    for (const bad of [-1, 0.5, 2 ** 53, "0"]) expect(refuses(BlockNumber, bad)).toBe(true)
  })
})

describe("addressRecord", () => {
  const Balances = addressRecord(Uint256)

  it("checksums keys and decodes values", () => {
    expect(Schema.decodeUnknownSync(Balances)({ [addr.a.toLowerCase()]: "5" })).toStrictEqual({
      [addr.a]: 5n
    })
    expect(Schema.encodeSync(Balances)(Schema.decodeUnknownSync(Balances)({ [addr.a]: "5" }))).toStrictEqual({
      [addr.a]: "5"
    })
  })

  it("refuses non-address keys and two spellings of one address", () => {
    expect(refuses(Balances, { "0x12": "1" })).toBe(true)
    expect(refuses(Balances, { [addr.a]: "1", [addr.a.toLowerCase()]: "2" })).toBe(true)
    expect(refuses(Balances, { [addr.a]: 1 })).toBe(true)
  })
})

describe("ErrorBody", () => {
  it("is { error, code }", () => {
    const body = { error: "deadline too soon", code: "deadline_too_soon" }
    expect(Schema.encodeSync(ErrorBody)(Schema.decodeUnknownSync(ErrorBody)(body))).toStrictEqual(body)
    expect(refuses(ErrorBody, { error: "x" })).toBe(true)
  })
})

const bytes = (n: number) => `0x${"ab".repeat(n)}`

/** [description, schema, input]: every row must be refused. */
const malformed: ReadonlyArray<readonly [string, Schema.Schema.AnyNoContext, unknown]> = [
  ["hex with non-hex digits", Hex, "0xzz"],
  ["hex of odd length", Hex, "0xabc"],
  ["hex without 0x", Hex, "abcd"],
  ["hex with 0X", Hex, "0XABCD"],
  ["hex with whitespace", Hex, " 0xab"],
  ["hex as a number", Hex, 12],
  ["bytes32 of 31 bytes", Bytes32, bytes(31)],
  ["bytes32 of 33 bytes", Bytes32, bytes(33)],
  ["bytes32 without 0x", Bytes32, "ab".repeat(32)],
  ["address of 19 bytes", Address, bytes(19)],
  ["address of 21 bytes", Address, bytes(21)],
  ["address without 0x", Address, addr.a.slice(2)],
  ["address with non-hex digits", Address, `0x${"zz".repeat(20)}`],
  ["address with a bad EIP-55 checksum", Address, "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD"],
  ["address as null", Address, null],
  ["signature of 0 bytes", Signature, "0x"],
  ["signature of 2049 bytes", Signature, bytes(2049)],
  ["uint256 of 2^256", Uint256, (2n ** 256n).toString()],
  ["uint256 far above 2^256", Uint256, "9".repeat(79)],
  ["negative uint256", Uint256, "-1"],
  ["uint256 with a leading zero", Uint256, "01"],
  ["uint256 with a fraction", Uint256, "1.0"],
  ["uint256 with an exponent", Uint256, "1e3"],
  ["uint256 with leading whitespace", Uint256, " 1"],
  ["uint256 with trailing whitespace", Uint256, "1 "],
  ["uint256 with a plus sign", Uint256, "+1"],
  ["uint256 in hex", Uint256, "0x10"],
  ["empty uint256", Uint256, ""],
  ["uint256 as a JSON number", Uint256, 1],
  ["uint256 as a bigint", Uint256, 1n],
  ["uint64 of 2^64", Uint64, (2n ** 64n).toString()]
]

describe("malformed primitives are refused", () => {
  it.each(malformed)("%s", (_, schema, input) => {
    expect(refuses(schema, input)).toBe(true)
  })
})
