// FeeVault registration, deposits and claims (docs/protocol.md §2-5) against anvil.
import { type Hex, keccak256, padHex, toHex } from "viem"
import { describe, expect, it } from "vitest"
import { feeVaultAbi, shieldAdapterAbi } from "../../contracts/abi.js"
import { deploySmartWallet } from "../../contracts/deploy.js"
import { typeString, vaultTypes } from "../../schema/eip712.js"
import { computeId, FULL, ownerCommitment, shieldPayload } from "../../schema/ids.js"
import {
  account,
  accountOf,
  adapterEvents,
  balanceOf,
  blockTime,
  type ClaimMessage,
  type Ctx,
  claimMessage,
  encodeVaultCall,
  events,
  expectRevert,
  FAR_DEADLINE,
  fund,
  latestTime,
  nonceOf,
  recipientData,
  registerOwner,
  send,
  signVault,
  signVaultForWallet,
  units,
  useVault,
  vaultBalance,
  vaultSend,
  ZERO_ADDRESS
} from "./fixture.js"

const owner = account(3)
const stranger = account(4)
const recipient = account(5).address
let id: Hex

const ctx = useVault(async (c) => {
  id = await registerOwner(c, owner.address)
  await fund(c, id, c.usdt, units(1000n))
  await fund(c, id, c.weth, units(10n))
})

/** Signs `message` as the owner and submits the claim from `from` (default: the relayer). */
async function claim(
  c: Ctx,
  message: ClaimMessage,
  adapterData: Hex,
  options: { from?: typeof owner; signer?: typeof owner; signature?: Hex } = {}
) {
  const signature = options.signature ?? (await signVault(c, options.signer ?? owner, "Claim", message))
  return vaultSend(c, options.from ?? c.relayer, "claim", [message, adapterData, signature])
}

const directClaim = (c: Ctx, fields: Partial<ClaimMessage>) => {
  const data = recipientData(recipient)
  return { message: claimMessage(c, { beneficiaryId: id, dataHash: keccak256(data), ...fields }), data }
}

describe("FeeVault domain", () => {
  it("answers EIP-5267 with the protocol's domain and hashes the protocol's type strings", async () => {
    const [, name, version, chainId, verifyingContract] = await ctx.publicClient.readContract({
      address: ctx.vault,
      abi: feeVaultAbi,
      functionName: "eip712Domain"
    })
    expect({ name, version, chainId, verifyingContract }).toEqual({
      name: "FeeVault",
      version: "1",
      chainId: 31337n,
      verifyingContract: ctx.vault
    })
    const constants = {
      Claim: "CLAIM_TYPEHASH",
      Consolidate: "CONSOLIDATE_TYPEHASH",
      RegisterShieldTemplates: "REGISTER_SHIELD_TEMPLATES_TYPEHASH",
      RotateOwner: "ROTATE_OWNER_TYPEHASH",
      Ping: "PING_TYPEHASH",
      CancelBind: "CANCEL_BIND_TYPEHASH",
      BindOwner: "BIND_OWNER_TYPEHASH"
    } as const
    for (const primaryType of Object.keys(vaultTypes) as (keyof typeof vaultTypes)[]) {
      const onChain = await ctx.publicClient.readContract({
        address: ctx.vault,
        abi: feeVaultAbi,
        functionName: constants[primaryType]
      })
      expect(onChain, primaryType).toBe(keccak256(toHex(typeString(primaryType))))
    }
  })
})

describe("registration", () => {
  it("registers a kind-1 account under the protocol id and refuses a second registration", async () => {
    const salt = padHex("0x1234", { size: 32 })
    const fallback = account(6).address
    const receipt = await vaultSend(ctx, stranger, "registerOwner", [owner.address, salt, fallback, 86_400n])
    const expectedId = computeId(1, ownerCommitment(owner.address, salt), fallback, 86_400n)
    const [event] = events(receipt, "Registered")
    expect(event?.args).toEqual({
      id: expectedId,
      kind: 1,
      owner: owner.address,
      commitment: ownerCommitment(owner.address, salt),
      fallbackRecipient: fallback,
      fallbackDelay: 86_400n
    })
    expect(
      await ctx.publicClient.readContract({
        address: ctx.vault,
        abi: feeVaultAbi,
        functionName: "computeId",
        args: [1, ownerCommitment(owner.address, salt), fallback, 86_400n]
      })
    ).toBe(expectedId)
    expect(await accountOf(ctx, expectedId)).toEqual({
      kind: 1,
      owner: owner.address,
      fallbackRecipient: fallback,
      fallbackDelay: 86_400n,
      lastActivity: await blockTime(ctx, receipt),
      pendingOwner: ZERO_ADDRESS,
      pendingReadyAt: 0n,
      sweepClosedUntil: 0n
    })
    await expectRevert(
      vaultSend(ctx, stranger, "registerOwner", [owner.address, salt, fallback, 86_400n]),
      "AlreadyRegistered"
    )
  })

  it("needs both or neither of fallback recipient and delay, and a non-zero owner", async () => {
    const salt = padHex("0x99", { size: 32 })
    await expectRevert(
      vaultSend(ctx, stranger, "registerOwner", [owner.address, salt, recipient, 0n]),
      "InvalidFallback"
    )
    await expectRevert(
      vaultSend(ctx, stranger, "registerOwner", [owner.address, salt, ZERO_ADDRESS, 60n]),
      "InvalidFallback"
    )
    await expectRevert(
      vaultSend(ctx, stranger, "registerOwner", [ZERO_ADDRESS, salt, ZERO_ADDRESS, 0n]),
      "InvalidOwner"
    )
  })
})

describe("deposit", () => {
  it("credits the received amount, also before the account is registered", async () => {
    const future = computeId(
      1,
      ownerCommitment(stranger.address, padHex("0x01", { size: 32 })),
      ZERO_ADDRESS,
      0n
    )
    const receipt = await fund(ctx, future, ctx.usdc, units(25n, 6), stranger)
    expect(events(receipt, "Deposited")[0]?.args).toEqual({
      id: future,
      asset: ctx.usdc,
      from: stranger.address,
      amount: units(25n, 6)
    })
    expect(await vaultBalance(ctx, future, ctx.usdc)).toBe(units(25n, 6))
    const total = await ctx.publicClient.readContract({
      address: ctx.vault,
      abi: feeVaultAbi,
      functionName: "totalDeposited",
      args: [future, ctx.usdc]
    })
    expect(total).toBe(units(25n, 6))
    expect((await accountOf(ctx, future)).kind).toBe(0)
  })

  it("refuses a zero deposit", async () => {
    await expectRevert(vaultSend(ctx, stranger, "deposit", [id, ctx.usdt, 0n]), "ZeroAmount")
  })
})

describe("claim (direct adapter)", () => {
  it("pays the fee to the sender and the rest to the recipient, consuming the nonce", async () => {
    const { message, data } = directClaim(ctx, { amount: units(100n), relayerFee: units(2n) })
    const relayerBefore = await balanceOf(ctx, ctx.usdt, ctx.relayer.address)
    const receipt = await claim(ctx, message, data)
    expect(events(receipt, "Claimed")[0]?.args).toEqual({
      id,
      asset: ctx.usdt,
      adapter: ZERO_ADDRESS,
      relayer: ctx.relayer.address,
      amount: units(100n),
      relayerFee: units(2n),
      nonce: 0n
    })
    expect(await balanceOf(ctx, ctx.usdt, recipient)).toBe(units(98n))
    expect((await balanceOf(ctx, ctx.usdt, ctx.relayer.address)) - relayerBefore).toBe(units(2n))
    expect(await vaultBalance(ctx, id, ctx.usdt)).toBe(units(900n))
    expect(await nonceOf(ctx, id)).toBe(1n)
    expect((await accountOf(ctx, id)).lastActivity).toBe(await blockTime(ctx, receipt))
  })

  it("lets anyone submit a claim naming the zero relayer, paying the fee to the sender", async () => {
    const { message, data } = directClaim(ctx, {
      relayer: ZERO_ADDRESS,
      amount: units(10n),
      relayerFee: units(1n)
    })
    const receipt = await claim(ctx, message, data, { from: stranger })
    expect(events(receipt, "Claimed")[0]?.args.relayer).toBe(stranger.address)
    expect(await balanceOf(ctx, ctx.usdt, stranger.address)).toBe(units(1n))
  })

  it("resolves FULL to the whole balance at execution", async () => {
    const { message, data } = directClaim(ctx, { asset: ctx.weth, amount: FULL, relayerFee: units(1n) })
    const receipt = await claim(ctx, message, data)
    const [event] = events(receipt, "Claimed")
    expect(event?.args.amount).toBe(units(10n))
    expect(await balanceOf(ctx, ctx.weth, recipient)).toBe(units(9n))
    expect(await vaultBalance(ctx, id, ctx.weth)).toBe(0n)
  })

  it("pays only the relayer on a fee-only claim with empty adapter data", async () => {
    const message = claimMessage(ctx, { beneficiaryId: id, amount: units(3n), relayerFee: units(3n) })
    const receipt = await claim(ctx, message, "0x")
    expect(events(receipt, "Claimed")[0]?.args).toMatchObject({ amount: units(3n), relayerFee: units(3n) })
    expect(await balanceOf(ctx, ctx.usdt, ctx.relayer.address)).toBe(units(3n))
    expect(await vaultBalance(ctx, id, ctx.usdt)).toBe(units(997n))
  })

  it("refuses a signature by anyone but the owner", async () => {
    const { message, data } = directClaim(ctx, {})
    await expectRevert(claim(ctx, message, data, { signer: stranger }), "InvalidSignature")
    await expectRevert(claim(ctx, message, data, { signature: "0x1234" }), "InvalidSignature")
  })

  it("refuses a reused or future nonce", async () => {
    const { message, data } = directClaim(ctx, {})
    await claim(ctx, message, data)
    const args = await expectRevert(claim(ctx, message, data), "InvalidNonce")
    expect(args).toEqual([1n, 0n])
    await expectRevert(claim(ctx, { ...message, nonce: 5n }, data), "InvalidNonce")
  })

  it("refuses an expired deadline", async () => {
    const { message, data } = directClaim(ctx, { deadline: (await latestTime(ctx)) - 1n })
    await expectRevert(claim(ctx, message, data), "DeadlineExpired")
  })

  it("refuses a sender other than the named relayer", async () => {
    const { message, data } = directClaim(ctx, {})
    await expectRevert(claim(ctx, message, data, { from: stranger }), "RelayerMismatch")
  })

  it("refuses adapter data that does not hash to dataHash", async () => {
    const { message } = directClaim(ctx, {})
    await expectRevert(claim(ctx, message, recipientData(stranger.address)), "DataHashMismatch")
  })

  it("refuses a fee above the amount, a zero amount and an amount above the balance", async () => {
    const a = directClaim(ctx, { amount: units(1n), relayerFee: units(2n) })
    await expectRevert(claim(ctx, a.message, a.data), "FeeAboveAmount")
    const b = directClaim(ctx, { amount: 0n })
    await expectRevert(claim(ctx, b.message, b.data), "ZeroAmount")
    const c = directClaim(ctx, { amount: units(1001n) })
    await expectRevert(claim(ctx, c.message, c.data), "InsufficientBalance")
    const d = directClaim(ctx, { asset: ctx.usdc, amount: FULL })
    await expectRevert(claim(ctx, d.message, d.data), "ZeroAmount")
    const e = directClaim(ctx, { asset: ctx.weth, amount: FULL, relayerFee: units(11n) })
    await expectRevert(claim(ctx, e.message, e.data), "FeeAboveAmount")
  })

  it("refuses malformed direct adapter data", async () => {
    const short = "0x1234" as Hex
    await expectRevert(
      claim(ctx, claimMessage(ctx, { beneficiaryId: id, dataHash: keccak256(short) }), short),
      "InvalidAdapterData"
    )
    const dirty = padHex("0x01", { size: 32, dir: "right" })
    await expectRevert(
      claim(ctx, claimMessage(ctx, { beneficiaryId: id, dataHash: keccak256(dirty) }), dirty),
      "InvalidAdapterData"
    )
    // A fee-only claim moves nothing else, so it carries no recipient.
    const data = recipientData(recipient)
    const feeOnly = claimMessage(ctx, {
      beneficiaryId: id,
      amount: 5n,
      relayerFee: 5n,
      dataHash: keccak256(data)
    })
    await expectRevert(claim(ctx, feeOnly, data), "InvalidAdapterData")
  })

  it("refuses unregistered accounts and unknown adapters", async () => {
    const unknown = keccak256("0xdead")
    await expectRevert(claim(ctx, claimMessage(ctx, { beneficiaryId: unknown }), "0x"), "NotRegistered")
    const { message, data } = directClaim(ctx, { adapter: stranger.address })
    await expectRevert(claim(ctx, message, data), "AdapterNotAllowed")
  })
})

describe("claim (shield adapter)", () => {
  const shieldClaim = (c: Ctx, fields: Partial<ClaimMessage> = {}, payload?: Hex) => {
    const data = payload ?? shieldPayload(id, c.usdt, 1n, padHex("0xabc", { size: 32 }))
    return {
      message: claimMessage(c, {
        beneficiaryId: id,
        adapter: c.adapter,
        dataHash: keccak256(data),
        ...fields
      }),
      data
    }
  }

  it("sends the net amount to the adapter, which shields exactly what it received", async () => {
    const { message, data } = shieldClaim(ctx, { amount: units(50n), relayerFee: units(1n) })
    const receipt = await claim(ctx, message, data)
    expect(events(receipt, "Claimed")[0]?.args).toMatchObject({ adapter: ctx.adapter, amount: units(50n) })
    const [shielded] = adapterEvents(receipt)
    expect(shielded?.args).toMatchObject({
      id,
      npk: padHex("0xabc", { size: 32 }),
      token: ctx.usdt,
      value: units(49n),
      origin: ctx.relayer.address
    })
    expect(await balanceOf(ctx, ctx.usdt, ctx.adapter)).toBe(units(49n))
  })

  it("refuses a non-settlement asset and a payload that is not canonical for this account", async () => {
    const weth = shieldClaim(ctx, { asset: ctx.weth })
    await expectRevert(claim(ctx, weth.message, weth.data), "AdapterNotAllowed")
    const otherId = shieldClaim(ctx, {}, shieldPayload(keccak256("0x01"), ctx.usdt, 1n))
    await expectRevert(claim(ctx, otherId.message, otherId.data), "InvalidShieldPayload")
    const otherToken = shieldClaim(ctx, {}, shieldPayload(id, ctx.weth, 1n))
    await expectRevert(claim(ctx, otherToken.message, otherToken.data), "InvalidShieldPayload")
    const zeroValue = shieldClaim(ctx, {}, shieldPayload(id, ctx.usdt, 0n))
    await expectRevert(claim(ctx, zeroValue.message, zeroValue.data), "InvalidShieldPayload")
    const feeOnly = shieldClaim(ctx, { amount: 5n, relayerFee: 5n })
    await expectRevert(claim(ctx, feeOnly.message, feeOnly.data), "ZeroAmount")
  })

  it("is refused by the adapter when tx.origin is sanctioned", async () => {
    await send(ctx, {
      account: ctx.admin,
      address: ctx.adapter,
      abi: shieldAdapterAbi,
      functionName: "setSanctioned",
      args: [ctx.relayer.address, true]
    })
    const sanctioned = shieldClaim(ctx, { relayer: ZERO_ADDRESS })
    const args = await expectRevert(claim(ctx, sanctioned.message, sanctioned.data), "SanctionedOrigin")
    expect(args).toEqual([ctx.relayer.address])
    // The same signed claim goes through from a clean submitter.
    await claim(ctx, sanctioned.message, sanctioned.data, { from: stranger })
  })
})

describe("claim by an ERC-1271 owner", () => {
  it("accepts the wallet's signature and refuses one its owner did not make", async () => {
    const walletOwner = account(7)
    const wallet = await deploySmartWallet(ctx.anvil.rpcUrl, walletOwner.address)
    const walletId = await registerOwner(ctx, wallet)
    await fund(ctx, walletId, ctx.usdt, units(20n))
    const data = recipientData(recipient)
    const message = claimMessage(ctx, {
      beneficiaryId: walletId,
      amount: units(20n),
      dataHash: keccak256(data)
    })
    await expectRevert(
      claim(ctx, message, data, { signature: await signVaultForWallet(ctx, stranger, "Claim", message) }),
      "InvalidSignature"
    )
    await expectRevert(claim(ctx, message, data, { signature: "0x" }), "InvalidSignature")
    // ERC-1271 signatures are 1..2048 bytes.
    const valid = await signVaultForWallet(ctx, walletOwner, "Claim", message)
    await expectRevert(
      claim(ctx, message, data, { signature: padHex(valid, { size: 2049, dir: "right" }) }),
      "InvalidSignature"
    )
    const receipt = await claim(ctx, message, data, {
      signature: padHex(valid, { size: 2048, dir: "right" })
    })
    expect(events(receipt, "Claimed")[0]?.args.amount).toBe(units(20n))
    expect(await balanceOf(ctx, ctx.usdt, recipient)).toBe(units(20n))
  })
})

describe("multicall", () => {
  it("registers and claims in one transaction", async () => {
    const newOwner = account(8)
    const salt = padHex("0x42", { size: 32 })
    const newId = computeId(1, ownerCommitment(newOwner.address, salt), ZERO_ADDRESS, 0n)
    await fund(ctx, newId, ctx.usdt, units(10n))
    const data = recipientData(recipient)
    const message = claimMessage(ctx, { beneficiaryId: newId, amount: units(10n), dataHash: keccak256(data) })
    const signature = await signVault(ctx, newOwner, "Claim", message)
    const receipt = await vaultSend(ctx, ctx.relayer, "multicall", [
      [
        encodeVaultCall("registerOwner", [newOwner.address, salt, ZERO_ADDRESS, 0n]),
        encodeVaultCall("claim", [message, data, signature])
      ]
    ])
    expect(events(receipt, "Registered")[0]?.args.id).toBe(newId)
    expect(events(receipt, "Claimed")[0]?.args.nonce).toBe(0n)
  })

  it("consumes consecutive nonces for an action and its fee, and reverts both when the fee fails", async () => {
    const pingSig = await signVault(ctx, owner, "Ping", { id, nonce: 0n, deadline: FAR_DEADLINE })
    const fee = claimMessage(ctx, { beneficiaryId: id, amount: units(1n), relayerFee: units(1n), nonce: 1n })
    const feeSig = await signVault(ctx, owner, "Claim", fee)

    // The fee claim asks for more than the balance: the ping must not survive alone.
    const tooMuch = { ...fee, amount: units(5000n), relayerFee: units(5000n) }
    const tooMuchSig = await signVault(ctx, owner, "Claim", tooMuch)
    await expectRevert(
      vaultSend(ctx, ctx.relayer, "multicall", [
        [
          encodeVaultCall("ping", [id, FAR_DEADLINE, pingSig]),
          encodeVaultCall("claim", [tooMuch, "0x", tooMuchSig])
        ]
      ]),
      "InsufficientBalance"
    )
    expect(await nonceOf(ctx, id)).toBe(0n)

    const receipt = await vaultSend(ctx, ctx.relayer, "multicall", [
      [encodeVaultCall("ping", [id, FAR_DEADLINE, pingSig]), encodeVaultCall("claim", [fee, "0x", feeSig])]
    ])
    expect(events(receipt, "Pinged")[0]?.args.nonce).toBe(0n)
    expect(events(receipt, "Claimed")[0]?.args.nonce).toBe(1n)
    expect(await nonceOf(ctx, id)).toBe(2n)
    expect(await balanceOf(ctx, ctx.usdt, ctx.relayer.address)).toBe(units(1n))
  })

  it("keeps msg.sender across the batch for the relayer check", async () => {
    const fee = claimMessage(ctx, { beneficiaryId: id, amount: 1n, relayerFee: 1n })
    const sig = await signVault(ctx, owner, "Claim", fee)
    await expectRevert(
      vaultSend(ctx, stranger, "multicall", [[encodeVaultCall("claim", [fee, "0x", sig])]]),
      "RelayerMismatch"
    )
  })
})
