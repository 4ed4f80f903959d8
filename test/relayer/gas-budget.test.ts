/**
 * The gas budget table (src/relayer/fees/gasBudget.ts) against the reference vault: every kind of
 * transaction the relayer sends is run on anvil, built as the relayer builds it (a multicall when
 * steps are batched, a lone call unwrapped), in its most expensive storage state, and must fit
 * `gasUsed <= eth_estimateGas <= budget <= 2 x gasUsed`. `GAS_REPORT=1` prints the measurements.
 */
import {
  type Address,
  encodeFunctionData,
  type Hex,
  hashTypedData,
  keccak256,
  numberToHex,
  padHex
} from "viem"
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts"
import { afterAll, describe, expect, it } from "vitest"
import { feeVaultAbi } from "../../contracts/abi.js"
import { deploySmartWallet } from "../../contracts/deploy.js"
import { vaultDomain, vaultTypes } from "../../schema/eip712.js"
import { computeId, ownerCommitment, QUOTED, shieldPayload, templatesHash } from "../../schema/ids.js"
import type { QuoteAction } from "../../schema/relayer.js"
import { type BindAction, bindGasBudgetOf, gasBudgetOf } from "../../src/relayer/fees/gasBudget.js"
import {
  account,
  advance,
  EMPTY_HASH,
  encodeVaultCall,
  FAR_DEADLINE,
  fund,
  recipientData,
  units,
  useVault,
  type VaultMessage,
  vaultSend,
  ZERO_ADDRESS
} from "../contracts/fixture.js"

const ctx = useVault()

const DAY = 86_400n
const GAS_CAP_BPS = 20_000n

interface Row {
  readonly name: string
  readonly gasUsed: bigint
  readonly estimate: bigint
  readonly budget: bigint
}
const rows: Row[] = []

afterAll(() => {
  if (process.env.GAS_REPORT === "1")
    console.table(
      rows.map((r) => ({
        case: r.name,
        gasUsed: Number(r.gasUsed),
        estimate: Number(r.estimate),
        budget: Number(r.budget),
        "budget/used": (Number(r.budget) / Number(r.gasUsed)).toFixed(2)
      }))
    )
})

/** Signs a vault message with a fresh key (not an HD account, so the fixture's helper does not fit). */
const sign = <P extends keyof typeof vaultTypes>(
  signer: PrivateKeyAccount,
  primaryType: P,
  message: VaultMessage<P>
): Promise<Hex> =>
  signer.signTypedData({
    domain: vaultDomain(ctx.chainId, ctx.vault),
    types: vaultTypes,
    primaryType,
    message
  } as never)

/** A never-used owner with a fallback: registration then writes every slot it can. */
const freshOwner = () => {
  const owner = privateKeyToAccount(generatePrivateKey())
  const salt = keccak256(owner.address)
  const fallbackRecipient = privateKeyToAccount(generatePrivateKey()).address
  const id = computeId(1, ownerCommitment(owner.address, salt), fallbackRecipient, DAY)
  const registerCall = encodeVaultCall("registerOwner", [owner.address, salt, fallbackRecipient, DAY])
  return { owner, id, registerCall }
}

type Owner = ReturnType<typeof freshOwner>

/** Registers now (a separate transaction) unless the measured transaction carries the registration. */
const prepare = async (o: Owner, register: boolean): Promise<readonly Hex[]> => {
  if (register) return [o.registerCall]
  await setup(o.registerCall)
  return []
}

/** Sends a vault call that only sets the stage, from a bystander. */
async function setup(data: Hex): Promise<void> {
  const hash = await ctx.walletClient.sendTransaction({ account: account(9), to: ctx.vault, data })
  const receipt = await ctx.publicClient.waitForTransactionReceipt({ hash })
  expect(receipt.status).toBe("success")
}

/** Sends an admin-only vault call. */
async function adminCall(data: Hex): Promise<void> {
  const hash = await ctx.walletClient.sendTransaction({ account: ctx.admin, to: ctx.vault, data })
  expect((await ctx.publicClient.waitForTransactionReceipt({ hash })).status).toBe("success")
}

/** Measures `calls` sent from the relayer as the relayer sends them, and checks them against `budget`. */
async function measure(name: string, calls: readonly Hex[], budget: bigint): Promise<Row> {
  const data =
    calls.length === 1
      ? calls[0]!
      : encodeFunctionData({ abi: feeVaultAbi, functionName: "multicall", args: [calls] })
  const estimate = await ctx.publicClient.estimateGas({ account: ctx.relayer.address, to: ctx.vault, data })
  const hash = await ctx.walletClient.sendTransaction({
    account: ctx.relayer,
    to: ctx.vault,
    data,
    gas: (estimate * 12n) / 10n
  })
  const receipt = await ctx.publicClient.waitForTransactionReceipt({ hash })
  expect(receipt.status, name).toBe("success")
  const row = { name, gasUsed: receipt.gasUsed, estimate, budget }
  rows.push(row)
  return row
}

const expectCovered = (row: Row) => {
  // The estimate can fall a few thousand gas short of the mined cost (the vault stamps
  // block.timestamp, which differs between estimation and mining), so both must fit the budget.
  expect(row.gasUsed, `${row.name}: gasUsed <= budget`).toBeLessThanOrEqual(row.budget)
  expect(row.estimate, `${row.name}: estimate <= budget`).toBeLessThanOrEqual(row.budget)
  expect(row.budget, `${row.name}: budget <= 2 x gasUsed`).toBeLessThanOrEqual(2n * row.gasUsed)
}

/** A claim of `amount` with `fee` to a fresh recipient (or the shield adapter) at `nonce`. */
async function claimCall(
  o: Owner,
  options: {
    readonly asset?: Address
    readonly amount: bigint
    readonly fee: bigint
    readonly nonce: bigint
    readonly shield?: boolean
  }
): Promise<Hex> {
  const asset = options.asset ?? ctx.usdt
  const adapterData = options.shield
    ? shieldPayload(o.id, ctx.usdt, 1n, numberToHex(7, { size: 32 }))
    : recipientData(privateKeyToAccount(generatePrivateKey()).address)
  const message = {
    beneficiaryId: o.id,
    asset,
    amount: options.amount,
    adapter: options.shield ? ctx.adapter : ZERO_ADDRESS,
    dataHash: keccak256(adapterData),
    relayer: ctx.relayer.address,
    relayerFee: options.fee,
    nonce: options.nonce,
    deadline: FAR_DEADLINE
  }
  return encodeVaultCall("claim", [message, adapterData, await sign(o.owner, "Claim", message)])
}

/** The fee-only claim appended to an owner action, signed by `signer` (the new owner after a rotation). */
async function feeCall(o: Owner, nonce: bigint, asset: Address = ctx.usdc, signer = o.owner): Promise<Hex> {
  const fee = asset === ctx.usdc ? units(1n, 6) : units(1n)
  const message = {
    beneficiaryId: o.id,
    asset,
    amount: fee,
    adapter: ZERO_ADDRESS,
    dataHash: EMPTY_HASH,
    relayer: ctx.relayer.address,
    relayerFee: fee,
    nonce,
    deadline: FAR_DEADLINE
  }
  return encodeVaultCall("claim", [message, "0x", await sign(signer, "Claim", message)])
}

/** A consolidation of the whole WETH balance in the quoted form, signed at `nonce`. */
async function consolidateCall(o: Owner, nonce: bigint): Promise<Hex> {
  const amountIn = QUOTED | units(2n)
  const minOut = units(5_900n)
  const signature = await sign(o.owner, "Consolidate", {
    id: o.id,
    assetIn: ctx.weth,
    amountIn,
    minOut,
    nonce,
    deadline: FAR_DEADLINE
  })
  return encodeVaultCall("consolidate", [o.id, ctx.weth, amountIn, minOut, FAR_DEADLINE, signature])
}

const budget = (
  action: QuoteAction,
  flags: { shield?: boolean; register?: boolean; consolidate?: boolean; templates?: number } = {}
) =>
  gasBudgetOf({
    action,
    adapter: flags.shield ? "shield" : "direct",
    templates: flags.templates,
    consolidate: flags.consolidate ?? false,
    register: flags.register ?? false
  })

describe("claims", () => {
  for (const shield of [false, true])
    for (const register of [false, true]) {
      const name = `claim ${shield ? "shield" : "direct"}${register ? " + register" : ""}`
      it(name, async () => {
        const o = freshOwner()
        await fund(ctx, o.id, ctx.usdt, units(100n))
        const calls = [
          ...(await prepare(o, register)),
          await claimCall(o, { amount: units(10n), fee: units(1n), nonce: 0n, shield })
        ]
        expectCovered(await measure(name, calls, budget("claim", { shield, register })))
      })
    }

  it("claim direct of the whole balance (FULL) in a 6-decimal token", async () => {
    const o = freshOwner()
    await fund(ctx, o.id, ctx.usdc, units(100n, 6))
    await prepare(o, false)
    const call = await claimCall(o, {
      asset: ctx.usdc,
      amount: 2n ** 256n - 1n,
      fee: units(1n, 6),
      nonce: 0n
    })
    expectCovered(await measure("claim direct FULL (USDC)", [call], budget("claim")))
  })

  for (const shield of [false, true])
    for (const register of [false, true]) {
      const name = `claim ${shield ? "shield" : "direct"} + consolidate (QUOTED)${register ? " + register" : ""}`
      it(name, async () => {
        const o = freshOwner()
        await fund(ctx, o.id, ctx.weth, units(2n))
        const calls = [
          ...(await prepare(o, register)),
          await consolidateCall(o, 0n),
          await claimCall(o, { amount: 2n ** 256n - 1n, fee: units(1n), nonce: 1n, shield })
        ]
        expectCovered(await measure(name, calls, budget("claim", { shield, register, consolidate: true })))
      })
    }

  it("an ERC-1271 owner with a 2048-byte signature stays under the gas cap", async () => {
    const walletOwner = account(7)
    const wallet = await deploySmartWallet(ctx.anvil.rpcUrl, walletOwner.address)
    const salt = keccak256(wallet)
    const id = computeId(1, ownerCommitment(wallet, salt), ZERO_ADDRESS, 0n)
    await vaultSend(ctx, account(9), "registerOwner", [wallet, salt, ZERO_ADDRESS, 0n])
    await fund(ctx, id, ctx.usdt, units(100n))
    const adapterData = recipientData(privateKeyToAccount(generatePrivateKey()).address)
    const message = {
      beneficiaryId: id,
      asset: ctx.usdt,
      amount: units(10n),
      adapter: ZERO_ADDRESS,
      dataHash: keccak256(adapterData),
      relayer: ctx.relayer.address,
      relayerFee: units(1n),
      nonce: 0n,
      deadline: FAR_DEADLINE
    }
    const digest = hashTypedData({
      domain: vaultDomain(ctx.chainId, ctx.vault),
      types: vaultTypes,
      primaryType: "Claim",
      message
    })
    const signature = padHex(await walletOwner.sign({ hash: digest }), { size: 2048, dir: "right" })
    const row = await measure(
      "claim direct, ERC-1271 owner, 2048-byte signature",
      [encodeVaultCall("claim", [message, adapterData, signature])],
      budget("claim")
    )
    expect(row.estimate).toBeLessThanOrEqual((row.budget * GAS_CAP_BPS) / 10_000n)
  })
})

describe("owner actions with their fee claim", () => {
  for (const register of [false, true]) {
    const suffix = register ? " + register" : ""

    it(`consolidate + fee${suffix}`, async () => {
      const o = freshOwner()
      await fund(ctx, o.id, ctx.weth, units(2n))
      await fund(ctx, o.id, ctx.usdc, units(10n, 6))
      const calls = [...(await prepare(o, register)), await consolidateCall(o, 0n), await feeCall(o, 1n)]
      expectCovered(await measure(`consolidate + fee${suffix}`, calls, budget("consolidate", { register })))
    })

    for (const n of [1, 32]) {
      it(`shield-templates (${n}) + fee${suffix}`, async () => {
        const o = freshOwner()
        await fund(ctx, o.id, ctx.usdc, units(10n, 6))
        const templates = Array.from({ length: n }, (_, i) =>
          shieldPayload(
            o.id,
            ctx.usdt,
            units(BigInt(i + 1)),
            numberToHex(i + 1, { size: 32 }),
            [keccak256(numberToHex(i)), keccak256(numberToHex(i + 100)), keccak256(numberToHex(i + 200))],
            keccak256(numberToHex(i + 300))
          )
        )
        const prefix = await prepare(o, register)
        const signature = await sign(o.owner, "RegisterShieldTemplates", {
          id: o.id,
          templatesHash: templatesHash(templates),
          nonce: 0n,
          deadline: FAR_DEADLINE
        })
        const calls = [
          ...prefix,
          encodeVaultCall("registerShieldTemplates", [o.id, templates, FAR_DEADLINE, signature]),
          await feeCall(o, 1n)
        ]
        expectCovered(
          await measure(
            `shield-templates (${n}) + fee${suffix}`,
            calls,
            budget("shield-templates", { register, templates: n })
          )
        )
      })
    }

    it(`rotate-owner + fee${suffix}`, async () => {
      const o = freshOwner()
      await fund(ctx, o.id, ctx.usdc, units(10n, 6))
      const prefix = await prepare(o, register)
      const next = privateKeyToAccount(generatePrivateKey())
      const signature = await sign(o.owner, "RotateOwner", {
        id: o.id,
        newOwner: next.address,
        nonce: 0n,
        deadline: FAR_DEADLINE
      })
      const calls = [
        ...prefix,
        encodeVaultCall("rotateOwner", [o.id, next.address, FAR_DEADLINE, signature]),
        await feeCall(o, 1n, ctx.usdc, next)
      ]
      expectCovered(await measure(`rotate-owner + fee${suffix}`, calls, budget("rotate-owner", { register })))
    })

    it(`ping + fee${suffix}`, async () => {
      const o = freshOwner()
      await fund(ctx, o.id, ctx.usdt, units(10n))
      const prefix = await prepare(o, register)
      const signature = await sign(o.owner, "Ping", { id: o.id, nonce: 0n, deadline: FAR_DEADLINE })
      const calls = [
        ...prefix,
        encodeVaultCall("ping", [o.id, FAR_DEADLINE, signature]),
        await feeCall(o, 1n, ctx.usdt)
      ]
      expectCovered(await measure(`ping + fee${suffix}`, calls, budget("ping", { register })))
    })
  }
})

describe("binds", () => {
  const bindBudget = (action: BindAction, register = false) =>
    bindGasBudgetOf({ action, register, signatures: 1 })

  /** A fresh handle account with a fallback, and the registration call for it. */
  const freshHandle = () => {
    const commitment = keccak256(generatePrivateKey())
    const fallbackRecipient = privateKeyToAccount(generatePrivateKey()).address
    return {
      id: computeId(2, commitment, fallbackRecipient, DAY),
      registerCall: encodeVaultCall("registerHandle", [commitment, fallbackRecipient, DAY])
    }
  }

  const proposeCall = async (id: Hex, newOwner: Address, bindNonce: bigint, signers = [ctx.attestor]) => {
    // The vault wants the signers in ascending address order.
    const sorted = [...signers].sort((a, b) => (BigInt(a.address) < BigInt(b.address) ? -1 : 1))
    const signatures = await Promise.all(
      sorted.map((signer) =>
        signer.signTypedData({
          domain: vaultDomain(ctx.chainId, ctx.vault),
          types: vaultTypes,
          primaryType: "BindOwner",
          message: { id, newOwner, bindNonce, deadline: FAR_DEADLINE }
        })
      )
    )
    return encodeVaultCall("proposeBind", [id, newOwner, FAR_DEADLINE, signatures])
  }

  for (const register of [false, true]) {
    const name = `propose-bind${register ? " + register (kind 2)" : ""}`
    it(name, async () => {
      const h = freshHandle()
      const prefix = register ? [h.registerCall] : []
      if (!register) await setup(h.registerCall)
      const calls = [...prefix, await proposeCall(h.id, account(5).address, 0n)]
      expectCovered(await measure(name, calls, bindBudget("propose-bind", register)))
    })
  }

  it("propose-bind with three attestor signatures", async () => {
    const extra = [account(7), account(8)]
    for (const attestor of extra) await adminCall(encodeVaultCall("setAttestor", [attestor.address, true]))
    await adminCall(encodeVaultCall("setAttestorThreshold", [3n]))
    const h = freshHandle()
    await setup(h.registerCall)
    const call = await proposeCall(h.id, account(5).address, 0n, [ctx.attestor, ...extra])
    expectCovered(
      await measure(
        "propose-bind, 3 signatures",
        [call],
        bindGasBudgetOf({ action: "propose-bind", signatures: 3 })
      )
    )
  })

  it("finalize-bind, then cancel-bind of a second proposal", async () => {
    const h = freshHandle()
    const bob = privateKeyToAccount(generatePrivateKey())
    await setup(h.registerCall)
    await setup(await proposeCall(h.id, bob.address, 0n))
    await advance(ctx, 3_600n)
    expectCovered(
      await measure("finalize-bind", [encodeVaultCall("finalizeBind", [h.id])], bindBudget("finalize-bind"))
    )
    await setup(await proposeCall(h.id, account(6).address, 1n))
    const signature = await sign(bob, "CancelBind", { id: h.id, bindNonce: 2n, deadline: FAR_DEADLINE })
    expectCovered(
      await measure(
        "cancel-bind",
        [encodeVaultCall("cancelBind", [h.id, FAR_DEADLINE, signature])],
        bindBudget("cancel-bind")
      )
    )
  })
})
