/**
 * Branded primitives of the wire language (docs/protocol.md §1). Each schema's Encoded side is the JSON
 * form a client sends or receives; its Type side is what the code works with. Requests are read
 * leniently where the protocol allows it (any address case, any hex case) and every value is
 * written back in its one canonical form (EIP-55 addresses, lowercase hex, canonical decimals).
 */
import { type Brand, Either, type FastCheck, ParseResult, Schema } from "effect"
import { getAddress, isAddress } from "viem"
import { FULL } from "./ids.js"

// ---------------------------------------------------------------------------------------------
// Byte strings
// ---------------------------------------------------------------------------------------------

const LOWER_HEX = /^0x(?:[0-9a-f]{2})*$/

const toHex = (bytes: Uint8Array): `0x${string}` => {
  let out = "0x"
  for (const b of bytes) out += b.toString(16).padStart(2, "0")
  return out as `0x${string}`
}

/** Byte length of a `0x` string already known to be well-formed. */
const byteLength = (hex: string): number => (hex.length - 2) / 2

/** Lowercase `0x` hex of even length. */
export type Hex = `0x${string}` & Brand.Brand<"Hex">

/** The Type side of every byte string. */
export const HexFromSelf = Schema.TemplateLiteral("0x", Schema.String).pipe(
  Schema.filter((s) => LOWER_HEX.test(s) || "expected lowercase 0x-prefixed hex of even length"),
  Schema.brand("Hex"),
  Schema.annotations({
    identifier: "HexFromSelf",
    arbitrary: () => (fc) => fc.uint8Array({ maxLength: 64 }).map((b) => toHex(b) as Hex)
  })
)

const hexPattern = (min: number, max: number | undefined): RegExp => {
  if (max === undefined) return new RegExp(`^0x(?:[0-9a-fA-F]{2}){${min},}$`)
  return min === max
    ? new RegExp(`^0x[0-9a-fA-F]{${2 * min}}$`)
    : new RegExp(`^0x(?:[0-9a-fA-F]{2}){${min},${max}}$`)
}

const lengthText = (min: number, max: number | undefined): string =>
  max === undefined ? `at least ${min} bytes` : min === max ? `exactly ${min} bytes` : `${min}..${max} bytes`

/**
 * The wire side of a byte string: `0x` plus an even number of hex digits in any case, within a
 * byte-length range. The range is part of the pattern so the OpenAPI document shows it.
 */
const hexWire = (min: number, max: number | undefined) =>
  Schema.String.pipe(
    Schema.pattern(hexPattern(min, max), {
      message: () => `expected 0x-prefixed hex of ${lengthText(min, max)}`
    })
  )

/** A type-side byte string of a length range with an arbitrary that generates exactly that range. */
const hexOfLength = (min: number, max: number) =>
  HexFromSelf.pipe(
    Schema.filter((h) => {
      const n = byteLength(h)
      return (n >= min && n <= max) || `expected ${lengthText(min, max)}, got ${n}`
    }),
    Schema.annotations({
      arbitrary: () => (fc) => fc.uint8Array({ minLength: min, maxLength: max }).map((b) => toHex(b) as Hex)
    })
  )

const HexString = Schema.TemplateLiteral("0x", Schema.String)

/** Decodes any-case hex (pattern already checked) to lowercase; encodes unchanged. */
const lowercaseHex = <A extends Hex>(wire: Schema.Schema<string>, type: Schema.Schema<A, `0x${string}`>) =>
  Schema.transform(wire, HexString, {
    strict: true,
    decode: (s) => s.toLowerCase() as `0x${string}`,
    encode: (s) => s
  }).pipe(Schema.compose(type))

/** Any byte string. Wire: `0x` + even number of hex digits, any case. Type: lowercase `Hex`. */
export const Hex = lowercaseHex(hexWire(0, undefined), HexFromSelf).annotations({
  identifier: "Hex",
  description: "0x-prefixed hex bytes, even length; returned lowercase"
})

/** A byte string of exactly `n` bytes. */
export const bytesOfLength = (n: number) => lowercaseHex(hexWire(n, n), hexOfLength(n, n))

/** A byte string of `min..max` bytes (inclusive). */
export const bytesBetween = (min: number, max: number) =>
  lowercaseHex(hexWire(min, max), hexOfLength(min, max))

export type Bytes32 = Hex & Brand.Brand<"Bytes32">

export const Bytes32FromSelf = hexOfLength(32, 32).pipe(
  Schema.brand("Bytes32"),
  Schema.annotations({
    identifier: "Bytes32FromSelf",
    arbitrary: () => (fc) => fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => toHex(b) as Bytes32)
  })
)

/** Exactly 32 bytes: ids, salts, commitments, hashes, transaction hashes. */
export const Bytes32 = lowercaseHex(hexWire(32, 32), Bytes32FromSelf).annotations({
  identifier: "Bytes32",
  description: "0x-prefixed hex, exactly 32 bytes; returned lowercase"
})

export const SIGNATURE_MAX_BYTES = 2048

/**
 * An owner signature as the vault accepts it: 65-byte `r || s || v` from an EOA or 1..2048 bytes
 * for an ERC-1271 owner. Which of the two applies depends on code at the owner address, so the
 * wire check is the union, 1..2048 bytes.
 */
export const Signature = bytesBetween(1, SIGNATURE_MAX_BYTES).annotations({
  identifier: "Signature",
  description: "65-byte r||s||v (EOA) or 1..2048 bytes (ERC-1271 owner), 0x-prefixed hex"
})
export type Signature = typeof Signature.Type

/** A signature an attestor makes with its own key: always 65-byte `r || s || v`. */
export const EcdsaSignature = bytesOfLength(65).annotations({
  identifier: "EcdsaSignature",
  description: "65-byte r||s||v, 0x-prefixed hex"
})

const COMPRESSED_KEY = /^0x0[23][0-9a-f]{64}$/
const UNCOMPRESSED_KEY = /^0x04[0-9a-f]{128}$/

const compressedKeyArbitrary = (fc: typeof FastCheck) =>
  fc
    .tuple(fc.constantFrom(2, 3), fc.uint8Array({ minLength: 32, maxLength: 32 }))
    .map(([prefix, x]) => toHex(Uint8Array.of(prefix, ...x)) as Hex)

/** A compressed secp256k1 public key (33 bytes, prefix 02/03), e.g. an attestor's hint key. */
export const CompressedPublicKey = Schema.compose(
  Hex,
  HexFromSelf.pipe(
    Schema.filter((h) => COMPRESSED_KEY.test(h) || "expected a 33-byte compressed secp256k1 public key"),
    Schema.annotations({ arbitrary: () => compressedKeyArbitrary })
  )
).annotations({ identifier: "CompressedPublicKey", description: "33-byte compressed secp256k1 public key" })

/** A secp256k1 public key, compressed (33 bytes) or uncompressed (65 bytes, prefix 04). */
export const PublicKey = Schema.compose(
  Hex,
  HexFromSelf.pipe(
    Schema.filter(
      (h) =>
        COMPRESSED_KEY.test(h) ||
        UNCOMPRESSED_KEY.test(h) ||
        "expected a secp256k1 public key (33 or 65 bytes)"
    ),
    Schema.annotations({
      arbitrary: () => (fc) =>
        fc.oneof(
          compressedKeyArbitrary(fc),
          fc.uint8Array({ minLength: 64, maxLength: 64 }).map((b) => toHex(Uint8Array.of(4, ...b)) as Hex)
        )
    })
  )
).annotations({ identifier: "PublicKey", description: "secp256k1 public key, 33 or 65 bytes" })

// ---------------------------------------------------------------------------------------------
// Addresses
// ---------------------------------------------------------------------------------------------

/** An EIP-55 checksummed address. */
export type Address = `0x${string}` & Brand.Brand<"Address">

/** The Type side of every address. */
export const AddressFromSelf = Schema.TemplateLiteral("0x", Schema.String).pipe(
  Schema.filter(
    (s) => (isAddress(s, { strict: false }) && getAddress(s) === s) || "expected an EIP-55 address"
  ),
  Schema.brand("Address"),
  Schema.annotations({
    identifier: "AddressFromSelf",
    arbitrary: () => (fc) =>
      fc
        .oneof(
          { weight: 9, arbitrary: fc.uint8Array({ minLength: 20, maxLength: 20 }) },
          // The zero address means "none" or "direct" in several places; make sure it shows up.
          { weight: 1, arbitrary: fc.constant(new Uint8Array(20)) }
        )
        .map((b) => getAddress(toHex(b)) as Address)
  })
)

const ADDRESS_WIRE = /^0x[0-9a-fA-F]{40}$/

/**
 * An address. Wire: `0x` + 40 hex digits, all lowercase or all uppercase, or mixed case with a
 * valid EIP-55 checksum (a wrong checksum is most likely a typo, so it is refused). Type: the
 * checksummed form, which is also what every response carries.
 */
export const Address = Schema.transformOrFail(
  Schema.String.pipe(Schema.pattern(ADDRESS_WIRE, { message: () => "expected 0x-prefixed hex of 20 bytes" })),
  Schema.encodedSchema(AddressFromSelf),
  {
    strict: true,
    decode: (s, _, ast) => {
      const digits = s.slice(2)
      const uniformCase = digits === digits.toLowerCase() || digits === digits.toUpperCase()
      return uniformCase || isAddress(s, { strict: true })
        ? ParseResult.succeed(getAddress(`0x${digits.toLowerCase()}`))
        : ParseResult.fail(new ParseResult.Type(ast, s, "invalid EIP-55 checksum"))
    },
    encode: ParseResult.succeed
  }
)
  .pipe(Schema.compose(AddressFromSelf))
  .annotations({
    identifier: "Address",
    description:
      "20-byte address, 0x-prefixed hex; mixed case must be a valid EIP-55 checksum; returned EIP-55"
  })

const decodeAddressKey = ParseResult.decodeUnknownEither(Address)

/**
 * An object keyed by address (balances per asset). Record keys cannot be transformations, so the
 * keys are canonicalized here: any accepted spelling decodes to the checksummed key, and two
 * spellings of the same address in one object are refused rather than silently merged.
 */
export const addressRecord = <V, I>(value: Schema.Schema<V, I>) =>
  Schema.transformOrFail(
    // Plain string keys: a pattern key would silently drop non-address keys instead of refusing them.
    Schema.Record({ key: Schema.String, value }),
    Schema.Record({ key: AddressFromSelf, value: Schema.typeSchema(value) }),
    {
      strict: true,
      decode: (record, options, ast) => {
        const out: Record<Address, V> = {}
        for (const [key, v] of Object.entries(record)) {
          const address = decodeAddressKey(key, options)
          if (Either.isLeft(address)) {
            return ParseResult.fail(new ParseResult.Pointer(key, record, address.left))
          }
          if (Object.hasOwn(out, address.right)) {
            return ParseResult.fail(
              new ParseResult.Type(ast, record, `duplicate address key ${address.right}`)
            )
          }
          out[address.right] = v
        }
        return ParseResult.succeed(out)
      },
      encode: ParseResult.succeed
    }
  )

export const ZeroAddress: Address = AddressFromSelf.make("0x0000000000000000000000000000000000000000")

/** The zero address and nothing else (RelayerConfig.adapters.direct). */
export const ZeroAddressOnly = Address.pipe(
  Schema.filter((a) => a === ZeroAddress || "expected the zero address"),
  Schema.annotations({ identifier: "ZeroAddress", arbitrary: () => (fc) => fc.constant(ZeroAddress) })
)

// ---------------------------------------------------------------------------------------------
// Integers
// ---------------------------------------------------------------------------------------------

/** 2^256 - 1, the largest uint256 (equal to `FULL`). */
export const MAX_UINT256: bigint = FULL
export const MAX_UINT64: bigint = 2n ** 64n - 1n

const CANONICAL_DECIMAL = /^(?:0|[1-9][0-9]*)$/

/**
 * A canonical unsigned decimal string (no sign, no leading zeros except "0", no whitespace,
 * exponent or fraction) decoded to a `bigint` in `0..max`.
 *
 * The Type side is a plain `bigint`, not a branded one: the code does arithmetic on amounts,
 * fees and nonces all the time and hands them to viem, and a brand would not survive `a - b`.
 * The range is enforced where values cross the wire, in both directions.
 */
const decimalString = (max: bigint, bits: number) => {
  const digits = max.toString().length
  return Schema.transformOrFail(
    Schema.String.pipe(
      Schema.pattern(CANONICAL_DECIMAL, {
        message: () => "expected a decimal string without sign, leading zeros or whitespace"
      }),
      Schema.maxLength(digits, { message: () => `expected at most ${digits} digits` })
    ),
    Schema.BigIntFromSelf,
    {
      strict: true,
      decode: (s, _, ast) => {
        const n = BigInt(s)
        return n <= max
          ? ParseResult.succeed(n)
          : ParseResult.fail(new ParseResult.Type(ast, s, `expected at most 2^${bits} - 1`))
      },
      encode: (n) => ParseResult.succeed(n.toString())
    }
  ).pipe(Schema.compose(Schema.BigIntFromSelf.pipe(Schema.betweenBigInt(0n, max))))
}

/** uint256 as a decimal string (amounts, fees, nonces, delays, gas figures, deadlines). */
export const Uint256 = decimalString(MAX_UINT256, 256).annotations({
  identifier: "Uint256",
  description: "uint256 as a decimal string: no sign, no leading zeros, at most 2^256 - 1"
})
export type Uint256 = typeof Uint256.Type

/** uint64 as a decimal string (e.g. `PublicHandle.issuedAt`, which the EIP-712 type declares uint64). */
export const Uint64 = decimalString(MAX_UINT64, 64).annotations({
  identifier: "Uint64",
  description: "uint64 as a decimal string: no sign, no leading zeros, at most 2^64 - 1"
})

/** A signed-message deadline in unix seconds, a uint256 like every deadline the vault checks. */
export const Deadline = Uint256.annotations({
  identifier: "Deadline",
  description: "unix seconds as a uint256 decimal string"
})

/** A 64-bit unix-seconds timestamp carried as a decimal string (docs/protocol.md §1 lists no such number). */
export const UnixSecondsString = Uint64.annotations({
  identifier: "UnixSecondsString",
  description: "unix seconds as a decimal string"
})

/** Positive JSON number, a safe integer. */
export const ChainId = Schema.Int.pipe(Schema.positive()).annotations({
  identifier: "ChainId",
  description: "chain id, a positive safe integer"
})

/** Non-negative JSON number, a safe integer. */
export const BlockNumber = Schema.NonNegativeInt.annotations({
  identifier: "BlockNumber",
  description: "block number, a non-negative safe integer"
})

/** Unix seconds as a plain JSON number, only where docs/protocol.md §1 allows one (`validUntil`). */
export const UnixSeconds = Schema.NonNegativeInt.annotations({
  identifier: "UnixSeconds",
  description: "unix seconds, a non-negative safe integer"
})

/** A count or duration in seconds as a plain JSON number. */
export const NonNegativeInt = Schema.NonNegativeInt

/**
 * Annotations of every request body: a field the body does not declare is 400 `bad_request`, as
 * the OpenAPI document says (`additionalProperties: false`). Silently ignoring it would let a
 * misspelt optional field (`contest`, `visibility`, `register`) change what a request does.
 */
export const requestBody = { parseOptions: { onExcessProperty: "error" } } as const

/** Account kind: 1 owner account, 2 handle account. */
export const AccountKind = Schema.Literal(1, 2).annotations({ identifier: "AccountKind" })

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/** Every refusal's body (docs/protocol.md §7). */
export const ErrorBody = Schema.Struct({
  error: Schema.String,
  code: Schema.String
}).annotations({ identifier: "ErrorBody" })
export type ErrorBody = typeof ErrorBody.Type
