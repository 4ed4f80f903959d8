/**
 * What a follower of the event store knows about the store's progress (the ranges indexed and the
 * orphan markers of reorgs), read incrementally: each `advance` reads what was appended since the
 * last one, in the caller's consistent read. The store's follower (src/indexer/follower.ts) keeps
 * one for whichever projection is plugged into it, so the range and orphan bookkeeping exists once.
 */
import { Effect } from "effect"
import type { Hex } from "viem"
import type { EventStoreError, EventStoreShape, Progress, VaultRef } from "../store/EventStore.js"
import { type Coverage, RangeBook } from "./ranges.js"

export interface Advance {
  /** What was appended since the last advance. */
  readonly progress: Progress
  /** The store's coverage now: every canonical block from the start block to this one. */
  readonly target: Coverage | undefined
  /**
   * The highest block a follower covering `coveredBlock` may keep: one below the lowest block a
   * new orphan marker names at or below it; `+Infinity` when no marker reaches it.
   */
  readonly keepAtMost: number
}

export class StoreCursor {
  readonly ranges: RangeBook
  private readonly orphaned = new Map<Hex, boolean>()
  private rangeSeq = 0
  private markerSeq = 0

  constructor(
    private readonly ref: VaultRef,
    private readonly startBlock: number
  ) {
    this.ranges = new RangeBook(startBlock)
  }

  /** Whether a hash is on the canonical chain as far as the store knows. */
  readonly isCanonical = (hash: Hex): boolean => this.orphaned.get(hash) !== true

  /** The latest range sequence number seen: a writer's commit must extend exactly this. */
  get expectedRangeSeq(): number {
    return this.rangeSeq
  }

  /** Reads the store's progress since the last advance; to be run inside `store.consistentRead`. */
  advance(store: EventStoreShape, coveredBlock: number | undefined): Effect.Effect<Advance, EventStoreError> {
    return Effect.map(
      store.progress(this.ref, {
        rangeSeq: this.rangeSeq,
        markerSeq: this.markerSeq,
        startBlock: this.startBlock
      }),
      (progress) => this.fold(progress, coveredBlock)
    )
  }

  private fold(progress: Progress, coveredBlock: number | undefined): Advance {
    let keepAtMost = Number.POSITIVE_INFINITY
    for (const m of progress.markers) {
      this.orphaned.set(m.hash, m.orphaned)
      this.markerSeq = Math.max(this.markerSeq, m.seq)
      if (coveredBlock !== undefined && m.number <= coveredBlock)
        keepAtMost = Math.min(keepAtMost, m.number - 1)
    }
    this.ranges.add(progress.ranges)
    for (const r of progress.ranges) this.rangeSeq = Math.max(this.rangeSeq, r.seq)
    return { progress, target: this.ranges.coverage(this.isCanonical), keepAtMost }
  }
}
