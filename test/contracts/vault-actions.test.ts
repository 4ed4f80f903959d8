// FeeVault owner actions: consolidate, shield templates, rotation, ping, launch and admin (docs/protocol.md §4-5).
import { type Hex, keccak256, numberToHex, padHex, size } from "viem"
import { describe, expect, it } from "vitest"
import { feeVaultAbi, mockSwapRouterAbi, shieldAdapterAbi } from "../../contracts/abi.js"
import { FULL, QUOTED, shieldPayload, templatesHash } from "../../schema/ids.js"
import {
  account,
  accountOf,
  adapterEvents,
  advance,
  balanceOf,
  blockTime,
  type Ctx,
  claimMessage,
  encodeVaultCall,
  events,
  expectRevert,
  FAR_DEADLINE,
  fund,
  nonceOf,
  recipientData,
  registerOwner,
  send,
  signVault,
  units,
  useVault,
  vaultBalance,
  vaultSend,
  ZERO_ADDRESS
} from "./fixture.js"

const owner = account(3)
const stranger = account(4)
const newOwner = account(5)
let id: Hex

const ctx = useVault(async (c) => {
  id = await registerOwner(c, owner.address)
  await fund(c, id, c.usdt, units(1000n))
  await fund(c, id, c.weth, units(10n))
  await fund(c, id, c.usdc, units(500n, 6))
})

/** Replaces 32-byte word `index` of an ABI-encoded payload. */
const setWord = (payload: Hex, index: number, value: Hex): Hex =>
  `0x${payload.slice(2, 2 + 64 * index)}${padHex(value, { size: 32 }).slice(2)}${payload.slice(2 + 64 * (index + 1))}`

const template = (c: Ctx, value: bigint, tag: number) =>
  shieldPayload(id, c.usdt, value, numberToHex(tag, { size: 32 }))

async function consolidate(c: Ctx, assetIn: Hex, amountIn: bigint, minOut: bigint, signer = owner) {
  const nonce = await nonceOf(c, id)
  const sig = await signVault(c, signer, "Consolidate", {
    id,
    assetIn,
    amountIn,
    minOut,
    nonce,
    deadline: FAR_DEADLINE
  })
  return vaultSend(c, c.relayer, "consolidate", [id, assetIn, amountIn, minOut, FAR_DEADLINE, sig])
}

async function registerTemplates(c: Ctx, templates: readonly Hex[], signer = owner) {
  const nonce = await nonceOf(c, id)
  const sig = await signVault(c, signer, "RegisterShieldTemplates", {
    id,
    templatesHash: templatesHash(templates),
    nonce,
    deadline: FAR_DEADLINE
  })
  return vaultSend(c, c.relayer, "registerShieldTemplates", [id, templates, FAR_DEADLINE, sig])
}

const templateCount = (c: Ctx) =>
  c.publicClient.readContract({
    address: c.vault,
    abi: feeVaultAbi,
    functionName: "shieldTemplateCount",
    args: [id]
  })

async function rotate(c: Ctx, to: Hex, signer = owner) {
  const nonce = await nonceOf(c, id)
  const sig = await signVault(c, signer, "RotateOwner", { id, newOwner: to, nonce, deadline: FAR_DEADLINE })
  return vaultSend(c, c.relayer, "rotateOwner", [id, to, FAR_DEADLINE, sig])
}

async function ping(c: Ctx, signer = owner) {
  const nonce = await nonceOf(c, id)
  const sig = await signVault(c, signer, "Ping", { id, nonce, deadline: FAR_DEADLINE })
  return vaultSend(c, c.relayer, "ping", [id, FAR_DEADLINE, sig])
}

describe("consolidate", () => {
  it("swaps an exact amount into the settlement asset at the router's rate", async () => {
    const receipt = await consolidate(ctx, ctx.weth, units(2n), units(6000n))
    expect(events(receipt, "Consolidated")[0]?.args).toEqual({
      id,
      assetIn: ctx.weth,
      amountIn: units(2n),
      amountOut: units(6000n),
      nonce: 0n
    })
    expect(await vaultBalance(ctx, id, ctx.weth)).toBe(units(8n))
    expect(await vaultBalance(ctx, id, ctx.usdt)).toBe(units(7000n))
    expect(await nonceOf(ctx, id)).toBe(1n)
    expect((await accountOf(ctx, id)).lastActivity).toBe(await blockTime(ctx, receipt))
  })

  it("converts 6-decimal tokens with their decimals", async () => {
    const receipt = await consolidate(ctx, ctx.usdc, FULL, units(500n))
    expect(events(receipt, "Consolidated")[0]?.args).toMatchObject({
      amountIn: units(500n, 6),
      amountOut: units(500n)
    })
  })

  it("swaps the whole balance with FULL and keeps minOut absolute", async () => {
    // minOut sized for 20 WETH while only 10 are left: the router's minimum fails.
    const args = await expectRevert(consolidate(ctx, ctx.weth, FULL, units(60_000n)), "Error")
    expect(args).toEqual(["UniswapV2Router: INSUFFICIENT_OUTPUT_AMOUNT"])
    const receipt = await consolidate(ctx, ctx.weth, FULL, units(30_000n))
    expect(events(receipt, "Consolidated")[0]?.args).toMatchObject({
      amountIn: units(10n),
      amountOut: units(30_000n)
    })
    expect(await vaultBalance(ctx, id, ctx.weth)).toBe(0n)
  })

  it("scales minOut by balance / q with QUOTED | q when less than q is left", async () => {
    // Quoted for 20 WETH -> 60000 USDT, 10 WETH left: the effective minimum is 30000.
    const receipt = await consolidate(ctx, ctx.weth, QUOTED | units(20n), units(60_000n))
    expect(events(receipt, "Consolidated")[0]?.args).toMatchObject({
      amountIn: units(10n),
      amountOut: units(30_000n)
    })
    expect(await vaultBalance(ctx, id, ctx.weth)).toBe(0n)
  })

  it("leaves minOut unscaled with QUOTED | q when at least q is left", async () => {
    await expectRevert(consolidate(ctx, ctx.weth, QUOTED | units(5n), units(40_000n)), "Error")
    const receipt = await consolidate(ctx, ctx.weth, QUOTED | units(5n), units(15_000n))
    expect(events(receipt, "Consolidated")[0]?.args.amountIn).toBe(units(10n))
  })

  it("treats QUOTED | 0 as the whole balance with an absolute minOut", async () => {
    await expectRevert(consolidate(ctx, ctx.weth, QUOTED, units(30_001n)), "Error")
    const receipt = await consolidate(ctx, ctx.weth, QUOTED, units(30_000n))
    expect(events(receipt, "Consolidated")[0]?.args.amountIn).toBe(units(10n))
  })

  it("refuses the settlement asset, zero amounts, zero minOut and amounts above the balance", async () => {
    await expectRevert(consolidate(ctx, ctx.usdt, units(1n), 1n), "InvalidAssetIn")
    await expectRevert(consolidate(ctx, ctx.weth, 0n, 1n), "ZeroAmount")
    await expectRevert(consolidate(ctx, ctx.weth, units(1n), 0n), "ZeroMinOut")
    await expectRevert(consolidate(ctx, ctx.weth, units(11n), 1n), "InsufficientBalance")
    await expectRevert(consolidate(ctx, ctx.weth, units(1n), 1n, stranger), "InvalidSignature")
  })

  it("refuses when no router is configured", async () => {
    await send(ctx, {
      account: ctx.admin,
      address: ctx.vault,
      abi: feeVaultAbi,
      functionName: "setSwapRouter",
      args: [ZERO_ADDRESS]
    })
    await expectRevert(consolidate(ctx, ctx.weth, units(1n), 1n), "SwapRouterNotSet")
  })

  it("runs before a claim in one multicall, signed with nonces n and n + 1", async () => {
    const consolidateSig = await signVault(ctx, owner, "Consolidate", {
      id,
      assetIn: ctx.weth,
      amountIn: QUOTED | units(10n),
      minOut: units(29_000n),
      nonce: 0n,
      deadline: FAR_DEADLINE
    })
    const data = recipientData(stranger.address)
    const message = claimMessage(ctx, {
      beneficiaryId: id,
      amount: FULL,
      relayerFee: units(5n),
      dataHash: keccak256(data),
      nonce: 1n
    })
    const claimSig = await signVault(ctx, owner, "Claim", message)
    const receipt = await vaultSend(ctx, ctx.relayer, "multicall", [
      [
        encodeVaultCall("consolidate", [
          id,
          ctx.weth,
          QUOTED | units(10n),
          units(29_000n),
          FAR_DEADLINE,
          consolidateSig
        ]),
        encodeVaultCall("claim", [message, data, claimSig])
      ]
    ])
    expect(events(receipt, "Claimed")[0]?.args).toMatchObject({ amount: units(31_000n), nonce: 1n })
    expect(await balanceOf(ctx, ctx.usdt, stranger.address)).toBe(units(30_995n))
  })

  it("reverts with its fee claim as a whole: a fee the account cannot pay leaves the asset unswapped", async () => {
    const before = await vaultBalance(ctx, id, ctx.weth)
    const consolidateSig = await signVault(ctx, owner, "Consolidate", {
      id,
      assetIn: ctx.weth,
      amountIn: units(1n),
      minOut: units(2_900n),
      nonce: 0n,
      deadline: FAR_DEADLINE
    })
    // Paid in USDC, more than the account's 500.
    const fee = claimMessage(ctx, {
      beneficiaryId: id,
      asset: ctx.usdc,
      amount: units(501n, 6),
      relayerFee: units(501n, 6),
      nonce: 1n
    })
    const feeSig = await signVault(ctx, owner, "Claim", fee)
    await expectRevert(
      vaultSend(ctx, ctx.relayer, "multicall", [
        [
          encodeVaultCall("consolidate", [
            id,
            ctx.weth,
            units(1n),
            units(2_900n),
            FAR_DEADLINE,
            consolidateSig
          ]),
          encodeVaultCall("claim", [fee, "0x", feeSig])
        ]
      ]),
      "InsufficientBalance"
    )
    expect(await vaultBalance(ctx, id, ctx.weth)).toBe(before)
    expect(await nonceOf(ctx, id)).toBe(0n)
  })

  it("quotes through the router as a Uniswap V2 router would", async () => {
    const amounts = await ctx.publicClient.readContract({
      address: ctx.router,
      abi: mockSwapRouterAbi,
      functionName: "getAmountsOut",
      args: [units(1n, 6), [ctx.usdc, ctx.usdt]]
    })
    expect(amounts).toEqual([units(1n, 6), units(1n)])
  })
})

describe("shield templates", () => {
  it("registers templates, counts unused ones and shields one on anyone's request", async () => {
    const templates = [
      template(ctx, units(10n), 1),
      template(ctx, units(20n), 2),
      template(ctx, units(30n), 3)
    ]
    const receipt = await registerTemplates(ctx, templates)
    expect(events(receipt, "ShieldTemplatesCleared")).toHaveLength(0)
    expect(events(receipt, "ShieldTemplatesRegistered")[0]?.args).toEqual({
      id,
      count: 3n,
      templatesHash: templatesHash(templates),
      nonce: 0n
    })
    expect(await templateCount(ctx)).toBe(3n)
    expect(await nonceOf(ctx, id)).toBe(1n)
    const [stored, used] = await ctx.publicClient.readContract({
      address: ctx.vault,
      abi: feeVaultAbi,
      functionName: "shieldTemplate",
      args: [id, 1n]
    })
    expect([stored, used]).toEqual([templates[1], false])

    const shielded = await vaultSend(ctx, stranger, "shieldFromTemplate", [id, 1n])
    expect(events(shielded, "ShieldedFromTemplate")[0]?.args).toEqual({ id, index: 1n, amount: units(20n) })
    expect(adapterEvents(shielded)[0]?.args).toMatchObject({
      id,
      value: units(20n),
      npk: numberToHex(2, { size: 32 })
    })
    expect(await vaultBalance(ctx, id, ctx.usdt)).toBe(units(980n))
    expect(await balanceOf(ctx, ctx.usdt, ctx.adapter)).toBe(units(20n))
    expect(await templateCount(ctx)).toBe(2n)
    await expectRevert(vaultSend(ctx, stranger, "shieldFromTemplate", [id, 1n]), "TemplateAlreadyUsed")
    await expectRevert(vaultSend(ctx, stranger, "shieldFromTemplate", [id, 3n]), "TemplateNotFound")
  })

  it("replaces the unused templates, reporting how many were discarded", async () => {
    await registerTemplates(ctx, [template(ctx, 1n, 1), template(ctx, 2n, 2), template(ctx, 3n, 3)])
    await vaultSend(ctx, stranger, "shieldFromTemplate", [id, 0n])
    const replacement = [template(ctx, 4n, 4)]
    const receipt = await registerTemplates(ctx, replacement)
    const cleared = events(receipt, "ShieldTemplatesCleared")
    const registered = events(receipt, "ShieldTemplatesRegistered")
    expect(cleared[0]?.args).toEqual({ id, count: 2n })
    expect(registered[0]?.args).toMatchObject({ count: 1n, nonce: 1n })
    expect(cleared[0]!.logIndex).toBeLessThan(registered[0]!.logIndex)
    expect(await templateCount(ctx)).toBe(1n)
    await expectRevert(vaultSend(ctx, stranger, "shieldFromTemplate", [id, 1n]), "TemplateNotFound")
    const shielded = await vaultSend(ctx, stranger, "shieldFromTemplate", [id, 0n])
    expect(events(shielded, "ShieldedFromTemplate")[0]?.args.amount).toBe(4n)
  })

  it("refuses to shield more than the settlement balance", async () => {
    await registerTemplates(ctx, [template(ctx, units(1001n), 1)])
    await expectRevert(vaultSend(ctx, stranger, "shieldFromTemplate", [id, 0n]), "InsufficientBalance")
  })

  it("refuses empty, oversized, non-canonical and duplicate template sets", async () => {
    const good = template(ctx, 1n, 1)
    expect(size(good)).toBe(320)
    const invalid: Record<string, Hex[]> = {
      empty: [],
      "33 templates": Array.from({ length: 33 }, (_, i) => template(ctx, 1n, i + 1)),
      "319 bytes": [good.slice(0, -2) as Hex],
      "321 bytes": [`${good}00`],
      "token type 1": [setWord(good, 2, "0x01")],
      "other token": [shieldPayload(id, ctx.weth, 1n)],
      "sub id 1": [setWord(good, 4, "0x01")],
      "zero value": [template(ctx, 0n, 1)],
      "value of 2^120": [setWord(good, 5, numberToHex(2n ** 120n))],
      "other account": [shieldPayload(keccak256("0x01"), ctx.usdt, 1n)],
      duplicate: [good, template(ctx, 2n, 2), good]
    }
    for (const [label, templates] of Object.entries(invalid)) {
      await expect(
        expectRevert(
          vaultSend(ctx, ctx.relayer, "registerShieldTemplates", [id, templates, FAR_DEADLINE, "0x"]),
          "InvalidTemplates"
        ),
        label
      ).resolves.toBeDefined()
    }
    // 32 distinct canonical templates are the most a set may hold.
    const full = Array.from({ length: 32 }, (_, i) => template(ctx, 1n, i + 1))
    expect(events(await registerTemplates(ctx, full), "ShieldTemplatesRegistered")[0]?.args.count).toBe(32n)
  })

  it("refuses a signature over another set", async () => {
    const templates = [template(ctx, 1n, 1)]
    const sig = await signVault(ctx, owner, "RegisterShieldTemplates", {
      id,
      templatesHash: templatesHash([template(ctx, 2n, 1)]),
      nonce: 0n,
      deadline: FAR_DEADLINE
    })
    await expectRevert(
      vaultSend(ctx, ctx.relayer, "registerShieldTemplates", [id, templates, FAR_DEADLINE, sig]),
      "InvalidSignature"
    )
  })

  it("refuses when no shield adapter is configured", async () => {
    await registerTemplates(ctx, [template(ctx, 1n, 1)])
    await send(ctx, {
      account: ctx.admin,
      address: ctx.vault,
      abi: feeVaultAbi,
      functionName: "setShieldAdapter",
      args: [ZERO_ADDRESS]
    })
    await expectRevert(vaultSend(ctx, stranger, "shieldFromTemplate", [id, 0n]), "ShieldAdapterNotSet")
  })
})

describe("shield adapter", () => {
  it("refuses non-canonical payloads and shields with nothing received", async () => {
    const shield = (payload: Hex) =>
      send(ctx, {
        account: stranger,
        address: ctx.adapter,
        abi: shieldAdapterAbi,
        functionName: "shield",
        args: [payload]
      })
    await expectRevert(shield(shieldPayload(id, ctx.weth, 1n)), "NonCanonicalPayload")
    await expectRevert(shield(template(ctx, 1n, 1)), "NothingToShield")
  })
})

describe("rotateOwner", () => {
  it("replaces the owner, discards unused templates and only accepts the new key afterwards", async () => {
    await registerTemplates(ctx, [template(ctx, 1n, 1), template(ctx, 2n, 2)])
    const receipt = await rotate(ctx, newOwner.address)
    expect(events(receipt, "OwnerRotated")[0]?.args).toEqual({
      id,
      previousOwner: owner.address,
      newOwner: newOwner.address,
      nonce: 1n
    })
    expect(events(receipt, "ShieldTemplatesCleared")[0]?.args).toEqual({ id, count: 2n })
    expect(await templateCount(ctx)).toBe(0n)
    await expectRevert(vaultSend(ctx, stranger, "shieldFromTemplate", [id, 0n]), "TemplateNotFound")
    expect((await accountOf(ctx, id)).owner).toBe(newOwner.address)
    await expectRevert(ping(ctx, owner), "InvalidSignature")
    await ping(ctx, newOwner)
  })

  it("emits no clear event when there were no unused templates", async () => {
    const receipt = await rotate(ctx, newOwner.address)
    expect(events(receipt, "ShieldTemplatesCleared")).toHaveLength(0)
  })

  it("takes its fee claim signed by the new owner with nonce n + 1 in the same multicall", async () => {
    const rotateSig = await signVault(ctx, owner, "RotateOwner", {
      id,
      newOwner: newOwner.address,
      nonce: 0n,
      deadline: FAR_DEADLINE
    })
    const fee = claimMessage(ctx, { beneficiaryId: id, amount: units(2n), relayerFee: units(2n), nonce: 1n })
    const feeSig = await signVault(ctx, newOwner, "Claim", fee)
    const receipt = await vaultSend(ctx, ctx.relayer, "multicall", [
      [
        encodeVaultCall("rotateOwner", [id, newOwner.address, FAR_DEADLINE, rotateSig]),
        encodeVaultCall("claim", [fee, "0x", feeSig])
      ]
    ])
    expect(events(receipt, "Claimed")[0]?.args).toMatchObject({ relayerFee: units(2n), nonce: 1n })
  })

  it("refuses the zero address and signatures by others", async () => {
    await expectRevert(rotate(ctx, ZERO_ADDRESS), "InvalidOwner")
    await expectRevert(rotate(ctx, newOwner.address, stranger), "InvalidSignature")
  })
})

describe("ping", () => {
  it("records owner activity and consumes a nonce", async () => {
    await advance(ctx, 1000n)
    const receipt = await ping(ctx)
    expect(events(receipt, "Pinged")[0]?.args).toEqual({ id, nonce: 0n })
    expect((await accountOf(ctx, id)).lastActivity).toBe(await blockTime(ctx, receipt))
    await expectRevert(ping(ctx, stranger), "InvalidSignature")
  })

  it("refuses an expired deadline", async () => {
    const sig = await signVault(ctx, owner, "Ping", { id, nonce: 0n, deadline: 1n })
    await expectRevert(vaultSend(ctx, ctx.relayer, "ping", [id, 1n, sig]), "DeadlineExpired")
  })
})

describe("launch and administration", () => {
  it("lets only the launcher announce a token", async () => {
    const token = account(6).address
    const hint = "0xc0ffee" as Hex
    const receipt = await vaultSend(ctx, ctx.admin, "launch", [token, id, hint])
    expect(events(receipt, "TokenLaunched")[0]?.args).toEqual({
      token,
      beneficiaryId: id,
      beneficiaryHint: hint
    })
    await expectRevert(vaultSend(ctx, stranger, "launch", [token, id, hint]), "NotLauncher")
  })

  it("exposes its configuration and restricts the setters to the admin", async () => {
    const read = <
      F extends
        | "settlementAsset"
        | "shieldAdapter"
        | "swapRouter"
        | "attestorThreshold"
        | "bindDelay"
        | "launcher"
    >(
      functionName: F
    ) => ctx.publicClient.readContract({ address: ctx.vault, abi: feeVaultAbi, functionName })
    expect(await read("settlementAsset")).toBe(ctx.usdt)
    expect(await read("shieldAdapter")).toBe(ctx.adapter)
    expect(await read("swapRouter")).toBe(ctx.router)
    expect(await read("attestorThreshold")).toBe(1n)
    expect(await read("bindDelay")).toBe(3600n)
    expect(await read("launcher")).toBe(ctx.admin.address)
    expect(
      await ctx.publicClient.readContract({
        address: ctx.vault,
        abi: feeVaultAbi,
        functionName: "isAttestor",
        args: [ctx.attestor.address]
      })
    ).toBe(true)
    await expectRevert(
      vaultSend(ctx, stranger, "setAttestor", [stranger.address, true]),
      "OwnableUnauthorizedAccount"
    )
    await expectRevert(vaultSend(ctx, stranger, "setAttestorThreshold", [0n]), "OwnableUnauthorizedAccount")
    await expectRevert(vaultSend(ctx, stranger, "setBindDelay", [0n]), "OwnableUnauthorizedAccount")
    await expectRevert(
      vaultSend(ctx, stranger, "setShieldAdapter", [ZERO_ADDRESS]),
      "OwnableUnauthorizedAccount"
    )
    await expectRevert(
      vaultSend(ctx, stranger, "setSwapRouter", [ZERO_ADDRESS]),
      "OwnableUnauthorizedAccount"
    )
    await expectRevert(
      vaultSend(ctx, stranger, "setLauncher", [stranger.address]),
      "OwnableUnauthorizedAccount"
    )
    const receipt = await vaultSend(ctx, ctx.admin, "setLauncher", [stranger.address])
    expect(receipt.status).toBe("success")
    await vaultSend(ctx, stranger, "launch", [ZERO_ADDRESS, id, "0x"])
  })
})
