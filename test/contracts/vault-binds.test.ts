// FeeVault handle accounts: bind proposal, timelock, cancel, veto and the fallback sweep (docs/protocol.md §4-5).
import { type Address, type Hex, keccak256, padHex } from "viem"
import type { HDAccount } from "viem/accounts"
import { describe, expect, it } from "vitest"
import { feeVaultAbi } from "../../contracts/abi.js"
import {
  attestorSalt,
  computeId,
  handleCommitment,
  shieldPayload,
  templatesHash,
  userIdHash
} from "../../schema/ids.js"
import {
  account,
  accountOf,
  advance,
  balanceOf,
  bindNonceOf,
  blockTime,
  type Ctx,
  claimMessage,
  events,
  expectRevert,
  FAR_DEADLINE,
  fund,
  latestTime,
  nonceOf,
  recipientData,
  registerOwner,
  signVault,
  units,
  useVault,
  vaultBalance,
  vaultSend,
  ZERO_ADDRESS
} from "./fixture.js"

const BIND_DELAY = 3600n
const DAY = 86_400n
const bob = account(3)
const carol = account(4)
const stranger = account(5)
const fallbackRecipient = account(6).address
const extraAttestors = [account(7), account(8)]
const pepper = new TextEncoder().encode("test pepper")

/** A kind-2 id for a microblog user, as the attestor would commit to it. */
const handle = (userId: string, nonceByte: number) =>
  handleCommitment(
    1,
    userIdHash(userId),
    attestorSalt(pepper, 1, userId),
    padHex(`0x${nonceByte}`, { size: 32 })
  )

let id: Hex // handle account with a one-day fallback, holding 100 USDT
let shortId: Hex // handle account with a 600 s fallback, holding 50 USDT
let bareId: Hex // handle account without fallback
let ownerId: Hex // kind-1 account

async function registerHandle(c: Ctx, commitment: Hex, recipient: Address, delay: bigint): Promise<Hex> {
  const receipt = await vaultSend(c, stranger, "registerHandle", [commitment, recipient, delay])
  return events(receipt, "Registered")[0]!.args.id
}

const ctx = useVault(async (c) => {
  id = await registerHandle(c, handle("alice", 1), fallbackRecipient, DAY)
  shortId = await registerHandle(c, handle("dave", 2), fallbackRecipient, 600n)
  bareId = await registerHandle(c, handle("erin", 3), ZERO_ADDRESS, 0n)
  ownerId = await registerOwner(c, bob.address, { fallbackRecipient, fallbackDelay: 600n })
  await fund(c, id, c.usdt, units(100n))
  await fund(c, shortId, c.usdt, units(50n))
  await fund(c, ownerId, c.usdt, units(10n))
})

/** Attestor signatures over BindOwner, sorted by signer address unless `sorted` is false. */
async function bindSignatures(
  c: Ctx,
  target: Hex,
  newOwner: Address,
  signers: readonly HDAccount[],
  options: { bindNonce?: bigint; deadline?: bigint; sorted?: boolean } = {}
): Promise<Hex[]> {
  const bindNonce = options.bindNonce ?? (await bindNonceOf(c, target))
  const ordered =
    options.sorted === false
      ? signers
      : [...signers].sort((a, b) => (BigInt(a.address) < BigInt(b.address) ? -1 : 1))
  return Promise.all(
    ordered.map((signer) =>
      signVault(c, signer, "BindOwner", {
        id: target,
        newOwner,
        bindNonce,
        deadline: options.deadline ?? FAR_DEADLINE
      })
    )
  )
}

async function propose(c: Ctx, target: Hex, newOwner: Address, signers: readonly HDAccount[] = [c.attestor]) {
  const signatures = await bindSignatures(c, target, newOwner, signers)
  return vaultSend(c, c.relayer, "proposeBind", [target, newOwner, FAR_DEADLINE, signatures])
}

/** Proposes and finalizes a bind of `target` to `newOwner`. */
async function bind(c: Ctx, target: Hex, newOwner: Address) {
  await propose(c, target, newOwner)
  await advance(c, BIND_DELAY)
  return vaultSend(c, stranger, "finalizeBind", [target])
}

async function cancel(c: Ctx, target: Hex, signer: HDAccount) {
  const bindNonce = await bindNonceOf(c, target)
  const sig = await signVault(c, signer, "CancelBind", { id: target, bindNonce, deadline: FAR_DEADLINE })
  return vaultSend(c, c.relayer, "cancelBind", [target, FAR_DEADLINE, sig])
}

async function ping(c: Ctx, target: Hex, signer: HDAccount) {
  const nonce = await nonceOf(c, target)
  const sig = await signVault(c, signer, "Ping", { id: target, nonce, deadline: FAR_DEADLINE })
  return vaultSend(c, c.relayer, "ping", [target, FAR_DEADLINE, sig])
}

const sweep = (c: Ctx, target: Hex) => vaultSend(c, stranger, "sweepToFallback", [target, c.usdt])

async function setThreshold(c: Ctx, threshold: bigint, attestors: readonly HDAccount[] = []) {
  for (const a of attestors) await vaultSend(c, c.admin, "setAttestor", [a.address, true])
  await vaultSend(c, c.admin, "setAttestorThreshold", [threshold])
}

describe("handle accounts", () => {
  it("register under computeId(2, …) without an owner, so nothing can be claimed yet", async () => {
    const commitment = handle("frank", 9)
    const receipt = await vaultSend(ctx, stranger, "registerHandle", [commitment, fallbackRecipient, DAY])
    const expected = computeId(2, commitment, fallbackRecipient, DAY)
    expect(events(receipt, "Registered")[0]?.args).toEqual({
      id: expected,
      kind: 2,
      owner: ZERO_ADDRESS,
      commitment,
      fallbackRecipient,
      fallbackDelay: DAY
    })
    const message = claimMessage(ctx, { beneficiaryId: id, amount: 1n, relayerFee: 1n })
    const sig = await signVault(ctx, bob, "Claim", message)
    await expectRevert(vaultSend(ctx, ctx.relayer, "claim", [message, "0x", sig]), "OwnerNotSet")
  })
})

describe("proposeBind and finalizeBind", () => {
  it("sets a pending owner ready after the bind delay, then makes it the owner", async () => {
    const proposed = await propose(ctx, id, bob.address)
    const readyAt = (await blockTime(ctx, proposed)) + BIND_DELAY
    expect(events(proposed, "BindProposed")[0]?.args).toEqual({
      id,
      newOwner: bob.address,
      readyAt,
      bindNonce: 0n
    })
    expect(await bindNonceOf(ctx, id)).toBe(1n)
    expect(await accountOf(ctx, id)).toMatchObject({
      owner: ZERO_ADDRESS,
      pendingOwner: bob.address,
      pendingReadyAt: readyAt
    })

    const args = await expectRevert(vaultSend(ctx, stranger, "finalizeBind", [id]), "BindNotReady")
    expect(args).toEqual([readyAt])
    await advance(ctx, BIND_DELAY)
    const finalized = await vaultSend(ctx, stranger, "finalizeBind", [id])
    expect(events(finalized, "BindFinalized")[0]?.args).toEqual({
      id,
      previousOwner: ZERO_ADDRESS,
      newOwner: bob.address
    })
    expect(await accountOf(ctx, id)).toMatchObject({
      owner: bob.address,
      pendingOwner: ZERO_ADDRESS,
      pendingReadyAt: 0n,
      lastActivity: await blockTime(ctx, finalized)
    })
    expect(await bindNonceOf(ctx, id)).toBe(1n)
    await expectRevert(vaultSend(ctx, stranger, "finalizeBind", [id]), "NoPendingBind")

    // The bound owner can now claim.
    const data = recipientData(bob.address)
    const message = claimMessage(ctx, { beneficiaryId: id, amount: units(100n), dataHash: keccak256(data) })
    await vaultSend(ctx, ctx.relayer, "claim", [message, data, await signVault(ctx, bob, "Claim", message)])
    expect(await balanceOf(ctx, ctx.usdt, bob.address)).toBe(units(100n))
  })

  it("accepts threshold-many attestors in ascending order and refuses unsorted or repeated signers", async () => {
    await setThreshold(ctx, 2n, extraAttestors)
    const [first, second] = extraAttestors as [HDAccount, HDAccount]
    const one = await bindSignatures(ctx, id, bob.address, [first])
    await expectRevert(
      vaultSend(ctx, ctx.relayer, "proposeBind", [id, bob.address, FAR_DEADLINE, one]),
      "InsufficientAttestations"
    )
    const sorted = await bindSignatures(ctx, id, bob.address, [first, second])
    const reversed = [...sorted].reverse()
    await expectRevert(
      vaultSend(ctx, ctx.relayer, "proposeBind", [id, bob.address, FAR_DEADLINE, reversed]),
      "UnsortedSigners"
    )
    const repeated = [sorted[0]!, sorted[0]!]
    await expectRevert(
      vaultSend(ctx, ctx.relayer, "proposeBind", [id, bob.address, FAR_DEADLINE, repeated]),
      "UnsortedSigners"
    )
    const withOutsider = await bindSignatures(ctx, id, bob.address, [first, stranger])
    await expectRevert(
      vaultSend(ctx, ctx.relayer, "proposeBind", [id, bob.address, FAR_DEADLINE, withOutsider]),
      "NotAttestor"
    )
    const receipt = await vaultSend(ctx, ctx.relayer, "proposeBind", [id, bob.address, FAR_DEADLINE, sorted])
    expect(events(receipt, "BindProposed")[0]?.args.bindNonce).toBe(0n)
  })

  it("refuses non-attestors, bad signatures, stale bind nonces, expired deadlines and kind-1 accounts", async () => {
    const send = (target: Hex, newOwner: Address, deadline: bigint, signatures: Hex[]) =>
      vaultSend(ctx, ctx.relayer, "proposeBind", [target, newOwner, deadline, signatures])
    await expectRevert(
      send(id, bob.address, FAR_DEADLINE, await bindSignatures(ctx, id, bob.address, [stranger])),
      "NotAttestor"
    )
    await expectRevert(send(id, bob.address, FAR_DEADLINE, []), "InsufficientAttestations")
    await expectRevert(
      send(id, bob.address, FAR_DEADLINE, [padHex("0x01", { size: 65 })]),
      "InvalidSignature"
    )
    const stale = await bindSignatures(ctx, id, bob.address, [ctx.attestor], { bindNonce: 1n })
    await expectRevert(send(id, bob.address, FAR_DEADLINE, stale), "NotAttestor")
    const past = (await latestTime(ctx)) - 1n
    const expired = await bindSignatures(ctx, id, bob.address, [ctx.attestor], { deadline: past })
    await expectRevert(send(id, bob.address, past, expired), "DeadlineExpired")
    await expectRevert(
      send(id, ZERO_ADDRESS, FAR_DEADLINE, await bindSignatures(ctx, id, ZERO_ADDRESS, [ctx.attestor])),
      "InvalidOwner"
    )
    await expectRevert(
      send(
        ownerId,
        bob.address,
        FAR_DEADLINE,
        await bindSignatures(ctx, ownerId, bob.address, [ctx.attestor])
      ),
      "NotHandleAccount"
    )
    await expectRevert(
      send(
        keccak256("0x00"),
        bob.address,
        FAR_DEADLINE,
        await bindSignatures(ctx, keccak256("0x00"), bob.address, [ctx.attestor])
      ),
      "NotRegistered"
    )
  })

  it("refuses a second proposal while one is pending, and any proposal with a zero threshold", async () => {
    await propose(ctx, id, bob.address)
    await expectRevert(propose(ctx, id, carol.address), "BindPending")
    await setThreshold(ctx, 0n)
    await expectRevert(propose(ctx, shortId, carol.address), "ThresholdNotSet")
  })

  it("discards the unused templates of the previous owner when a bind finalizes", async () => {
    await bind(ctx, id, bob.address)
    const templates = [shieldPayload(id, ctx.usdt, 1n), shieldPayload(id, ctx.usdt, 2n)]
    const nonce = await nonceOf(ctx, id)
    const sig = await signVault(ctx, bob, "RegisterShieldTemplates", {
      id,
      templatesHash: templatesHash(templates),
      nonce,
      deadline: FAR_DEADLINE
    })
    await vaultSend(ctx, ctx.relayer, "registerShieldTemplates", [id, templates, FAR_DEADLINE, sig])
    const receipt = await bind(ctx, id, carol.address)
    expect(events(receipt, "BindFinalized")[0]?.args).toEqual({
      id,
      previousOwner: bob.address,
      newOwner: carol.address
    })
    expect(events(receipt, "ShieldTemplatesCleared")[0]?.args).toEqual({ id, count: 2n })
    const count = await ctx.publicClient.readContract({
      address: ctx.vault,
      abi: feeVaultAbi,
      functionName: "shieldTemplateCount",
      args: [id]
    })
    expect(count).toBe(0n)
  })
})

describe("cancelBind", () => {
  it("lets the current owner clear a pending bind, consuming the bind nonce", async () => {
    await bind(ctx, id, bob.address)
    await propose(ctx, id, carol.address)
    expect(await bindNonceOf(ctx, id)).toBe(2n)
    await expectRevert(cancel(ctx, id, carol), "InvalidSignature")
    const receipt = await cancel(ctx, id, bob)
    expect(events(receipt, "BindCancelled")[0]?.args).toEqual({ id, by: bob.address, vetoed: false })
    expect(await bindNonceOf(ctx, id)).toBe(3n)
    expect(await accountOf(ctx, id)).toMatchObject({
      owner: bob.address,
      pendingOwner: ZERO_ADDRESS,
      pendingReadyAt: 0n
    })
    await expectRevert(cancel(ctx, id, bob), "NoPendingBind")
  })

  it("cannot be used before any owner is bound", async () => {
    await propose(ctx, id, bob.address)
    await expectRevert(cancel(ctx, id, bob), "OwnerNotSet")
  })
})

describe("vetoBind", () => {
  it("lets an attestor clear a pending bind and closes the sweep for two bind delays", async () => {
    await propose(ctx, shortId, carol.address)
    await expectRevert(vaultSend(ctx, stranger, "vetoBind", [shortId]), "NotAttestor")
    const receipt = await vaultSend(ctx, ctx.attestor, "vetoBind", [shortId])
    const vetoedAt = await blockTime(ctx, receipt)
    expect(events(receipt, "BindCancelled")[0]?.args).toEqual({
      id: shortId,
      by: ctx.attestor.address,
      vetoed: true
    })
    expect(await accountOf(ctx, shortId)).toMatchObject({
      pendingOwner: ZERO_ADDRESS,
      pendingReadyAt: 0n,
      sweepClosedUntil: vetoedAt + 2n * BIND_DELAY
    })
    expect(await bindNonceOf(ctx, shortId)).toBe(1n)
    await expectRevert(vaultSend(ctx, ctx.attestor, "vetoBind", [shortId]), "NoPendingBind")

    // The 600 s fallback is due, but the veto window is not over.
    await advance(ctx, 600n)
    const args = await expectRevert(sweep(ctx, shortId), "SweepClosed")
    expect(args).toEqual([vetoedAt + 2n * BIND_DELAY])
    await advance(ctx, 2n * BIND_DELAY)
    await sweep(ctx, shortId)
  })
})

describe("sweepToFallback", () => {
  it("sends the whole balance to the fallback recipient once the delay passed without owner activity", async () => {
    await expectRevert(sweep(ctx, id), "FallbackNotDue")
    await advance(ctx, DAY)
    const receipt = await sweep(ctx, id)
    expect(events(receipt, "SweptToFallback")[0]?.args).toEqual({
      id,
      asset: ctx.usdt,
      recipient: fallbackRecipient,
      amount: units(100n)
    })
    expect(await vaultBalance(ctx, id, ctx.usdt)).toBe(0n)
    expect(await balanceOf(ctx, ctx.usdt, fallbackRecipient)).toBe(units(100n))
    await expectRevert(sweep(ctx, id), "NothingToSweep")
  })

  it("refuses accounts without a fallback or with a pending bind", async () => {
    await expectRevert(sweep(ctx, bareId), "NoFallback")
    await propose(ctx, shortId, carol.address)
    await advance(ctx, 600n)
    await expectRevert(sweep(ctx, shortId), "BindPending")
    await expectRevert(sweep(ctx, keccak256("0x00")), "NotRegistered")
  })

  it("restarts the clock on owner activity: ping and bind finalization", async () => {
    await advance(ctx, 500n)
    await ping(ctx, ownerId, bob)
    await advance(ctx, 200n)
    await expectRevert(sweep(ctx, ownerId), "FallbackNotDue")
    await advance(ctx, 400n)
    expect(events(await sweep(ctx, ownerId), "SweptToFallback")[0]?.args.amount).toBe(units(10n))

    // A proposal alone is not owner activity; its finalization is.
    await propose(ctx, shortId, carol.address)
    await advance(ctx, BIND_DELAY)
    await vaultSend(ctx, stranger, "finalizeBind", [shortId])
    await expectRevert(sweep(ctx, shortId), "FallbackNotDue")
    await advance(ctx, 600n)
    await sweep(ctx, shortId)
  })
})
