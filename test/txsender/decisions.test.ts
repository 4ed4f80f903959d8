/**
 * The sender's decisions on made-up state, with no chain and no database: replacement of stuck
 * transactions (fees, cap, limit, no-op for a head that would revert), gap filling, re-signing a
 * taken nonce, settling and suspecting passed transactions, and reorgs of mined ones.
 */
import type { Hex } from "viem"
import { describe, expect, it } from "vitest"
import {
  type Broadcast,
  blocksToVerify,
  dueForReplacement,
  MAX_GAP_FILLS,
  MAX_SUBMIT_ROUNDS,
  type Mined,
  minedOutcome,
  nextSubmitStep,
  passedByChain,
  planGap,
  planMaintenance,
  planMinedRound,
  planPendingRound,
  planRenonce,
  planReplacement,
  type ReceiptLookup,
  renonceNeedsSimulation,
  replacementNeedsSimulation,
  stillWhereRecorded
} from "../../src/txsender/decisions.js"
import { bumped } from "../../src/txsender/fees.js"
import type { AttemptKind, StoredAttempt, StoredTx } from "../../src/txsender/store.js"

const gwei = (n: number) => BigInt(n) * 1_000_000_000n
const hashOf = (n: number): Hex => `0x${n.toString(16).padStart(64, "0")}`

let counter = 0
const attempt = (
  nonce: bigint,
  options: { kind?: AttemptKind; fee?: bigint; tip?: bigint; ageMs?: number; refused?: boolean } = {}
): StoredAttempt => {
  counter++
  return {
    hash: hashOf(counter),
    nonce,
    kind: options.kind ?? "original",
    maxFeePerGas: options.fee ?? gwei(10),
    maxPriorityFeePerGas: options.tip ?? gwei(1),
    raw: hashOf(1_000_000 + counter),
    ageMs: options.ageMs ?? 0,
    refused: options.refused ?? false
  }
}

const tx = (
  id: string,
  nonce: bigint,
  options: {
    attempts?: ReadonlyArray<StoredAttempt>
    purpose?: "request" | "filler"
    state?: StoredTx["state"]
    mined?: Mined
  } = {}
): StoredTx => ({
  id,
  nonce,
  purpose: options.purpose ?? "request",
  payload: { to: "0x00000000000000000000000000000000000000aa", data: "0x1234", value: 0n, gas: 100_000n },
  state: options.state ?? (options.mined === undefined ? "pending" : "mined"),
  outcome: options.mined?.outcome ?? null,
  blockNumber: options.mined?.blockNumber ?? null,
  minedHash: options.mined?.attempt.hash ?? null,
  minedBlockHash: options.mined?.blockHash ?? null,
  confirmed: false,
  attempts: options.attempts ?? [attempt(nonce)]
})

const estimate = { maxFeePerGas: gwei(10), maxPriorityFeePerGas: gwei(1) }
const context = { isHead: true, estimate, cap: gwei(500), maxReplacements: 5 }

describe("replacement", () => {
  it("bumps a stuck transaction by the minimum over its last attempt when the market has not moved", () => {
    const stuck = tx("1", 7n, { attempts: [attempt(7n, { fee: gwei(10), tip: gwei(1), ageMs: 90_000 })] })
    const plan = planReplacement(stuck, context, "succeeds")
    expect(plan).toEqual({
      _tag: "Replace",
      kind: "bump",
      noop: false,
      fees: { maxFeePerGas: bumped(gwei(10)), maxPriorityFeePerGas: bumped(gwei(1)) }
    })
    // 12.5% more in both fields: the least a node accepts at the same nonce.
    if (plan._tag === "Replace") {
      expect(plan.fees.maxFeePerGas * 1000n).toBeGreaterThanOrEqual(gwei(10) * 1125n)
      expect(plan.fees.maxPriorityFeePerGas * 1000n).toBeGreaterThanOrEqual(gwei(1) * 1125n)
    }
  })

  it("bumps over the latest attempt, not the first, and follows a higher estimate", () => {
    const stuck = tx("1", 7n, {
      attempts: [attempt(7n, { fee: gwei(10) }), attempt(7n, { kind: "bump", fee: gwei(20), tip: gwei(2) })]
    })
    const same = planReplacement(stuck, context, "succeeds")
    expect(same._tag === "Replace" && same.fees).toEqual({
      maxFeePerGas: bumped(gwei(20)),
      maxPriorityFeePerGas: bumped(gwei(2))
    })
    const market = { maxFeePerGas: gwei(40), maxPriorityFeePerGas: gwei(3) }
    const higher = planReplacement(stuck, { ...context, estimate: market }, "succeeds")
    expect(higher._tag === "Replace" && higher.fees).toEqual(market)
  })

  it("caps the fee at TX_MAX_FEE_GWEI, and skips when even the minimum bump is over it", () => {
    const stuck = tx("1", 7n, { attempts: [attempt(7n, { fee: gwei(80), tip: gwei(1) })] })
    const market = { maxFeePerGas: gwei(300), maxPriorityFeePerGas: gwei(1) }
    const capped = planReplacement(stuck, { ...context, cap: gwei(100), estimate: market }, "succeeds")
    expect(capped._tag === "Replace" && capped.fees.maxFeePerGas).toBe(gwei(100))
    // Exactly the minimum bump still fits under the cap; one wei less does not.
    const atCap = planReplacement(stuck, { ...context, cap: bumped(gwei(80)) }, "succeeds")
    expect(atCap._tag === "Replace" && atCap.fees.maxFeePerGas).toBe(bumped(gwei(80)))
    expect(planReplacement(stuck, { ...context, cap: bumped(gwei(80)) - 1n }, "succeeds")).toEqual({
      _tag: "Skip",
      reason: "fee_cap"
    })
  })

  it("stops at TX_MAX_REPLACEMENTS without simulating", () => {
    const bumps = [1, 2, 3].map((i) => attempt(7n, { kind: i === 3 ? "cancel" : "bump" }))
    const stuck = tx("1", 7n, { attempts: [attempt(7n), ...bumps] })
    expect(replacementNeedsSimulation(stuck, { ...context, maxReplacements: 3 })).toBe(false)
    expect(planReplacement(stuck, { ...context, maxReplacements: 3 }, undefined)).toEqual({
      _tag: "Skip",
      reason: "max_replacements"
    })
    // A re-priced or re-nonced attempt is no replacement: it does not count.
    const repriced = tx("2", 7n, {
      attempts: [attempt(7n), attempt(7n, { kind: "reprice" }), attempt(7n, { kind: "renonce" })]
    })
    expect(planReplacement(repriced, { ...context, maxReplacements: 1 }, "succeeds")._tag).toBe("Replace")
  })

  it("counts only the replacements the node did not refuse", () => {
    const refused = [1, 2, 3].map(() => attempt(7n, { kind: "bump", refused: true }))
    const stuck = tx("1", 7n, { attempts: [attempt(7n), ...refused] })
    expect(replacementNeedsSimulation(stuck, { ...context, maxReplacements: 1 })).toBe(true)
    expect(planReplacement(stuck, { ...context, maxReplacements: 1 }, "succeeds")._tag).toBe("Replace")
    const accepted = tx("2", 7n, { attempts: [...stuck.attempts, attempt(7n, { kind: "cancel" })] })
    expect(planReplacement(accepted, { ...context, maxReplacements: 1 }, "succeeds")).toEqual({
      _tag: "Skip",
      reason: "max_replacements"
    })
  })

  it("bumps over the last accepted attempt: refused bumps do not ratchet the fees up to the cap", () => {
    const refusedBump = attempt(7n, { kind: "bump", fee: gwei(30), refused: true })
    const higher = tx("3", 7n, {
      attempts: [
        attempt(7n, { fee: gwei(10) }),
        refusedBump,
        attempt(7n, { kind: "bump", fee: gwei(40), refused: true })
      ]
    })
    const plan = planReplacement(higher, context, "succeeds")
    expect(plan._tag === "Replace" && plan.fees.maxFeePerGas).toBe(bumped(gwei(10)))
    // However often the node refuses, the next bump stays where the accepted one left it.
    const again = tx("4", 7n, {
      attempts: [
        ...higher.attempts,
        ...[1, 2, 3, 4, 5].map(() => attempt(7n, { kind: "bump", fee: gwei(90), refused: true }))
      ]
    })
    expect(replacementNeedsSimulation(again, { ...context, cap: gwei(100) })).toBe(true)
    const capped = planReplacement(again, { ...context, cap: gwei(100) }, "succeeds")
    expect(capped._tag === "Replace" && capped.fees.maxFeePerGas).toBe(bumped(gwei(10)))
  })

  it("bumps over a replacement the node refused as underpriced: the pool holds the nonce that high", () => {
    const underpriced = attempt(7n, { kind: "bump", fee: gwei(30), refused: true })
    const stuck = tx("5", 7n, {
      attempts: [
        attempt(7n, { fee: gwei(10) }),
        attempt(7n, { kind: "bump", fee: gwei(20), refused: true }),
        underpriced
      ]
    })
    const plan = planReplacement(
      stuck,
      { ...context, underpricedRefusals: new Set([underpriced.hash]) },
      "succeeds"
    )
    expect(plan._tag === "Replace" && plan.fees.maxFeePerGas).toBe(bumped(gwei(30)))
    // It still spends none of TX_MAX_REPLACEMENTS.
    expect(
      planReplacement(
        stuck,
        { ...context, maxReplacements: 1, underpricedRefusals: new Set([underpriced.hash]) },
        "succeeds"
      )._tag
    ).toBe("Replace")
  })

  it("checks the fee cap before simulating: a transaction capped at TX_MAX_FEE_GWEI is not simulated", () => {
    const stuck = tx("1", 7n, { attempts: [attempt(7n, { fee: gwei(100), tip: gwei(1) })] })
    const capped = { ...context, cap: gwei(100) }
    expect(replacementNeedsSimulation(stuck, capped)).toBe(false)
    expect(planReplacement(stuck, capped, undefined)).toEqual({ _tag: "Skip", reason: "fee_cap" })
    expect(replacementNeedsSimulation(stuck, { ...context, cap: bumped(gwei(100)) })).toBe(true)
  })

  it("replaces the head with a no-op when it would now revert; a later one is bumped as it is", () => {
    const stuck = tx("1", 7n)
    expect(planReplacement(stuck, { ...context, isHead: true }, "reverts")).toMatchObject({
      _tag: "Replace",
      kind: "cancel",
      noop: true
    })
    expect(planReplacement(stuck, { ...context, isHead: false }, "reverts")).toMatchObject({
      _tag: "Replace",
      kind: "bump",
      noop: false
    })
  })

  it("waits when the simulation went unanswered", () => {
    expect(planReplacement(tx("1", 7n), context, "unanswered")).toEqual({ _tag: "Wait" })
    expect(planReplacement(tx("1", 7n), context, undefined)).toEqual({ _tag: "Wait" })
  })

  it("keeps a no-op a no-op: fillers and cancelled transactions are bumped without simulating", () => {
    const filler = tx("1", 7n, { purpose: "filler" })
    expect(replacementNeedsSimulation(filler, context)).toBe(false)
    expect(planReplacement(filler, context, undefined)).toMatchObject({
      _tag: "Replace",
      kind: "bump",
      noop: true
    })
    const cancelled = tx("2", 8n, { attempts: [attempt(8n), attempt(8n, { kind: "cancel" })] })
    expect(replacementNeedsSimulation(cancelled, context)).toBe(false)
    expect(planReplacement(cancelled, context, undefined)).toMatchObject({
      _tag: "Replace",
      kind: "cancel",
      noop: true
    })
  })

  it("is due after the replacement interval or when its re-broadcast was underpriced; the head is the chain's next nonce", () => {
    const fresh = tx("fresh", 6n, { attempts: [attempt(6n, { ageMs: 59_999 })] })
    const stale = tx("stale", 5n, { attempts: [attempt(5n, { ageMs: 60_000 })] })
    const underpriced = tx("cheap", 7n, { attempts: [attempt(7n, { ageMs: 10 })] })
    const due = dueForReplacement([stale, fresh, underpriced], 5n, 60_000, new Set(["cheap"]))
    expect(due.map((d) => [d.tx.id, d.isHead])).toEqual([
      ["stale", true],
      ["cheap", false]
    ])
    // Only the latest attempt's age counts: a fresh bump restarts the wait.
    const rebumped = tx("r", 5n, {
      attempts: [attempt(5n, { ageMs: 600_000 }), attempt(5n, { kind: "bump", ageMs: 1_000 })]
    })
    expect(dueForReplacement([rebumped], 5n, 60_000, new Set())).toEqual([])
  })
})

describe("gaps", () => {
  it("fills nonces nobody holds with no-ops and re-broadcasts the ones stored", () => {
    const held = tx("held", 5n)
    expect(planGap([held], 3n, 7n)).toEqual([
      { _tag: "Fill", nonce: 3n },
      { _tag: "Fill", nonce: 4n },
      { _tag: "Rebroadcast", tx: held },
      { _tag: "Fill", nonce: 6n }
    ])
  })

  it("does nothing for an empty range", () => {
    expect(planGap([tx("a", 3n)], 4n, 4n)).toEqual([])
    expect(planGap([tx("a", 3n)], 5n, 4n)).toEqual([])
  })

  it("sends at most MAX_GAP_FILLS no-ops per healing and stops there", () => {
    const far = tx("far", 1_000n)
    const steps = planGap([far], 0n, 1_001n)
    expect(steps.filter((s) => s._tag === "Fill")).toHaveLength(MAX_GAP_FILLS)
    expect(steps.at(-1)).toEqual({ _tag: "Fill", nonce: BigInt(MAX_GAP_FILLS - 1) })
    // The stored transaction past the cut waits for the next healing.
    expect(steps.some((s) => s._tag === "Rebroadcast")).toBe(false)
    expect(planGap([tx("a", 1n)], 0n, 3n, 1)).toEqual([
      { _tag: "Fill", nonce: 0n },
      { _tag: "Rebroadcast", tx: expect.objectContaining({ id: "a" }) }
    ])
  })

  it("heals from the node's pending nonce up to the highest unmined one", () => {
    const live = [tx("mined-elsewhere", 2n), tx("a", 4n), tx("b", 9n)]
    const plan = planMaintenance({
      live,
      latestNonce: 3n,
      pendingNonce: 5n,
      taken: new Map([["mined-elsewhere", 2n]])
    })
    expect(plan.gap).toEqual({ from: 5n, to: 10n })
    expect(plan.unmined.map((t) => t.id)).toEqual(["a", "b"])
    expect(plan.renonce.map((t) => t.id)).toEqual(["mined-elsewhere"])
    // Judged taken at 1 and found at 2 under the lock: moved meanwhile, judged again later.
    const moved = planMaintenance({
      live,
      latestNonce: 3n,
      pendingNonce: 5n,
      taken: new Map([["mined-elsewhere", 1n]])
    })
    expect(moved.renonce).toEqual([])
    // Nothing unmined: an empty range.
    const none = planMaintenance({ live: [], latestNonce: 3n, pendingNonce: 3n, taken: new Map() })
    expect(none.gap.to).toBeLessThanOrEqual(none.gap.from)
  })
})

describe("the pending round", () => {
  const mined = (t: StoredTx, i = 0): Mined => ({
    attempt: t.attempts[i]!,
    outcome: "success",
    blockNumber: 100n,
    blockHash: hashOf(0xb100)
  })

  it("settles a passed transaction whose receipt is found, and suspects one without", () => {
    const a = tx("a", 1n)
    const b = tx("b", 2n)
    const c = tx("c", 3n)
    const live = [a, b, c]
    expect(passedByChain(live, 3n).map((t) => t.id)).toEqual(["a", "b"])
    const lookups = new Map<string, ReceiptLookup>([
      ["a", { _tag: "Found", mined: mined(a) }],
      ["b", { _tag: "Missing" }]
    ])
    const plan = planPendingRound({
      live,
      latestNonce: 3n,
      pendingNonce: 4n,
      lookups,
      suspects: new Set(),
      replaceAfterMs: 60_000
    })
    expect(plan.settle).toEqual([{ tx: a, mined: mined(a) }])
    expect([...plan.suspects]).toEqual(["b"])
    expect(plan.taken.size).toBe(0)
    expect(plan.stillPending).toBe(2)
    expect(plan.maintain).toBe(false)
  })

  it("settles the whole transaction by whichever attempt was mined: a replacement marks its siblings", () => {
    const original = attempt(4n, { ageMs: 120_000 })
    const cancel = attempt(4n, { kind: "cancel" })
    const replaced = tx("r", 4n, { attempts: [original, cancel] })
    const found: Mined = {
      attempt: cancel,
      outcome: minedOutcome(cancel, "success"),
      blockNumber: 50n,
      blockHash: hashOf(0xb050)
    }
    const plan = planPendingRound({
      live: [replaced],
      latestNonce: 5n,
      pendingNonce: 5n,
      lookups: new Map<string, ReceiptLookup>([["r", { _tag: "Found", mined: found }]]),
      suspects: new Set(["r"]),
      replaceAfterMs: 60_000
    })
    expect(plan.settle).toEqual([{ tx: replaced, mined: { ...found, outcome: "cancelled" } }])
    // Settled, so neither taken nor still pending, however old its first attempt.
    expect(plan).toMatchObject({ stillPending: 0, maintain: false })
    expect(plan.taken.size + plan.suspects.size).toBe(0)
  })

  it("takes a nonce as used by another sender only on the second round without a receipt", () => {
    const b = tx("b", 2n)
    const round = {
      live: [b],
      latestNonce: 3n,
      pendingNonce: 3n,
      lookups: new Map<string, ReceiptLookup>([["b", { _tag: "Missing" }]]),
      replaceAfterMs: 60_000
    }
    const first = planPendingRound({ ...round, suspects: new Set() })
    expect(first.taken.size).toBe(0)
    const second = planPendingRound({ ...round, suspects: first.suspects })
    expect([...second.taken]).toEqual([["b", 2n]])
    expect(second.suspects.size).toBe(0)
    expect(second.maintain).toBe(true)
  })

  it("neither settles nor suspects when the receipt lookup went unanswered", () => {
    const b = tx("b", 2n)
    const plan = planPendingRound({
      live: [b],
      latestNonce: 3n,
      pendingNonce: 3n,
      lookups: new Map<string, ReceiptLookup>([["b", { _tag: "Unanswered" }]]),
      suspects: new Set(["b"]),
      replaceAfterMs: 60_000
    })
    expect(plan).toMatchObject({ settle: [], stillPending: 1, maintain: false })
    expect(plan.taken.size + plan.suspects.size).toBe(0)
  })

  it("has work under the lock when a transaction is stale or the node lost it, and none when all is fresh", () => {
    const round = (t: StoredTx, pendingNonce: bigint) =>
      planPendingRound({
        live: [t],
        latestNonce: 5n,
        pendingNonce,
        lookups: new Map(),
        suspects: new Set(),
        replaceAfterMs: 60_000
      })
    const fresh = tx("f", 5n, { attempts: [attempt(5n, { ageMs: 1_000 })] })
    expect(round(fresh, 6n)).toMatchObject({ maintain: false, stillPending: 1, settle: [] })
    // The node's pool no longer holds it: it must be re-broadcast.
    expect(round(fresh, 5n).maintain).toBe(true)
    const stale = tx("s", 5n, { attempts: [attempt(5n, { ageMs: 60_000 })] })
    expect(round(stale, 6n).maintain).toBe(true)
  })

  it("records a mined no-op replacement as cancelled, and a revert as reverted", () => {
    expect(minedOutcome(attempt(1n, { kind: "cancel" }), "success")).toBe("cancelled")
    expect(minedOutcome(attempt(1n, { kind: "bump" }), "success")).toBe("success")
    expect(minedOutcome(attempt(1n, { kind: "cancel" }), "reverted")).toBe("reverted")
  })
})

describe("a nonce another sender used", () => {
  it("drops a no-op without simulating, re-signs what still succeeds, drops what would revert", () => {
    const filler = tx("f", 1n, { purpose: "filler" })
    expect(renonceNeedsSimulation(filler)).toBe(false)
    expect(planRenonce(filler, undefined)).toEqual({ _tag: "Drop", because: "noop" })
    const request = tx("r", 1n)
    expect(renonceNeedsSimulation(request)).toBe(true)
    expect(planRenonce(request, "succeeds")).toEqual({ _tag: "Resign" })
    expect(planRenonce(request, "reverts")).toEqual({ _tag: "Drop", because: "reverts" })
    expect(planRenonce(request, "unanswered")).toEqual({ _tag: "Wait" })
  })
})

describe("reorgs", () => {
  const head = { number: 110n, hash: hashOf(0xbeef) }
  const blockHashOf = (n: bigint) => hashOf(0xb000 + Number(n))
  const minedTx = (id: string, blockNumber: bigint) => {
    const first = attempt(1n)
    const bump = attempt(1n, { kind: "bump" })
    const found: Mined = {
      attempt: bump,
      outcome: "success",
      blockNumber,
      blockHash: blockHashOf(blockNumber)
    }
    return { tx: tx(id, 1n, { attempts: [first, bump], mined: found }), found, first }
  }

  it("makes a transaction pending again when its receipt is gone on two rounds in a row", () => {
    const { tx: t } = minedTx("a", 105n)
    const round = { mined: [t], head, lookups: new Map(), confirmations: 12 }
    const first = planMinedRound({ ...round, vanishing: new Set() })
    expect(first.steps).toEqual([])
    expect([...first.vanishing]).toEqual(["a"])
    expect(first.verifiedHead).toBeUndefined()
    const second = planMinedRound({ ...round, vanishing: first.vanishing })
    expect(second.steps).toEqual([{ _tag: "Unmined", tx: t }])
    expect(second.vanishing.size).toBe(0)
  })

  it("forgets a missing receipt that came back", () => {
    const { tx: t, found } = minedTx("a", 105n)
    const plan = planMinedRound({
      mined: [t],
      head,
      lookups: new Map([["a", found]]),
      vanishing: new Set(["a"]),
      confirmations: 12
    })
    expect(plan).toEqual({ steps: [], vanishing: new Set(), verifiedHead: head.hash })
  })

  it("records a move to another block or to a sibling attempt", () => {
    const { tx: t, found, first } = minedTx("a", 105n)
    const lookups = new Map([["a", { ...found, blockNumber: 106n, blockHash: blockHashOf(106n) }]])
    const moved = planMinedRound({ mined: [t], head, lookups, vanishing: new Set(), confirmations: 12 })
    expect(moved.steps).toEqual([
      { _tag: "Moved", tx: t, mined: { ...found, blockNumber: 106n, blockHash: blockHashOf(106n) } }
    ])
    // The original is mined instead of its bump: the transaction's hashes now follow it.
    const sibling: Mined = {
      attempt: first,
      outcome: "success",
      blockNumber: 105n,
      blockHash: blockHashOf(105n)
    }
    const other = planMinedRound({
      mined: [t],
      head,
      lookups: new Map([["a", sibling]]),
      vanishing: new Set(),
      confirmations: 12
    })
    expect(other.steps).toEqual([{ _tag: "Moved", tx: t, mined: sibling }])
    // Re-included at the same height in another block: recorded too, so the next round's
    // header check holds again.
    const rebuilt: Mined = { ...found, blockHash: hashOf(0xfeed) }
    const sameHeight = planMinedRound({
      mined: [t],
      head,
      lookups: new Map([["a", rebuilt]]),
      vanishing: new Set(),
      confirmations: 12
    })
    expect(sameHeight.steps).toEqual([{ _tag: "Moved", tx: t, mined: rebuilt }])
  })

  it("knows a transaction is where it was recorded while its block keeps its hash", () => {
    const { tx: t, found } = minedTx("a", 105n)
    expect(blocksToVerify([t], head.number)).toEqual([105n])
    expect(stillWhereRecorded(t, new Map([[105n, blockHashOf(105n)]]))).toEqual(found)
    // Another block at that height, or none read: its receipt is looked up instead.
    expect(stillWhereRecorded(t, new Map([[105n, hashOf(0xfeed)]]))).toBeUndefined()
    expect(stillWhereRecorded(t, new Map())).toBeUndefined()
    // Above the head (the chain went back below it): no header to read.
    expect(blocksToVerify([t], 104n)).toEqual([])
    // One header per block, however many transactions it holds.
    const b = minedTx("b", 105n)
    const c = minedTx("c", 107n)
    expect(blocksToVerify([t, b.tx, c.tx], head.number)).toEqual([105n, 107n])
    // Mined before block hashes were recorded: always by receipt.
    const legacy = { ...t, minedBlockHash: null }
    expect(blocksToVerify([legacy], head.number)).toEqual([])
    expect(stillWhereRecorded(legacy, new Map([[105n, blockHashOf(105n)]]))).toBeUndefined()
  })

  it("confirms once deep enough, the including block counting as 1", () => {
    const { tx: t, found } = minedTx("a", 99n)
    const round = (number: bigint) =>
      planMinedRound({
        mined: [t],
        head: { number, hash: head.hash },
        lookups: new Map([["a", found]]),
        vanishing: new Set(),
        confirmations: 12
      })
    expect(round(109n).steps).toEqual([])
    expect(round(110n).steps).toEqual([{ _tag: "Confirmed", tx: t }])
  })

  it("verifies the head only when every transaction was found", () => {
    const a = minedTx("a", 105n)
    const b = minedTx("b", 105n)
    const plan = planMinedRound({
      mined: [a.tx, b.tx],
      head,
      lookups: new Map([["a", a.found]]),
      vanishing: new Set(),
      confirmations: 12
    })
    expect(plan.verifiedHead).toBeUndefined()
    expect([...plan.vanishing]).toEqual(["b"])
  })
})

describe("submission", () => {
  const refused = (kind: Extract<Broadcast, { _tag: "Refused" }>["kind"]): Broadcast => ({
    _tag: "Refused",
    kind
  })

  it("is done once accepted or possibly lost, and works out each refusal", () => {
    expect(nextSubmitStep({ _tag: "Accepted" }, 1)).toBe("done")
    expect(nextSubmitStep({ _tag: "Unavailable" }, 1)).toBe("done")
    expect(nextSubmitStep(refused("nonce_too_low"), 1)).toBe("renonce")
    expect(nextSubmitStep(refused("nonce_too_high"), 1)).toBe("heal_gap")
    expect(nextSubmitStep(refused("underpriced"), 1)).toBe("reprice")
    expect(nextSubmitStep(refused("insufficient_funds"), 1)).toBe("drop")
    expect(nextSubmitStep(refused("other"), 2)).toBe("drop")
  })

  it("keeps it stored after the last round, unless the key cannot pay", () => {
    expect(nextSubmitStep(refused("nonce_too_low"), MAX_SUBMIT_ROUNDS)).toBe("done")
    expect(nextSubmitStep(refused("other"), MAX_SUBMIT_ROUNDS)).toBe("done")
    expect(nextSubmitStep(refused("insufficient_funds"), MAX_SUBMIT_ROUNDS)).toBe("drop")
  })
})
