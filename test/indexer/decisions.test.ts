/**
 * The indexer's decisions on made-up state, with no chain and no database: which blocks a step
 * indexes (backfill, follow, the gap after a restart), when the chain moved under a step, how a
 * reorg at the tip and one deeper than the confirmation depth walk back and what they abandon, how
 * the `eth_getLogs` range narrows when the provider answers less than asked, and how a follower
 * of the store takes blocks back.
 */
import type { Hex } from "viem"
import { describe, expect, it } from "vitest"
import {
  afterLogsAnswered,
  afterLogsRefused,
  backfillBatch,
  checkFollowHeaders,
  countedNonces,
  followBatch,
  HEADER_PRUNE_LIMIT,
  initialSizer,
  type LogRangeSizer,
  logOffBranch,
  logRequest,
  MAX_FOLLOW_SPAN,
  nextReorgRead,
  nonceCorrections,
  pauseAfter,
  planConsolidation,
  planHeaderPrune,
  planReorg,
  planStep,
  planSync,
  prunedAtAfter,
  REORG_WINDOW,
  type ReorgRead,
  type StepPlan,
  type StepState,
  type SyncState,
  startReorgWalk,
  withChainBlock,
  withStoredBlocks
} from "../../src/indexer/decisions.js"
import { type Coverage, RangeBook, type RangeSpan } from "../../src/indexer/ranges.js"
import type { BlockHeader, BlockRef } from "../../src/store/EventStore.js"
import { type AccountState, emptyAccount } from "../../src/store/projections/accounts.js"
import type { VaultEvent } from "../../src/store/projections/vaultEvents.js"

const START = 100
const DEPTH = 12

/** The hash of block `n` on a branch: branches differ at every height. */
const hashOf = (n: number, branch = "a"): Hex =>
  `0x${branch.charCodeAt(0).toString(16).padStart(2, "0")}${n.toString(16).padStart(62, "0")}`

const headerOf = (n: number, branch = "a", parentBranch = branch): BlockHeader => ({
  number: n,
  hash: hashOf(n, branch),
  parentHash: hashOf(n - 1, parentBranch)
})

const range = (fromBlock: number, toBlock: number, branch = "a"): RangeSpan => ({
  fromBlock,
  toBlock,
  toHash: hashOf(toBlock, branch)
})

const state = (over: Partial<StepState> & { readonly coverage: Coverage | undefined }): StepState => ({
  startBlock: START,
  confirmationDepth: DEPTH,
  ranges: over.coverage === undefined ? [] : [range(START, over.coverage.block)],
  head: { number: 1_000, hash: hashOf(1_000) },
  tip: "verified",
  ...over
})

const covered = (block: number, branch = "a"): Coverage => ({ block, hash: hashOf(block, branch) })

describe("a step of the writer", () => {
  it("backfills an empty store from the start block up to the blocks the confirmation depth makes final", () => {
    expect(planStep(state({ coverage: undefined }))).toEqual({
      _tag: "Backfill",
      from: START,
      to: 1_000 - DEPTH
    })
  })

  it("goes on from the block above the coverage", () => {
    expect(planStep(state({ coverage: covered(500) }))).toEqual({ _tag: "Backfill", from: 501, to: 988 })
    // The last final block is still backfilled; the one above it is followed.
    expect(planStep(state({ coverage: covered(987) }))).toEqual({ _tag: "Backfill", from: 988, to: 988 })
  })

  it("follows the blocks within the confirmation depth, at most a span at a time", () => {
    expect(planStep(state({ coverage: covered(988) }))).toEqual({ _tag: "Follow", from: 989, to: 1_000 })
    const deep = planStep(state({ coverage: covered(200), confirmationDepth: 10_000 }))
    expect(deep).toEqual({ _tag: "Follow", from: 201, to: 200 + MAX_FOLLOW_SPAN })
  })

  it("waits a poll interval when the head is the indexed tip, and a moment when the chain moved", () => {
    expect(planStep(state({ coverage: covered(1_000) }))).toEqual({ _tag: "Idle" })
    expect(pauseAfter("idle", 2_000)).toBe(2_000)
    expect(pauseAfter("moved", 2_000)).toBe(100)
    expect(pauseAfter("progressed", 2_000)).toBe(0)
  })

  it("commits a follow span with every header, from the tip it extends", () => {
    const headers = [headerOf(989), headerOf(990), headerOf(991)]
    expect(checkFollowHeaders(hashOf(988), headers)).toBe("extends")
    expect(followBatch(headers, hashOf(988))).toEqual({
      fromBlock: 989,
      toBlock: 991,
      toHash: hashOf(991),
      baseHash: hashOf(988),
      headers
    })
  })

  it("retries a follow step when the chain moved while its headers were read", () => {
    // A block the chain no longer has at that height, or two headers that are not parent and child.
    expect(checkFollowHeaders(hashOf(988), [headerOf(989), undefined])).toBe("moved")
    expect(checkFollowHeaders(hashOf(988), [headerOf(989), headerOf(990, "b", "b")])).toBe("moved")
    // A log of another block than the header at its height: nothing is committed.
    const expectedAt = (n: number) => (n >= 989 && n <= 990 ? hashOf(n) : undefined)
    expect(logOffBranch({ blockNumber: 990, blockHash: hashOf(990, "b") }, expectedAt)).toBe(true)
    expect(logOffBranch({ blockNumber: 990, blockHash: hashOf(990) }, expectedAt)).toBe(false)
  })
})

describe("a reorg at the tip", () => {
  it("is seen when the head is the indexed height on another branch, or below the indexed tip", () => {
    const tip = covered(1_000)
    expect(planStep(state({ coverage: tip, head: { number: 1_000, hash: hashOf(1_000, "b") } }))).toEqual({
      _tag: "Reorg"
    })
    expect(planStep(state({ coverage: tip, head: { number: 998, hash: hashOf(998, "b") } }))).toEqual({
      _tag: "Reorg"
    })
  })

  it("is seen when the next header does not extend the indexed tip", () => {
    expect(checkFollowHeaders(hashOf(1_000), [headerOf(1_001, "b", "b"), headerOf(1_002, "b")])).toBe("reorg")
  })

  it("abandons the blocks above the common ancestor and indexes again above it", () => {
    const stored = Array.from({ length: 13 }, (_, i) => 1_000 - i).map((n) => ({
      number: n,
      hash: hashOf(n)
    }))
    // The chain replaced 998..1000.
    const chain = (n: number) => (n >= 998 ? hashOf(n, "b") : hashOf(n))
    const { plan, reads } = walk({ coverage: covered(1_000), ranges: [range(START, 1_000)] }, stored, chain)
    expect(plan.ancestor).toEqual({ number: 997, hash: hashOf(997) })
    expect(plan.abandoned.map((b) => b.number)).toEqual([1_000, 999, 998])
    expect(plan.indexFrom).toBe(998)
    // The range that reached past the ancestor is kept up to it.
    expect(plan.kept).toEqual([range(START, 997)])
    // One window of stored blocks, then the chain's block at each height down to the ancestor only.
    expect(reads).toEqual([
      { _tag: "StoredBlocks", from: 1_000 - REORG_WINDOW + 1, to: 1_000 },
      ...[1_000, 999, 998, 997].map((n) => ({ _tag: "ChainBlock", block: { number: n, hash: hashOf(n) } }))
    ])
    // With the store's record of it, the next step follows the new branch from the ancestor.
    const book = new RangeBook(START)
    book.add([{ seq: 1, ...range(START, 997) }])
    expect(
      planStep(
        state({ coverage: book.coverage(() => true), head: { number: 1_001, hash: hashOf(1_001, "b") } })
      )
    ).toEqual({ _tag: "Follow", from: 998, to: 1_001 })
  })
})

describe("a reorg deeper than the confirmation depth", () => {
  // Backfilled ranges keep the header of their last block only; the follow span keeps every header.
  const ranges = [range(START, 700), range(701, 988), range(989, 1_000)]
  const stored: Array<BlockRef> = [
    ...Array.from({ length: 12 }, (_, i) => 1_000 - i).map((n) => ({ number: n, hash: hashOf(n) })),
    { number: 988, hash: hashOf(988) },
    { number: 700, hash: hashOf(700) },
    // A block of events inside the first range.
    { number: 650, hash: hashOf(650) }
  ]

  it("walks past the depth through the stored blocks to the ancestor, and cuts the range it falls in", () => {
    const chain = (n: number) => (n >= 660 ? hashOf(n, "b") : hashOf(n))
    const { plan } = walk({ coverage: covered(1_000), ranges }, stored, chain)
    expect(plan.ancestor).toEqual({ number: 650, hash: hashOf(650) })
    expect(plan.abandoned.map((b) => b.number)).toEqual([...stored.slice(0, 14).map((b) => b.number)])
    expect(plan.kept).toEqual([{ fromBlock: START, toBlock: 650, toHash: hashOf(650) }])
    expect(plan.indexFrom).toBe(651)
  })

  it("indexes again from the start block when it reaches below every stored block", () => {
    const { plan } = walk({ coverage: covered(1_000), ranges }, stored, (n) => hashOf(n, "b"))
    expect(plan.ancestor).toBeUndefined()
    expect(plan.abandoned).toEqual(stored)
    expect(plan.kept).toEqual([])
    expect(plan.indexFrom).toBe(START)
  })

  it("reads the stored blocks a window at a time, from the highest indexed block down to the start block", () => {
    const top = START + 2 * REORG_WINDOW + 10
    const { reads } = walk({ coverage: covered(top), ranges: [range(START, top)] }, [], () => undefined)
    expect(reads).toEqual([
      { _tag: "StoredBlocks", from: top - REORG_WINDOW + 1, to: top },
      { _tag: "StoredBlocks", from: top - 2 * REORG_WINDOW + 1, to: top - REORG_WINDOW },
      { _tag: "StoredBlocks", from: START, to: top - 2 * REORG_WINDOW }
    ])
  })
})

describe("a gap after a restart", () => {
  it("checks first that the stored tip is still on the chain", () => {
    const restarted = state({ coverage: covered(500), tip: "unchecked" })
    expect(planStep(restarted)).toEqual({ _tag: "VerifyTip", block: 500 })
    expect(planStep({ ...restarted, tip: { onChain: hashOf(500) } })).toEqual({
      _tag: "Backfill",
      from: 501,
      to: 988
    })
    // Abandoned while the process was down, or the chain is now shorter.
    expect(planStep({ ...restarted, tip: { onChain: hashOf(500, "b") } })).toEqual({ _tag: "Reorg" })
    expect(planStep({ ...restarted, tip: { onChain: undefined } })).toEqual({ _tag: "Reorg" })
    // An empty store has no tip to check.
    expect(planStep(state({ coverage: undefined, tip: "unchecked" }))._tag).toBe("Backfill")
  })

  it("fills only the gap below a range the store already holds, then goes on above that range", () => {
    const book = new RangeBook(START)
    book.add([
      { seq: 1, ...range(START, 500) },
      { seq: 2, ...range(701, 900) }
    ])
    const all = () => true
    const at = (b: RangeBook) => state({ coverage: b.coverage(all), ranges: b.canonical(all) })
    expect(at(book).coverage).toEqual(covered(500))
    const fill = planStep(at(book))
    expect(fill).toEqual({ _tag: "Backfill", from: 501, to: 700 })
    book.add([{ seq: 3, ...range(501, 700) }])
    expect(book.coverage(all)).toEqual(covered(900))
    expect(planStep(at(book))).toEqual({ _tag: "Backfill", from: 901, to: 988 })
  })

  it("indexes every block once across the downtime: backfill while blocks are final, then follow", () => {
    const committed = drive({ coverage: covered(400), head: 1_000, providerLimit: 250 })
    expect(committed).toEqual([
      ["Backfill", 401, 650],
      ["Backfill", 651, 900],
      ["Backfill", 901, 988],
      ["Follow", 989, 1_000]
    ])
  })
})

describe("an RPC that answers fewer blocks than asked", () => {
  it("commits a backfill only up to the last block answered, and asks for the rest next", () => {
    // Asked for 501..988; the provider took 501..620.
    const end = headerOf(620)
    const batch = backfillBatch(501, end, hashOf(500))
    expect(batch).toEqual({
      fromBlock: 501,
      toBlock: 620,
      toHash: hashOf(620),
      baseHash: hashOf(500),
      headers: [end]
    })
    expect(planStep(state({ coverage: covered(batch.toBlock) }))).toEqual({
      _tag: "Backfill",
      from: 621,
      to: 988
    })
  })

  it("halves a range the provider refuses as too large, and asks again from the same block", () => {
    let sizer = initialSizer(2_000)
    const first = logRequest(sizer, 501, 988)
    expect(first).toEqual({ from: 501, to: 988 })
    const refused = afterLogsRefused(first, true)
    expect(refused).toEqual({ _tag: "Narrow", sizer: { size: 244, cap: 244, successesAtCap: 0 } })
    if (refused._tag === "Narrow") sizer = refused.sizer
    expect(logRequest(sizer, 501, 988)).toEqual({ from: 501, to: 744 })
  })

  it("gives up on a refusal that is not about the range, and on a single block", () => {
    expect(afterLogsRefused({ from: 501, to: 988 }, false)).toEqual({ _tag: "GiveUp" })
    expect(afterLogsRefused({ from: 501, to: 501 }, true)).toEqual({ _tag: "GiveUp" })
  })

  it("grows back by half after each answer up to the cap, and raises the cap after enough answers at it", () => {
    let sizer: LogRangeSizer = { size: 100, cap: 400, successesAtCap: 0 }
    const sizes: Array<number> = []
    for (let i = 0; i < 14; i++) {
      sizer = afterLogsAnswered(sizer, 1_000)
      sizes.push(sizer.size)
    }
    expect(sizes).toEqual([150, 225, 338, 400, 400, 400, 400, 400, 400, 400, 400, 800, 800, 800])
    // Never above the ceiling.
    for (let i = 0; i < 20; i++) sizer = afterLogsAnswered(sizer, 1_000)
    expect(sizer.size).toBe(1_000)
  })
})

describe("following the store", () => {
  const base: SyncState = {
    startBlock: START,
    covered: covered(500),
    intact: true,
    target: covered(600),
    keepAtMost: Number.POSITIVE_INFINITY,
    canRewindTo: () => true,
    appended: { rangeSeqs: [7], markers: 0 }
  }

  it("replays from the start block on a first sync", () => {
    expect(planSync({ ...base, covered: undefined })).toMatchObject({
      from: START,
      startOver: false,
      rewound: 0,
      replayed: true
    })
  })

  it("folds the writer's own commit from memory when it is exactly what the store gained", () => {
    const committed = { seq: 7, fromBlock: 501, toBlock: 600, toHash: hashOf(600), baseHash: hashOf(500) }
    expect(planSync({ ...base, committed })).toMatchObject({ from: 501, ownCommit: true, replayed: false })
    // Another writer's range came in between: read from the store.
    expect(planSync({ ...base, committed, appended: { rangeSeqs: [6, 7], markers: 0 } }).ownCommit).toBe(
      false
    )
  })

  it("takes a reorg back with the projection's journal, then folds the new branch", () => {
    const plan = planSync({ ...base, target: covered(520, "b"), keepAtMost: 480 })
    expect(plan).toMatchObject({ rewindTo: 480, rewound: 20, startOver: false, rebuilt: false, from: 481 })
  })

  it("starts over when a reorg reaches below the journal, after a failed sync, or when the store covers nothing", () => {
    const deep = planSync({ ...base, keepAtMost: 300, canRewindTo: (b) => b >= 450 })
    expect(deep).toMatchObject({ startOver: true, rebuilt: true, rewound: 200, from: START, replayed: true })
    expect(planSync({ ...base, intact: false })).toMatchObject({
      startOver: true,
      rebuilt: true,
      from: START
    })
    expect(planSync({ ...base, target: undefined })).toMatchObject({ startOver: true, target: undefined })
  })
})

describe("housekeeping", () => {
  it("sums up the final ranges once there are many, and not again until the final block moved on", () => {
    const many = {
      startBlock: START,
      confirmationDepth: DEPTH,
      coverage: covered(5_000),
      lastConsolidationAt: 0
    }
    expect(planConsolidation({ ...many, rangeCount: 256 })).toBeUndefined()
    expect(planConsolidation({ ...many, rangeCount: 300 })).toEqual({
      finalBlock: 4_988,
      from: 4_988 - 4 * DEPTH - 256,
      to: 4_988
    })
    expect(planConsolidation({ ...many, rangeCount: 300, lastConsolidationAt: 4_900 })).toBeUndefined()
  })

  it("prunes headers once the tip moved an interval, and again at once after a full batch", () => {
    const prune = { startBlock: START, interval: 1_000, retention: 512 }
    expect(planHeaderPrune({ ...prune, tip: 5_000, prunedAt: undefined })).toEqual({
      keepFromBlock: 4_488,
      window: 512,
      limit: HEADER_PRUNE_LIMIT
    })
    expect(planHeaderPrune({ ...prune, tip: 5_500, prunedAt: 5_000 })).toBeUndefined()
    expect(planHeaderPrune({ ...prune, tip: 600, prunedAt: undefined })).toBeUndefined()
    expect(prunedAtAfter(undefined, 5_000, HEADER_PRUNE_LIMIT)).toBeUndefined()
    expect(prunedAtAfter(undefined, 5_000, 10)).toBe(5_000)
  })

  it("checks the nonces of the accounts a batch moved, and keeps the chain's where they differ", () => {
    const id: Hex = hashOf(1, "i")
    const idle: Hex = hashOf(2, "i")
    const position = { blockNumber: 600, blockHash: hashOf(600), logIndex: 0 }
    const pinged: VaultEvent = { ...position, name: "Pinged", id, nonce: 3n }
    const deposited: VaultEvent = {
      ...position,
      logIndex: 1,
      name: "Deposited",
      id: idle,
      asset: "0x0000000000000000000000000000000000000002",
      from: "0x0000000000000000000000000000000000000003",
      amount: 5n
    }
    const known: AccountState = { ...emptyAccount(id), nonce: 3n }
    const counted = countedNonces(
      { settlementAsset: "0x0000000000000000000000000000000000000001" },
      [pinged, deposited],
      (n) => (n === id ? known : undefined)
    )
    // A deposit moves no nonce: only the pinged account is checked, at the nonce after its ping.
    expect([...counted.keys()]).toEqual([id])
    expect(counted.get(id)?.nonce).toBe(4n)
    const onChain = new Map([
      [id, { nonce: 9n, bindNonce: 0n }],
      [idle, { nonce: 1n, bindNonce: 1n }]
    ])
    expect(nonceCorrections(counted, onChain, { block: 600, hash: hashOf(600) })).toEqual([
      { blockNumber: 600, blockHash: hashOf(600), id, nonce: 9n, bindNonce: 0n }
    ])
    expect(
      nonceCorrections(counted, new Map([[id, { nonce: 4n, bindNonce: 0n }]]), {
        block: 600,
        hash: hashOf(600)
      })
    ).toEqual([])
  })
})

/** Runs a reorg walk against stored blocks (highest first) and the chain's hash by height. */
const walk = (
  at: { readonly coverage: Coverage; readonly ranges: ReadonlyArray<RangeSpan> },
  stored: ReadonlyArray<BlockRef>,
  chain: (n: number) => Hex | undefined
) => {
  const reads: Array<ReorgRead> = []
  let w = startReorgWalk({ startBlock: START, ...at })
  for (let read = nextReorgRead(w); read._tag !== "Done"; read = nextReorgRead(w)) {
    reads.push(read)
    if (read._tag === "StoredBlocks") {
      const { from, to } = read
      w = withStoredBlocks(
        w,
        stored.filter((b) => b.number >= from && b.number <= to)
      )
    } else w = withChainBlock(w, chain(read.block.number))
  }
  return { plan: planReorg(w, at.ranges), reads }
}

/**
 * Steps a writer over a still chain whose provider answers at most `providerLimit` blocks of logs
 * at once, committing each plan; answers the ranges committed.
 */
const drive = (options: { coverage: Coverage; head: number; providerLimit: number }) => {
  const committed: Array<[StepPlan["_tag"], number, number]> = []
  let coverage = options.coverage
  for (let i = 0; i < 100; i++) {
    const plan = planStep(
      state({ coverage, head: { number: options.head, hash: hashOf(options.head) }, tip: "verified" })
    )
    if (plan._tag === "Idle") return committed
    if (plan._tag === "Backfill") {
      const to = logRequest(
        { size: options.providerLimit, cap: options.providerLimit, successesAtCap: 0 },
        plan.from,
        plan.to
      ).to
      const batch = backfillBatch(plan.from, headerOf(to), coverage.hash)
      committed.push([plan._tag, batch.fromBlock, batch.toBlock])
      coverage = { block: batch.toBlock, hash: batch.toHash }
    } else if (plan._tag === "Follow") {
      const headers = Array.from({ length: plan.to - plan.from + 1 }, (_, k) => headerOf(plan.from + k))
      expect(checkFollowHeaders(coverage.hash, headers)).toBe("extends")
      const batch = followBatch(headers, coverage.hash)
      committed.push([plan._tag, batch.fromBlock, batch.toBlock])
      coverage = { block: batch.toBlock, hash: batch.toHash }
    } else throw new Error(`unexpected ${plan._tag}`)
  }
  return committed
}
