/**
 * The Accounts projection as a pure fold: each vault event's effect on an account, docs/relayer.md's
 * Account record and its JSON text, and the live projection's undo journal.
 */
import { Either, Schema } from "effect"
import { getAddress, type Hex, keccak256, numberToHex } from "viem"
import { describe, expect, it } from "vitest"
import { Account } from "../../schema/relayer.js"
import { AccountsProjection } from "../../src/store/projections/AccountsProjection.js"
import {
  type AccountState,
  accountJson,
  accountRecord,
  applyToAccount,
  consumesNonce,
  foldAccounts,
  type ProjectionInput
} from "../../src/store/projections/accounts.js"
import { decodeVaultEvent, type VaultEvent } from "../../src/store/projections/vaultEvents.js"

const addr = (n: number) => getAddress(numberToHex(n, { size: 20 }))
const ZERO = addr(0)
const USDT = addr(0x1001)
const WETH = addr(0x1002)
const context = { settlementAsset: USDT }
const idA = keccak256("0x01")
const idB = keccak256("0x02")
const ownerA = addr(0xa1)
const ownerB = addr(0xb1)

let log = 0
/** An event at `block` with the next log index. */
const at = <E extends Omit<VaultEvent, "blockNumber" | "blockHash" | "logIndex">>(block: number, e: E) =>
  ({
    ...e,
    blockNumber: block,
    blockHash: keccak256(numberToHex(block)),
    logIndex: log++
  }) as unknown as VaultEvent

const registered = (id: Hex, owner = ownerA, block = 10, fallback = ZERO, delay = 0n) =>
  at(block, {
    name: "Registered",
    id,
    kind: owner === ZERO ? 2 : 1,
    owner,
    commitment: keccak256(id),
    fallbackRecipient: fallback,
    fallbackDelay: delay
  })

const fold = (events: ReadonlyArray<ProjectionInput>) => foldAccounts(context, events)
const one = (events: ReadonlyArray<ProjectionInput>, id: Hex = idA) => fold(events).get(id) as AccountState

describe("the Accounts fold", () => {
  it("registers an account with its kind, owner and fallback", () => {
    const a = one([registered(idA, ownerA, 10, addr(0xf), 600n)])
    expect(accountRecord(a)).toEqual({
      id: idA,
      kind: 1,
      owner: ownerA,
      fallbackRecipient: addr(0xf),
      fallbackDelay: 600n,
      pendingOwner: null,
      pendingReadyAt: null,
      balances: {},
      totalDeposited: {},
      lastActivityBlock: 10,
      shieldTemplates: 0,
      nonce: 0n,
      bindNonce: 0n
    })
    expect(a.registration?.commitment).toBe(keccak256(idA))
  })

  it("keeps deposits made before registration and lists no unregistered account", () => {
    const before = one([at(5, { name: "Deposited", id: idA, asset: USDT, from: ownerB, amount: 7n })])
    expect(accountRecord(before)).toBeUndefined()
    expect(accountJson(before)).toBeUndefined()
    const after = one([
      at(5, { name: "Deposited", id: idA, asset: USDT, from: ownerB, amount: 7n }),
      registered(idA, ownerA, 9)
    ])
    expect(accountRecord(after)).toMatchObject({
      balances: { [USDT]: 7n },
      totalDeposited: { [USDT]: 7n },
      lastActivityBlock: 9
    })
  })

  it("moves balances on claims, consolidations, template shields and sweeps", () => {
    const a = one([
      registered(idA),
      at(11, { name: "Deposited", id: idA, asset: USDT, from: ownerB, amount: 100n }),
      at(11, { name: "Deposited", id: idA, asset: WETH, from: ownerB, amount: 5n }),
      at(12, {
        name: "Claimed",
        id: idA,
        asset: USDT,
        adapter: ZERO,
        relayer: ownerB,
        amount: 30n,
        relayerFee: 1n,
        nonce: 0n
      }),
      at(13, { name: "Consolidated", id: idA, assetIn: WETH, amountIn: 2n, amountOut: 6000n, nonce: 1n }),
      at(14, {
        name: "ShieldTemplatesRegistered",
        id: idA,
        count: 3n,
        templatesHash: keccak256("0x"),
        nonce: 2n
      }),
      at(15, { name: "ShieldedFromTemplate", id: idA, index: 1n, amount: 70n })
    ])
    expect(accountRecord(a)).toMatchObject({
      balances: { [USDT]: 100n - 30n + 6000n - 70n, [WETH]: 3n },
      totalDeposited: { [USDT]: 100n, [WETH]: 5n },
      shieldTemplates: 2,
      nonce: 3n,
      // A template shield is not owner activity.
      lastActivityBlock: 14
    })
    const swept = applyToAccount(
      context,
      a,
      at(20, { name: "SweptToFallback", id: idA, asset: WETH, recipient: addr(0xf), amount: 3n })
    )
    expect(accountRecord(swept)?.balances).toEqual({ [USDT]: 6000n })
    expect(accountRecord(swept)?.totalDeposited).toEqual({ [USDT]: 100n, [WETH]: 5n })
  })

  it("clears templates on rotation and re-registration, and takes the owner from rotations", () => {
    const a = one([
      registered(idA),
      at(11, {
        name: "ShieldTemplatesRegistered",
        id: idA,
        count: 2n,
        templatesHash: keccak256("0x"),
        nonce: 0n
      }),
      at(12, { name: "OwnerRotated", id: idA, previousOwner: ownerA, newOwner: ownerB, nonce: 1n }),
      at(12, { name: "ShieldTemplatesCleared", id: idA, count: 2n }),
      at(13, { name: "Pinged", id: idA, nonce: 2n })
    ])
    expect(accountRecord(a)).toMatchObject({
      owner: ownerB,
      shieldTemplates: 0,
      nonce: 3n,
      lastActivityBlock: 13
    })
  })

  it("follows the bind lifecycle and counts bind nonces (owner cancels consume one, vetoes do not)", () => {
    const proposed = one(
      [
        registered(idB, ZERO),
        at(11, { name: "BindProposed", id: idB, newOwner: ownerA, readyAt: 5000n, bindNonce: 0n })
      ],
      idB
    )
    expect(accountRecord(proposed)).toMatchObject({
      kind: 2,
      owner: ZERO,
      pendingOwner: ownerA,
      pendingReadyAt: 5000n,
      bindNonce: 1n,
      lastActivityBlock: 10
    })
    const finalized = applyToAccount(
      context,
      proposed,
      at(12, { name: "BindFinalized", id: idB, previousOwner: ZERO, newOwner: ownerA })
    )
    expect(accountRecord(finalized)).toMatchObject({
      owner: ownerA,
      pendingOwner: null,
      pendingReadyAt: null,
      lastActivityBlock: 12
    })
    const cancelled = [
      at(13, { name: "BindProposed", id: idB, newOwner: ownerB, readyAt: 9000n, bindNonce: 1n }),
      at(14, { name: "BindCancelled", id: idB, by: ownerA, vetoed: false })
    ].reduce((s, e) => applyToAccount(context, s, e), finalized)
    expect(accountRecord(cancelled)).toMatchObject({ owner: ownerA, pendingOwner: null, bindNonce: 3n })
    const vetoed = [
      at(15, { name: "BindProposed", id: idB, newOwner: ownerB, readyAt: 9999n, bindNonce: 3n }),
      at(16, { name: "BindCancelled", id: idB, by: addr(0xa77), vetoed: true })
    ].reduce((s, e) => applyToAccount(context, s, e), cancelled)
    expect(accountRecord(vetoed)).toMatchObject({ pendingOwner: null, bindNonce: 4n })
    expect(vetoed.lastVetoBlock).toBe(16)
  })

  it("lets the chain's nonces win over counted ones, and ignores them for unknown ids", () => {
    const events: ProjectionInput[] = [
      registered(idA),
      at(11, { name: "Pinged", id: idA, nonce: 0n }),
      {
        name: "NonceReconciled",
        id: idA,
        nonce: 5n,
        bindNonce: 2n,
        blockNumber: 11,
        blockHash: keccak256("0x0b"),
        logIndex: 99
      },
      {
        name: "NonceReconciled",
        id: idB,
        nonce: 1n,
        bindNonce: 1n,
        blockNumber: 11,
        blockHash: keccak256("0x0b"),
        logIndex: 99
      }
    ]
    const accounts = fold(events)
    expect(accounts.get(idA)).toMatchObject({ nonce: 5n, bindNonce: 2n })
    expect(accounts.has(idB)).toBe(false)
  })

  it("knows which events consume a nonce (owner cancels do, vetoes do not)", () => {
    const consuming = (e: VaultEvent) => consumesNonce(e)
    expect(consuming(at(1, { name: "Pinged", id: idA, nonce: 0n }))).toBe(true)
    expect(consuming(at(1, { name: "BindCancelled", id: idA, by: ownerA, vetoed: false }))).toBe(true)
    expect(consuming(at(1, { name: "BindCancelled", id: idA, by: ownerA, vetoed: true }))).toBe(false)
    expect(consuming(at(1, { name: "Deposited", id: idA, asset: USDT, from: ownerB, amount: 1n }))).toBe(
      false
    )
    expect(consuming(registered(idA))).toBe(false)
  })

  it("empties a balance to nothing, keeps the other assets, and never changes an earlier state's amounts", () => {
    const deposited = one([
      registered(idA),
      at(11, { name: "Deposited", id: idA, asset: USDT, from: ownerB, amount: 4n }),
      at(11, { name: "Deposited", id: idA, asset: WETH, from: ownerB, amount: 9n })
    ])
    const claim = (asset: typeof USDT, amount: bigint, nonce: bigint) =>
      at(12, {
        name: "Claimed",
        id: idA,
        asset,
        adapter: ZERO,
        relayer: ownerB,
        amount,
        relayerFee: 0n,
        nonce
      })
    const usdtGone = applyToAccount(context, deposited, claim(USDT, 4n, 0n))
    expect(usdtGone.balances).toEqual({ [WETH]: 9n })
    expect(Object.keys(usdtGone.balances)).toEqual([WETH])
    const allGone = applyToAccount(context, usdtGone, claim(WETH, 20n, 1n))
    expect(allGone.balances).toEqual({})
    expect(accountJson(allGone)).toContain(`"balances":{},"totalDeposited":{"${USDT}":"4","${WETH}":"9"}`)
    // A claim of an asset it does not hold changes no amount.
    expect(applyToAccount(context, allGone, claim(USDT, 1n, 2n)).balances).toEqual({})
    expect(deposited.balances).toEqual({ [USDT]: 4n, [WETH]: 9n })
    expect(usdtGone.balances).toEqual({ [WETH]: 9n })
    // Deposits after everything was emptied start from nothing again.
    const again = applyToAccount(
      context,
      allGone,
      at(13, { name: "Deposited", id: idA, asset: USDT, from: ownerB, amount: 2n })
    )
    expect(again.balances).toEqual({ [USDT]: 2n })
    expect(allGone.balances).toEqual({})
  })

  it("gives accounts without a fallback the same record as before, zero address and all", () => {
    const a = one([registered(idA, ownerA, 10, getAddress("0x0000000000000000000000000000000000000000"), 0n)])
    expect(accountRecord(a)).toMatchObject({ fallbackRecipient: null, fallbackDelay: null })
    expect(a.registration?.fallbackRecipient).toBe(ZERO)
    expect(a.registration?.fallbackDelay).toBe(0n)
    expect(accountJson(a)).toContain('"fallbackRecipient":null,"fallbackDelay":null')
  })

  it("does not change the map it starts from", () => {
    const first = fold([registered(idA)])
    const second = foldAccounts(context, [at(11, { name: "Pinged", id: idA, nonce: 0n })], first)
    expect(first.get(idA)?.nonce).toBe(0n)
    expect(second.get(idA)?.nonce).toBe(1n)
  })

  it("writes the JSON text of exactly the Account record's wire form", () => {
    const a = one([
      registered(idA, ownerA, 10, addr(0xf), 600n),
      at(11, { name: "Deposited", id: idA, asset: WETH, from: ownerB, amount: 10n ** 30n }),
      at(11, { name: "Deposited", id: idA, asset: USDT, from: ownerB, amount: 1n }),
      at(12, { name: "BindProposed", id: idA, newOwner: ownerB, readyAt: 2n ** 255n, bindNonce: 0n })
    ])
    const record = accountRecord(a) as Account
    const text = accountJson(a) as string
    expect(JSON.parse(text)).toEqual(Schema.encodeSync(Account)(record))
    expect(Schema.decodeUnknownSync(Account)(JSON.parse(text))).toEqual(record)
  })
})

describe("stored events", () => {
  it("decode into the fold's events and refuse malformed arguments", () => {
    const stored = {
      blockNumber: 3,
      blockHash: keccak256("0x03"),
      logIndex: 1,
      eventName: "Claimed",
      args: {
        id: idA,
        asset: USDT,
        adapter: ZERO,
        relayer: ownerB,
        amount: "115792089237316195423570985008687907853269984665640564039457584007913129639935",
        relayerFee: "0",
        nonce: "4"
      }
    }
    const decoded = decodeVaultEvent(stored)
    expect(Either.getOrThrow(decoded)).toMatchObject({ name: "Claimed", amount: 2n ** 256n - 1n, nonce: 4n })
    expect(Either.getOrThrow(decodeVaultEvent({ ...stored, eventName: "TokenLaunched" }))).toBeUndefined()
    const bad = decodeVaultEvent({ ...stored, args: { ...stored.args, nonce: 4 } })
    expect(Either.isLeft(bad) && bad.left.field).toBe("nonce")
  })
})

describe("the live projection", () => {
  const events: ProjectionInput[] = [
    registered(idA, ownerA, 10),
    at(11, { name: "Deposited", id: idA, asset: USDT, from: ownerB, amount: 50n }),
    registered(idB, ZERO, 12),
    at(13, { name: "Pinged", id: idA, nonce: 0n }),
    at(14, { name: "BindProposed", id: idB, newOwner: ownerA, readyAt: 1n, bindNonce: 0n })
  ]
  const upTo = (block: number) => fold(events.filter((e) => e.blockNumber <= block))

  it("equals the fold, and rewinds to what the fold gives for a lower block", () => {
    const live = new AccountsProjection(context)
    live.reset(0)
    for (const e of events) live.apply(e)
    expect(new Map(live.accounts)).toEqual(upTo(14))
    expect(live.rewind(12)).toBe(true)
    expect(new Map(live.accounts)).toEqual(upTo(12))
    expect(live.rewind(11)).toBe(true)
    expect(new Map(live.accounts)).toEqual(upTo(11))
    for (const e of events.filter((e) => e.blockNumber > 11)) live.apply(e)
    expect(new Map(live.accounts)).toEqual(upTo(14))
  })

  it("refuses to rewind below what it has finalized", () => {
    const live = new AccountsProjection(context)
    live.reset(0)
    for (const e of events) live.apply(e)
    live.finalize(12)
    expect(live.rewind(11)).toBe(false)
    expect(new Map(live.accounts)).toEqual(upTo(14))
    expect(live.rewind(12)).toBe(true)
    expect(new Map(live.accounts)).toEqual(upTo(12))
  })

  it("changes its version with every change and only then", () => {
    const live = new AccountsProjection(context)
    live.reset(0)
    const v0 = live.version
    live.apply(events[0] as ProjectionInput)
    expect(live.version).toBeGreaterThan(v0)
    const v1 = live.version
    live.apply({
      name: "NonceReconciled",
      id: idB,
      nonce: 1n,
      bindNonce: 0n,
      blockNumber: 20,
      blockHash: keccak256("0x"),
      logIndex: 0
    })
    expect(live.version).toBe(v1)
  })
})
