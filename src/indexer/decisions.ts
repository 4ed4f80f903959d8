/**
 * The indexer's decisions, pure: given what the store holds of the vault (its coverage, the ranges
 * indexed, the blocks stored) and what the chain said (its head, headers, the blocks of logs),
 * which blocks a step indexes and how (a backfill range or a follow span), whether the chain moved
 * under a step, how a reorg walks back to the common ancestor and what it abandons, how wide the
 * next `eth_getLogs` request is, which nonces the chain corrects, when ranges are summed up and
 * headers pruned, and how a follower of the store brings its projection up to the store's
 * coverage. The shells (`Indexer.ts`, `logs.ts`, `follower.ts`) read that state, ask these, and
 * carry the answer out; nothing here reads or writes the chain or the store.
 *
 * Spec: docs/architecture.md (the indexer); settings `INDEXER_CONFIRMATION_DEPTH` and
 * `INDEXER_MAX_BLOCK_RANGE` in the README.
 */
import type { Hex } from "viem"
import type { BlockHeader, BlockRef, NonceReconciliation } from "../store/EventStore.js"
import {
  type AccountState,
  type AccountsContext,
  applyToAccount,
  consumesNonce
} from "../store/projections/accounts.js"
import type { VaultEvent } from "../store/projections/vaultEvents.js"
import { type Coverage, highestIn, keptUpToIn, nextCoveredIn, type RangeSpan } from "./ranges.js"

// ---------------------------------------------------------------------------------------------
// One step of the writer

/** Most blocks one follow step fetches header by header. */
export const MAX_FOLLOW_SPAN = 256

/**
 * What this term knows of the stored tip on the chain: nothing yet (a restart, or a new term as
 * writer: it may have been abandoned meanwhile), seen there, or the chain's hash at its height as
 * just read (`undefined`: the chain is shorter).
 */
export type TipCheck = "unchecked" | "verified" | { readonly onChain: Hex | undefined }

export interface StepState {
  readonly startBlock: number
  /** Blocks at least this far below the head are final. */
  readonly confirmationDepth: number
  /** Every block from the start block to this one is indexed. */
  readonly coverage: Coverage | undefined
  /** The canonical ranges the store holds, some possibly past a gap above the coverage. */
  readonly ranges: ReadonlyArray<RangeSpan>
  readonly head: BlockRef
  readonly tip: TipCheck
}

export type StepPlan =
  /** Read the chain's block at the stored tip, then plan again with its hash. */
  | { readonly _tag: "VerifyTip"; readonly block: number }
  /** The indexed tip is off the chain: walk back to the common ancestor. */
  | { readonly _tag: "Reorg" }
  /** Nothing new: wait a poll interval. */
  | { readonly _tag: "Idle" }
  /** Final blocks: their logs in adaptive ranges, committed with the header of the range's last block. */
  | { readonly _tag: "Backfill"; readonly from: number; readonly to: number }
  /** Blocks within the confirmation depth: header by header, each checked against its parent. */
  | { readonly _tag: "Follow"; readonly from: number; readonly to: number }

export const planStep = (state: StepState): StepPlan => {
  const { coverage, head, tip } = state
  if (coverage !== undefined && tip !== "verified") {
    if (tip === "unchecked") return { _tag: "VerifyTip", block: coverage.block }
    if (tip.onChain !== coverage.hash) return { _tag: "Reorg" }
  }
  const next = coverage === undefined ? state.startBlock : coverage.block + 1
  if (next > head.number) {
    // Nothing above the tip: unless the head is the tip itself, the chain is shorter or another branch.
    if (coverage !== undefined && !(head.number === coverage.block && head.hash === coverage.hash))
      return { _tag: "Reorg" }
    return { _tag: "Idle" }
  }
  // A range committed earlier may already cover blocks above a gap: fill the gap only.
  const gapEnd = (nextCoveredIn(state.ranges, next) ?? Number.POSITIVE_INFINITY) - 1
  const safe = head.number - state.confirmationDepth
  if (next <= safe) return { _tag: "Backfill", from: next, to: Math.min(safe, gapEnd) }
  return { _tag: "Follow", from: next, to: Math.min(head.number, gapEnd, next + MAX_FOLLOW_SPAN - 1) }
}

/** How a step ended: it changed the index, found nothing new, or saw the chain move under it. */
export type StepOutcome = "progressed" | "idle" | "moved"

/** A chain that keeps moving during a follow step is looked at again after this long. */
const MOVED_RETRY_MS = 100

/** How long the writer waits before its next step. */
export const pauseAfter = (outcome: StepOutcome, pollIntervalMs: number): number =>
  outcome === "idle" ? pollIntervalMs : outcome === "moved" ? MOVED_RETRY_MS : 0

/**
 * The headers a follow step read for its span (`undefined` where the chain had no block), against
 * the indexed tip's hash: they extend it, a reorg took the tip away, or the chain moved while
 * they were read (a block missing, or two that are not parent and child) and the step is retried.
 */
export const checkFollowHeaders = (
  base: Hex | undefined,
  headers: ReadonlyArray<BlockHeader | undefined>
): "extends" | "reorg" | "moved" => {
  const read: Array<BlockHeader> = []
  for (const h of headers) {
    if (h === undefined) return "moved"
    read.push(h)
  }
  const first = read[0]
  if (first === undefined) return "moved"
  if (base !== undefined && first.parentHash !== base) return "reorg"
  for (let i = 1; i < read.length; i++)
    if ((read[i] as BlockHeader).parentHash !== (read[i - 1] as BlockHeader).hash) return "moved"
  return "extends"
}

/**
 * Whether a log names another block than the one the step holds at its height: the chain moved
 * between the headers and the logs, so nothing is committed and the step is retried. A height the
 * step holds no header of (a final block inside a backfill range) is not checked.
 */
export const logOffBranch = (
  log: { readonly blockNumber: number; readonly blockHash: Hex },
  expectedAt: (blockNumber: number) => Hex | undefined
): boolean => {
  const expected = expectedAt(log.blockNumber)
  return expected !== undefined && expected !== log.blockHash
}

/** What a step commits besides its events: the blocks, the tip it extends, and the headers kept. */
export interface BatchBounds {
  readonly fromBlock: number
  readonly toBlock: number
  readonly toHash: Hex
  readonly baseHash: Hex | undefined
  readonly headers: ReadonlyArray<BlockHeader>
}

/**
 * A backfill commit: from its first block to the last block the logs were answered for (which may
 * be short of the range planned: the provider took a narrower one), with that block's header only.
 */
export const backfillBatch = (from: number, end: BlockHeader, base: Hex | undefined): BatchBounds => ({
  fromBlock: from,
  toBlock: end.number,
  toHash: end.hash,
  baseHash: base,
  headers: [end]
})

/** A follow commit: the span and every header of it, for a later reorg walk. */
export const followBatch = (headers: ReadonlyArray<BlockHeader>, base: Hex | undefined): BatchBounds => {
  const first = headers[0] as BlockHeader
  const last = headers[headers.length - 1] as BlockHeader
  return { fromBlock: first.number, toBlock: last.number, toHash: last.hash, baseHash: base, headers }
}

// ---------------------------------------------------------------------------------------------
// Reorgs

/** Stored blocks a reorg walk reads per window. */
export const REORG_WINDOW = 256

/**
 * A walk back from the highest indexed block through the stored blocks (headers, blocks of
 * events, ends of ranges), a window at a time and highest first, each compared with the chain's
 * block at its height until one is still there: the common ancestor. It does not stop at the
 * confirmation depth: a deeper reorg is followed as far as the stored blocks reach.
 */
export interface ReorgWalk {
  readonly startBlock: number
  /** Top of the next window to read. */
  readonly windowTop: number
  /** The stored blocks read so far, a window per entry, each highest first. */
  readonly windows: ReadonlyArray<ReadonlyArray<BlockRef>>
  /** How many of the last window were compared and found off the chain. */
  readonly compared: number
  readonly ancestor: BlockRef | undefined
}

export type ReorgRead =
  | { readonly _tag: "StoredBlocks"; readonly from: number; readonly to: number }
  | { readonly _tag: "ChainBlock"; readonly block: BlockRef }
  | { readonly _tag: "Done" }

export const startReorgWalk = (state: {
  readonly startBlock: number
  readonly coverage: Coverage | undefined
  readonly ranges: ReadonlyArray<RangeSpan>
}): ReorgWalk => {
  const below = state.startBlock - 1
  // Ranges past a gap hold blocks of the old branch too.
  const top = Math.max(state.coverage?.block ?? below, highestIn(state.ranges) ?? below)
  return { startBlock: state.startBlock, windowTop: top, windows: [], compared: 0, ancestor: undefined }
}

/** What the walk reads next. */
export const nextReorgRead = (walk: ReorgWalk): ReorgRead => {
  if (walk.ancestor !== undefined) return { _tag: "Done" }
  const last = walk.windows[walk.windows.length - 1]
  const block = last?.[walk.compared]
  if (block !== undefined) return { _tag: "ChainBlock", block }
  if (walk.windowTop < walk.startBlock) return { _tag: "Done" }
  return {
    _tag: "StoredBlocks",
    from: Math.max(walk.startBlock, walk.windowTop - REORG_WINDOW + 1),
    to: walk.windowTop
  }
}

/** The walk after reading a window of stored blocks (highest first). */
export const withStoredBlocks = (walk: ReorgWalk, stored: ReadonlyArray<BlockRef>): ReorgWalk => ({
  ...walk,
  windowTop: walk.windowTop - REORG_WINDOW,
  windows: [...walk.windows, stored],
  compared: 0
})

/** The walk after reading the chain's block at the height of the block asked for (`undefined`: none). */
export const withChainBlock = (walk: ReorgWalk, onChain: Hex | undefined): ReorgWalk => {
  const block = walk.windows[walk.windows.length - 1]?.[walk.compared]
  if (block === undefined) return walk
  return block.hash === onChain ? { ...walk, ancestor: block } : { ...walk, compared: walk.compared + 1 }
}

export interface ReorgPlan {
  /** The highest stored block still on the chain; none when the reorg reaches below every one. */
  readonly ancestor: BlockRef | undefined
  /** Stored blocks to mark orphaned, highest first. */
  readonly abandoned: ReadonlyArray<BlockRef>
  /** Ranges that reach past the ancestor, cut to end there, so what they covered below it stays. */
  readonly kept: ReadonlyArray<RangeSpan>
  /** Where indexing goes on: above the ancestor, or at the start block (everything again). */
  readonly indexFrom: number
}

/** The reorg a finished walk found, to record in the store. */
export const planReorg = (walk: ReorgWalk, ranges: ReadonlyArray<RangeSpan>): ReorgPlan => {
  const last = walk.windows.length - 1
  const abandoned = walk.windows.flatMap((w, i) => (i === last ? w.slice(0, walk.compared) : w))
  const ancestor = walk.ancestor
  return {
    ancestor,
    abandoned,
    kept: ancestor === undefined ? [] : keptUpToIn(ranges, ancestor),
    indexFrom: ancestor === undefined ? walk.startBlock : ancestor.number + 1
  }
}

// ---------------------------------------------------------------------------------------------
// The adaptive `eth_getLogs` range

/** Successes at the cap before the cap is raised again: event density changes along the chain. */
const SUCCESSES_BEFORE_RAISING_CAP = 8

export interface LogRangeSizer {
  /** Blocks per request now. */
  readonly size: number
  /** Where growth stops until enough successes show the provider takes more. */
  readonly cap: number
  readonly successesAtCap: number
}

/** Requests start at the ceiling (`INDEXER_MAX_BLOCK_RANGE`). */
export const initialSizer = (maxBlockRange: number): LogRangeSizer => {
  const ceiling = Math.max(1, maxBlockRange)
  return { size: ceiling, cap: ceiling, successesAtCap: 0 }
}

/** The next request for logs of `from..to`: cut to the current size. */
export const logRequest = (sizer: LogRangeSizer, from: number, to: number) => ({
  from,
  to: Math.min(to, from + sizer.size - 1)
})

/** After an answered request: grow by half up to the cap; at the cap, raise it after enough successes. */
export const afterLogsAnswered = (sizer: LogRangeSizer, maxBlockRange: number): LogRangeSizer => {
  const ceiling = Math.max(1, maxBlockRange)
  if (sizer.size < sizer.cap)
    return { ...sizer, size: Math.min(sizer.cap, Math.ceil(sizer.size * 1.5)), successesAtCap: 0 }
  const successes = sizer.successesAtCap + 1
  if (successes < SUCCESSES_BEFORE_RAISING_CAP || sizer.cap >= ceiling)
    return { ...sizer, successesAtCap: successes }
  const cap = Math.min(ceiling, sizer.cap * 2)
  return { size: cap, cap, successesAtCap: 0 }
}

/**
 * After a refused request: a range the provider found too large (too many results, or it timed
 * out) is asked again at half its width, which becomes the cap; any other refusal, or one of a
 * single block, is the step's failure.
 */
export const afterLogsRefused = (
  request: { readonly from: number; readonly to: number },
  tooLarge: boolean
): { readonly _tag: "Narrow"; readonly sizer: LogRangeSizer } | { readonly _tag: "GiveUp" } => {
  if (!tooLarge || request.to === request.from) return { _tag: "GiveUp" }
  const half = Math.max(1, Math.floor((request.to - request.from + 1) / 2))
  return { _tag: "Narrow", sizer: { size: half, cap: half, successesAtCap: 0 } }
}

// ---------------------------------------------------------------------------------------------
// Nonce reconciliation

/**
 * The accounts whose nonces a batch moved, with the state the events count for them: only
 * nonce-consuming events move a counted nonce, so those are the accounts to check; every other
 * account's nonces were checked when they last moved.
 */
export const countedNonces = (
  context: AccountsContext,
  inputs: ReadonlyArray<VaultEvent>,
  current: (id: Hex) => AccountState | undefined
): ReadonlyMap<Hex, AccountState> => {
  const checked = new Set(inputs.filter(consumesNonce).map((input) => input.id))
  const counted = new Map<Hex, AccountState>()
  for (const input of inputs)
    if (checked.has(input.id))
      counted.set(input.id, applyToAccount(context, counted.get(input.id) ?? current(input.id), input))
  return counted
}

/** The chain's nonces where they differ from the counted ones, as corrections at the batch's last block. */
export const nonceCorrections = (
  counted: ReadonlyMap<Hex, AccountState>,
  onChain: ReadonlyMap<Hex, { readonly nonce: bigint; readonly bindNonce: bigint }>,
  at: { readonly block: number; readonly hash: Hex }
): Array<NonceReconciliation> => {
  const corrections: Array<NonceReconciliation> = []
  for (const [id, chain] of onChain) {
    const account = counted.get(id)
    if (account === undefined) continue
    if (account.nonce !== chain.nonce || account.bindNonce !== chain.bindNonce)
      corrections.push({
        blockNumber: at.block,
        blockHash: at.hash,
        id,
        nonce: chain.nonce,
        bindNonce: chain.bindNonce
      })
  }
  return corrections
}

// ---------------------------------------------------------------------------------------------
// Housekeeping of the store

/** Above this many remembered ranges the writer appends one range that sums up the final ones. */
const RANGES_BEFORE_CONSOLIDATING = 256

export interface ConsolidationPlan {
  /** Blocks up to here are final; the next consolidation waits until this moved on enough. */
  readonly finalBlock: number
  /** Stored blocks to look in for the highest final one: the summing range ends there. */
  readonly from: number
  readonly to: number
}

/** Whether to sum up the final part of the coverage in one range, so the range list stays short to read. */
export const planConsolidation = (state: {
  readonly startBlock: number
  readonly confirmationDepth: number
  readonly coverage: Coverage | undefined
  readonly rangeCount: number
  /** The final block of the last consolidation of this term (0 before the first). */
  readonly lastConsolidationAt: number
}): ConsolidationPlan | undefined => {
  const { coverage, confirmationDepth: depth } = state
  if (coverage === undefined || state.rangeCount <= RANGES_BEFORE_CONSOLIDATING) return undefined
  const finalBlock = coverage.block - depth
  if (finalBlock - state.lastConsolidationAt < RANGES_BEFORE_CONSOLIDATING) return undefined
  return { finalBlock, from: Math.max(state.startBlock, finalBlock - 4 * depth - 256), to: finalBlock }
}

/** Most headers one pruning deletes, so a backlog goes away over several follow steps instead of stalling one. */
export const HEADER_PRUNE_LIMIT = 10_000
export const DEFAULT_HEADER_PRUNE_INTERVAL = 1_000

/**
 * Headers kept below the indexed tip: by default every block a reorg within the confirmation
 * depth reaches and the reorg walk's first two windows; never fewer than the depth.
 */
export const headerRetentionOf = (confirmationDepth: number, configured: number | undefined): number =>
  Math.max(confirmationDepth, configured ?? Math.max(confirmationDepth, REORG_WINDOW) + REORG_WINDOW)

export interface HeaderPrunePlan {
  /** Headers below this block go (and below every other vault's of the chain in the database). */
  readonly keepFromBlock: number
  readonly window: number
  readonly limit: number
}

/** Whether a follow commit prunes headers: once the tip moved an interval since the last complete pruning. */
export const planHeaderPrune = (state: {
  readonly startBlock: number
  readonly tip: number | undefined
  /** The tip at the last complete pruning of this term; none yet prunes at the first follow commit. */
  readonly prunedAt: number | undefined
  readonly interval: number
  readonly retention: number
}): HeaderPrunePlan | undefined => {
  const { tip, prunedAt } = state
  if (tip === undefined || (prunedAt !== undefined && tip - prunedAt < state.interval)) return undefined
  const keepFromBlock = tip - state.retention
  if (keepFromBlock <= state.startBlock) return undefined
  return { keepFromBlock, window: state.retention, limit: HEADER_PRUNE_LIMIT }
}

/** A full batch may have left more below the horizon: only a short one completes the pruning. */
export const prunedAtAfter = (
  prunedAt: number | undefined,
  tip: number,
  deleted: number
): number | undefined => (deleted < HEADER_PRUNE_LIMIT ? tip : prunedAt)

// ---------------------------------------------------------------------------------------------
// Following the store

export interface SyncState {
  readonly startBlock: number
  /** What the projection covers; undefined when it covers nothing. */
  readonly covered: Coverage | undefined
  /** False when the last sync failed half-way: the projection starts over. */
  readonly intact: boolean
  /** The store's coverage now. */
  readonly target: Coverage | undefined
  /** The highest block the orphan markers just read let the projection keep (`+Infinity`: any). */
  readonly keepAtMost: number
  /** Whether the projection can take back every block above this one (its undo journal reaches). */
  readonly canRewindTo: (block: number) => boolean
  /** What the store appended since the last sync. */
  readonly appended: { readonly rangeSeqs: ReadonlyArray<number>; readonly markers: number }
  /** The writer's own last commit, if it made one since. */
  readonly committed?:
    | {
        readonly seq: number
        readonly fromBlock: number
        readonly toBlock: number
        readonly toHash: Hex
        readonly baseHash: Hex | undefined
      }
    | undefined
}

export interface SyncPlan {
  /** The store's coverage: the projection ends covering it (nothing when undefined). */
  readonly target: Coverage | undefined
  /** Empty the projection first. */
  readonly startOver: boolean
  /** Take back every block above this one first; undefined when nothing is taken back this way. */
  readonly rewindTo: number | undefined
  /** Blocks taken back, by the rewind or the start-over. */
  readonly rewound: number
  /** The projection is rebuilt from the start block (a failed sync, or a reorg it cannot take back). */
  readonly rebuilt: boolean
  /** Fold the canonical events of `from..target.block` in (none when `from` is above it). */
  readonly from: number
  /** The events to fold are exactly the writer's own last commit: they can come from memory. */
  readonly ownCommit: boolean
  /** Nothing is kept below `from`: the projection is folded from the start block up. */
  readonly fromScratch: boolean
  /** Events are read from the store from the start block up (a first sync, or a rebuild). */
  readonly replayed: boolean
}

/**
 * One sync of a follower of the store: a marker at or below the covered block (a reorg, or a
 * block coming back) takes the projection back to just below it, by its undo journal when that
 * reaches, else from scratch; then the canonical events up to the store's coverage are folded in.
 */
export const planSync = (state: SyncState): SyncPlan => {
  const { startBlock, target } = state
  const covered = state.intact ? state.covered : undefined
  let startOver = !state.intact
  let rebuilt = !state.intact
  let rewindTo: number | undefined
  let rewound = 0
  let kept = covered?.block
  if (covered !== undefined) {
    const keep =
      target === undefined ? startBlock - 1 : Math.min(state.keepAtMost, target.block, covered.block)
    if (keep < covered.block) {
      if (target !== undefined && keep >= startBlock && state.canRewindTo(keep)) rewindTo = keep
      else {
        startOver = true
        rebuilt = true
      }
      kept = rewindTo
      rewound = covered.block - keep
    }
  }
  const from = kept === undefined ? startBlock : kept + 1
  const committed = state.committed
  const ownCommit =
    target !== undefined &&
    committed !== undefined &&
    rewound === 0 &&
    state.appended.markers === 0 &&
    state.appended.rangeSeqs.length === 1 &&
    state.appended.rangeSeqs[0] === committed.seq &&
    committed.fromBlock === from &&
    committed.baseHash === covered?.hash &&
    committed.toBlock === target.block &&
    committed.toHash === target.hash
  return {
    target,
    startOver,
    rewindTo,
    rewound,
    rebuilt,
    from,
    ownCommit,
    fromScratch: kept === undefined,
    replayed: target !== undefined && kept === undefined && !ownCommit
  }
}
