/**
 * The completed ranges of one vault as the store records them, and what follows from them: how
 * far the index reaches without a gap (its coverage), where the next gap ends, and which ranges a
 * reorg cuts short. Pure bookkeeping; the orphan state of hashes comes from the caller.
 */
import type { Hex } from "viem"
import type { IndexedRange } from "../store/EventStore.js"

export interface Coverage {
  /** Every block from the start block to this one is indexed. */
  readonly block: number
  readonly hash: Hex
}

export type IsCanonical = (hash: Hex) => boolean

/** A range as the decisions need it: the blocks it covers and the hash of its last one. */
export type RangeSpan = Omit<IndexedRange, "seq">

/** First block after `block` that one of `ranges` covers: the end (exclusive) of the gap there. */
export const nextCoveredIn = (ranges: ReadonlyArray<RangeSpan>, block: number): number | undefined => {
  let next: number | undefined
  for (const r of ranges)
    if (r.fromBlock > block && (next === undefined || r.fromBlock < next)) next = r.fromBlock
  return next
}

/** Highest block any of `ranges` reaches. */
export const highestIn = (ranges: ReadonlyArray<RangeSpan>): number | undefined => {
  let top: number | undefined
  for (const r of ranges) if (top === undefined || r.toBlock > top) top = r.toBlock
  return top
}

/**
 * For a reorg back to `ancestor`: the ranges that reach past it shortened to end there, so what
 * they covered up to the ancestor stays covered once their end is orphaned.
 */
export const keptUpToIn = (
  ranges: ReadonlyArray<RangeSpan>,
  ancestor: { readonly number: number; readonly hash: Hex }
): Array<RangeSpan> => {
  const kept: Array<RangeSpan> = []
  for (const r of ranges)
    if (r.fromBlock <= ancestor.number && r.toBlock > ancestor.number)
      kept.push({ fromBlock: r.fromBlock, toBlock: ancestor.number, toHash: ancestor.hash })
  return kept
}

export class RangeBook {
  private ranges: Array<IndexedRange> = []

  constructor(private readonly startBlock: number) {}

  get size(): number {
    return this.ranges.length
  }

  /**
   * Adds ranges in commit order. A range that starts at or before the start block makes every
   * older range it contains redundant: what they covered is inside it, or on a branch a later
   * reorg abandoned (and the reorg re-appends whatever stays valid), so those are dropped.
   */
  add(ranges: Iterable<IndexedRange>): void {
    for (const r of ranges) {
      if (r.fromBlock <= this.startBlock) this.ranges = this.ranges.filter((old) => old.toBlock > r.toBlock)
      this.ranges.push(r)
    }
  }

  /** The ranges whose last block is canonical, by first block (the longest first among equals). */
  canonical(isCanonical: IsCanonical): Array<IndexedRange> {
    return this.ranges
      .filter((r) => isCanonical(r.toHash))
      .sort((a, b) => a.fromBlock - b.fromBlock || b.toBlock - a.toBlock)
  }

  /** The contiguous indexed prefix from the start block; undefined when its first block is missing. */
  coverage(isCanonical: IsCanonical): Coverage | undefined {
    let block = this.startBlock - 1
    let hash: Hex | undefined
    for (const r of this.canonical(isCanonical)) {
      if (r.fromBlock > block + 1) break
      if (r.toBlock > block) {
        block = r.toBlock
        hash = r.toHash
      }
    }
    return hash === undefined ? undefined : { block, hash }
  }

  /** First block after `block` that a valid range already covers: the end (exclusive) of the gap there. */
  nextCovered(block: number, isCanonical: IsCanonical): number | undefined {
    return nextCoveredIn(this.canonical(isCanonical), block)
  }

  /** Highest block any valid range reaches. */
  highest(isCanonical: IsCanonical): number | undefined {
    return highestIn(this.canonical(isCanonical))
  }

  /**
   * For a reorg back to `ancestor`: the valid ranges that reach past it shortened to end there,
   * so what they covered up to the ancestor stays covered once their end is orphaned.
   */
  keptUpTo(ancestor: { readonly number: number; readonly hash: Hex }, isCanonical: IsCanonical) {
    return keptUpToIn(this.canonical(isCanonical), ancestor)
  }
}
