/**
 * The EIP-712 definitions and ids of docs/protocol.md §2-3, checked two independent ways: viem's
 * `hashTypedData` over `schema/eip712.ts`, and a construction by hand from the type strings
 * written out here with `encodeAbiParameters` and `keccak256`. Any drift in a field name, type or
 * order makes the two disagree.
 */
import { createHmac } from "node:crypto"
import {
  type Address,
  concat,
  encodeAbiParameters,
  type Hex,
  hashTypedData,
  keccak256,
  recoverTypedDataAddress,
  stringToHex,
  toHex
} from "viem"
import { privateKeyToAccount } from "viem/accounts"
import { describe, expect, it } from "vitest"
import { publicHandleDomain, typeString, vaultDomain, vaultTypes } from "../../schema/eip712.js"
import {
  attestorSalt,
  computeId,
  EMPTY_DATA_HASH,
  FULL,
  handleCommitment,
  isQuotedForm,
  ownerCommitment,
  QUOTED,
  quotedAmount,
  SHIELD_PAYLOAD_BYTES,
  shieldPayload,
  templatesHash,
  userIdHash
} from "../../schema/ids.js"

const chainId = 31337
const vault: Address = "0xA51c1fc2f0D1a1b8494Ed1FE312d7C3a78Ed91C0"
const id: Hex = "0x1111111111111111111111111111111111111111111111111111111111111111"
const asset: Address = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
const other: Address = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"

/** The type strings exactly as docs/protocol.md §3 prints them. */
const protocolTypeStrings = {
  Claim:
    "Claim(bytes32 beneficiaryId,address asset,uint256 amount,address adapter,bytes32 dataHash,address relayer,uint256 relayerFee,uint256 nonce,uint256 deadline)",
  Consolidate:
    "Consolidate(bytes32 id,address assetIn,uint256 amountIn,uint256 minOut,uint256 nonce,uint256 deadline)",
  RegisterShieldTemplates:
    "RegisterShieldTemplates(bytes32 id,bytes32 templatesHash,uint256 nonce,uint256 deadline)",
  RotateOwner: "RotateOwner(bytes32 id,address newOwner,uint256 nonce,uint256 deadline)",
  Ping: "Ping(bytes32 id,uint256 nonce,uint256 deadline)",
  CancelBind: "CancelBind(bytes32 id,uint256 bindNonce,uint256 deadline)",
  BindOwner: "BindOwner(bytes32 id,address newOwner,uint256 bindNonce,uint256 deadline)",
  PublicHandle: "PublicHandle(uint8 platformId,string userId,string handle,uint64 issuedAt)"
} as const

const domainSeparatorByHand = () =>
  keccak256(
    encodeAbiParameters(
      [
        { type: "bytes32" },
        { type: "bytes32" },
        { type: "bytes32" },
        { type: "uint256" },
        { type: "address" }
      ],
      [
        keccak256(
          stringToHex("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)")
        ),
        keccak256(stringToHex("FeeVault")),
        keccak256(stringToHex("1")),
        BigInt(chainId),
        vault
      ]
    )
  )

const digestByHand = (separator: Hex, structHash: Hex) => keccak256(concat(["0x1901", separator, structHash]))

const structHash = (
  typeStr: string,
  types: ReadonlyArray<{ type: string }>,
  values: ReadonlyArray<unknown>
) =>
  keccak256(
    encodeAbiParameters([{ type: "bytes32" }, ...types], [
      keccak256(stringToHex(typeStr)),
      ...values
    ] as readonly unknown[])
  )

const vectors = {
  Claim: {
    beneficiaryId: id,
    asset,
    amount: FULL,
    adapter: "0x0000000000000000000000000000000000000000" as Address,
    dataHash: EMPTY_DATA_HASH,
    relayer: other,
    relayerFee: 123456789n,
    nonce: 7n,
    deadline: 1_900_000_000n
  },
  Consolidate: {
    id,
    assetIn: asset,
    amountIn: QUOTED | 5000n,
    minOut: 4900n,
    nonce: 3n,
    deadline: 1_900_000_000n
  },
  RegisterShieldTemplates: { id, templatesHash: keccak256("0x01"), nonce: 0n, deadline: 1n },
  RotateOwner: { id, newOwner: other, nonce: 2n ** 255n, deadline: 2n ** 256n - 1n },
  Ping: { id, nonce: 0n, deadline: 0n },
  CancelBind: { id, bindNonce: 9n, deadline: 1_900_000_000n },
  BindOwner: { id, newOwner: other, bindNonce: 0n, deadline: 1_900_000_200n }
} as const

describe("EIP-712 definitions", () => {
  it("spell every type exactly as docs/protocol.md §3", () => {
    for (const [name, expected] of Object.entries(protocolTypeStrings)) {
      expect(typeString(name as keyof typeof protocolTypeStrings)).toBe(expected)
    }
  })

  it.each(Object.keys(vectors) as Array<keyof typeof vectors>)(
    "%s: viem's digest equals the digest built by hand",
    (primaryType) => {
      const message = vectors[primaryType]
      const viaViem = hashTypedData({
        domain: vaultDomain(chainId, vault),
        types: vaultTypes,
        primaryType,
        message
      } as Parameters<typeof hashTypedData>[0])
      const fields = vaultTypes[primaryType]
      const byHand = digestByHand(
        domainSeparatorByHand(),
        structHash(
          protocolTypeStrings[primaryType],
          fields.map((f) => ({ type: f.type })),
          fields.map((f) => (message as Record<string, unknown>)[f.name])
        )
      )
      expect(viaViem).toBe(byHand)
    }
  )

  it("PublicHandle: digest without a verifying contract, strings hashed", () => {
    const message = { platformId: 1, userId: "1000001", handle: "alice", issuedAt: 1_700_000_000n }
    const viaViem = hashTypedData({
      domain: publicHandleDomain(chainId),
      types: {
        PublicHandle: [
          { name: "platformId", type: "uint8" },
          { name: "userId", type: "string" },
          { name: "handle", type: "string" },
          { name: "issuedAt", type: "uint64" }
        ]
      },
      primaryType: "PublicHandle",
      message
    })
    const separator = keccak256(
      encodeAbiParameters(
        [{ type: "bytes32" }, { type: "bytes32" }, { type: "bytes32" }, { type: "uint256" }],
        [
          keccak256(stringToHex("EIP712Domain(string name,string version,uint256 chainId)")),
          keccak256(stringToHex("FeeVault PublicHandle")),
          keccak256(stringToHex("1")),
          BigInt(chainId)
        ]
      )
    )
    const hash = structHash(
      protocolTypeStrings.PublicHandle,
      [{ type: "uint8" }, { type: "bytes32" }, { type: "bytes32" }, { type: "uint64" }],
      [1, keccak256(stringToHex("1000001")), keccak256(stringToHex("alice")), 1_700_000_000n]
    )
    expect(viaViem).toBe(digestByHand(separator, hash))
  })

  it("a signature over the definitions recovers its signer", async () => {
    const signer = privateKeyToAccount(keccak256(stringToHex("eip712 test signer")))
    const args = {
      domain: vaultDomain(chainId, vault),
      types: vaultTypes,
      primaryType: "Ping" as const,
      message: vectors.Ping
    }
    const signature = await signer.signTypedData(args)
    expect(await recoverTypedDataAddress({ ...args, signature })).toBe(signer.address)
  })
})

describe("ids and commitments", () => {
  it("computeId is keccak256(abi.encode(uint8, bytes32, address, uint256))", () => {
    const commitment = keccak256("0xabcd")
    const manual = keccak256(
      concat([
        toHex(2, { size: 32 }),
        commitment,
        `0x${other.slice(2).toLowerCase().padStart(64, "0")}`,
        toHex(86400n, { size: 32 })
      ])
    )
    expect(computeId(2, commitment, other, 86400n)).toBe(manual)
  })

  it("kind-1 commitment binds owner and salt", () => {
    const salt = keccak256("0x01")
    const manual = keccak256(concat([`0x${other.slice(2).toLowerCase().padStart(64, "0")}`, salt]))
    expect(ownerCommitment(other, salt)).toBe(manual)
  })

  it("userIdHash, attestorSalt and handleCommitment follow docs/protocol.md §2", () => {
    const pepper = new Uint8Array(32).fill(7)
    expect(userIdHash("1000001")).toBe(keccak256(new TextEncoder().encode("1000001")))
    const expectedSalt = `0x${createHmac("sha256", Buffer.from(pepper)).update("1:1000001").digest("hex")}`
    expect(attestorSalt(pepper, 1, "1000001")).toBe(expectedSalt)
    const nonce = keccak256("0x02")
    const manual = keccak256(
      concat([toHex(1, { size: 32 }), userIdHash("1000001"), expectedSalt as Hex, nonce])
    )
    expect(handleCommitment(1, userIdHash("1000001"), expectedSalt as Hex, nonce)).toBe(manual)
  })

  it("templatesHash is the hash of the concatenated template hashes", () => {
    const t0 = shieldPayload(id, asset, 10n)
    const t1 = shieldPayload(id, asset, 20n)
    expect(templatesHash([t0, t1])).toBe(keccak256(concat([keccak256(t0), keccak256(t1)])))
    expect(templatesHash([t0])).toBe(keccak256(keccak256(t0)))
  })

  it("a shield template is 320 bytes with the id first and the value in the preimage", () => {
    const t = shieldPayload(id, asset, 5n)
    expect((t.length - 2) / 2).toBe(SHIELD_PAYLOAD_BYTES)
    expect(t.slice(2, 66)).toBe(id.slice(2))
  })

  it("tells the full-balance forms apart", () => {
    expect(isQuotedForm(FULL)).toBe(false)
    expect(isQuotedForm(QUOTED | 42n)).toBe(true)
    expect(quotedAmount(QUOTED | 42n)).toBe(42n)
    expect(isQuotedForm(42n)).toBe(false)
  })
})
