/**
 * Keeps a live Accounts projection equal to the fold of the store's canonical events up to the
 * indexed coverage. The writer calls it after each commit and a replica that does not index calls
 * it on every poll; both read the same store, so both serve the same accounts.
 *
 * Each sync reads, in one consistent snapshot, the ranges and orphan markers appended since the
 * last one. A marker at or below the projection's block (a reorg, or a block coming back) rewinds
 * the projection to just below it with the undo journal; then the canonical events up to the new
 * coverage are applied. A rewind deeper than the journal, or a sync that failed half-way, starts
 * over from the start block.
 */
import { Effect, Either } from "effect"
import type { Address, Hex } from "viem"
import type {
  EventStoreError,
  EventStoreShape,
  NonceReconciliation,
  StoredEvent,
  VaultRef
} from "../store/EventStore.js"
import { AccountsProjection } from "../store/projections/AccountsProjection.js"
import type { NonceReconciled } from "../store/projections/accounts.js"
import { decodeVaultEvent, type MalformedEvent } from "../store/projections/vaultEvents.js"
import type { Coverage, RangeBook } from "./ranges.js"
import { StoreCursor } from "./storeCursor.js"

export interface FollowerOptions {
  readonly ref: VaultRef
  readonly startBlock: number
  readonly settlementAsset: Address
  /** How many blocks below the coverage a reorg may still reach (the journal's depth). */
  readonly confirmationDepth: number
}

/** What the writer just committed, so its own sync can fold it in without reading it back. */
export interface Committed {
  readonly seq: number
  readonly fromBlock: number
  readonly toBlock: number
  readonly toHash: Hex
  readonly baseHash: Hex | undefined
  readonly events: ReadonlyArray<StoredEvent>
  readonly reconciliations: ReadonlyArray<NonceReconciliation>
}

export interface SyncOutcome {
  /** Events folded in by this sync. */
  readonly applied: number
  /** Blocks taken back by this sync. */
  readonly rewound: number
  /** The projection was rebuilt from the start block. */
  readonly rebuilt: boolean
  /**
   * The events applied were read from the store from the start block up: a follower's first sync
   * (the start-up replay) or a rebuild, not the writer's own commit.
   */
  readonly replayed: boolean
}

const toReconciled = (r: NonceReconciliation): NonceReconciled => ({
  name: "NonceReconciled",
  id: r.id,
  nonce: r.nonce,
  bindNonce: r.bindNonce,
  blockNumber: r.blockNumber,
  blockHash: r.blockHash,
  // After every event of its block.
  logIndex: Number.MAX_SAFE_INTEGER
})

export class ProjectionFollower {
  readonly projection: AccountsProjection
  private readonly cursor: StoreCursor
  private covered: Coverage | undefined
  private consistent = true
  private changes = 0

  constructor(readonly options: FollowerOptions) {
    this.projection = new AccountsProjection({ settlementAsset: options.settlementAsset })
    this.cursor = new StoreCursor(options.ref, options.startBlock)
  }

  /** The ranges the store holds, as far as this follower has read. */
  get ranges(): RangeBook {
    return this.cursor.ranges
  }

  /** Whether a hash is on the canonical chain as far as the store knows. */
  readonly isCanonical = (hash: Hex): boolean => this.cursor.isCanonical(hash)

  /** What the projection covers: every block from the start block to this one. */
  get coverage(): Coverage | undefined {
    return this.consistent ? this.covered : undefined
  }

  /** The latest range sequence number seen: a writer's commit must extend exactly this. */
  get expectedRangeSeq(): number {
    return this.cursor.expectedRangeSeq
  }

  /** Changes whenever the projection's content (accounts or coverage) changes. */
  get version(): number {
    return this.changes + this.projection.version
  }

  private startOver(): void {
    this.covered = undefined
    this.projection.reset(0)
    this.changes++
  }

  /**
   * Brings the projection up to the store's current coverage. `committed` is the writer's own
   * last commit: when it is exactly what changed in the store (its range the only new one, no new
   * marker, extending the coverage this projection had), its events are folded in from memory:
   * they are then precisely the store's canonical events of that range.
   */
  sync(
    store: EventStoreShape,
    committed?: Committed
  ): Effect.Effect<SyncOutcome, EventStoreError | MalformedEvent> {
    return store.consistentRead(
      Effect.suspend(() => {
        const { startBlock, confirmationDepth } = this.options
        let rebuilt = false
        if (!this.consistent) {
          this.startOver()
          rebuilt = true
        }
        const before = this.covered
        return this.cursor.advance(store, before?.block).pipe(
          Effect.flatMap(({ progress, target, keepAtMost: rewindTo }) => {
            let rewound = 0
            if (before !== undefined) {
              const keep =
                target === undefined ? startBlock - 1 : Math.min(rewindTo, target.block, before.block)
              if (keep < before.block) {
                if (target !== undefined && keep >= startBlock && this.projection.rewind(keep)) {
                  // Only the block matters until the sync ends with the coverage's own hash.
                  this.covered = { block: keep, hash: target.hash }
                } else {
                  this.startOver()
                  rebuilt = true
                }
                rewound = before.block - keep
                this.changes++
              }
            }
            if (target === undefined) {
              if (this.covered !== undefined) this.startOver()
              return Effect.succeed({ applied: 0, rewound, rebuilt, replayed: false })
            }
            const from = this.covered === undefined ? startBlock : this.covered.block + 1
            if (this.covered === undefined)
              this.projection.reset(Math.max(startBlock, target.block - confirmationDepth + 1))
            const ownCommit =
              committed !== undefined &&
              rewound === 0 &&
              progress.markers.length === 0 &&
              progress.ranges.length === 1 &&
              progress.ranges[0]?.seq === committed.seq &&
              committed.fromBlock === from &&
              committed.baseHash === before?.hash &&
              committed.toBlock === target.block &&
              committed.toHash === target.hash
            const replayed = this.covered === undefined && !ownCommit
            const applying = ownCommit
              ? this.applyInputs(committed.events, committed.reconciliations.map(toReconciled))
              : this.apply(store, from, target)
            return applying.pipe(
              Effect.map((applied) => {
                if (this.covered?.block !== target.block || this.covered.hash !== target.hash) this.changes++
                this.covered = target
                this.projection.finalize(target.block - confirmationDepth)
                return { applied, rewound, rebuilt, replayed }
              })
            )
          })
        )
      })
    )
  }

  /** Folds the canonical events and nonce corrections of `from..target.block` in, reading them from the store. */
  private apply(
    store: EventStoreShape,
    from: number,
    target: Coverage
  ): Effect.Effect<number, EventStoreError | MalformedEvent> {
    const { ref } = this.options
    if (target.block < from) return Effect.succeed(0)
    return Effect.gen(this, function* () {
      const corrections = (yield* store.reconciliations(ref, from, target.block)).map(toReconciled)
      const fold = this.folder(corrections)
      this.consistent = false
      yield* store.canonicalEvents(ref, from, target.block, (page) => Effect.suspend(() => fold.events(page)))
      fold.finish()
      this.consistent = true
      return fold.applied()
    })
  }

  /** Folds events in chain order (with the corrections of their blocks after them) from memory. */
  private applyInputs(
    events: ReadonlyArray<StoredEvent>,
    corrections: ReadonlyArray<NonceReconciled>
  ): Effect.Effect<number, MalformedEvent> {
    return Effect.suspend(() => {
      const ordered = [...events].sort((a, b) => a.blockNumber - b.blockNumber || a.logIndex - b.logIndex)
      const fold = this.folder(corrections)
      this.consistent = false
      return fold.events(ordered).pipe(
        Effect.map(() => {
          fold.finish()
          this.consistent = true
          return fold.applied()
        })
      )
    })
  }

  private folder(corrections: ReadonlyArray<NonceReconciled>) {
    let nextCorrection = 0
    let applied = 0
    const projection = this.projection
    return {
      events: (page: ReadonlyArray<StoredEvent>): Effect.Effect<void, MalformedEvent> => {
        for (const stored of page) {
          while (nextCorrection < corrections.length) {
            const c = corrections[nextCorrection] as NonceReconciled
            if (c.blockNumber >= stored.blockNumber) break
            projection.apply(c)
            nextCorrection++
          }
          const decoded = decodeVaultEvent(stored)
          if (Either.isLeft(decoded)) return Effect.fail(decoded.left)
          if (decoded.right !== undefined) {
            projection.apply(decoded.right)
            applied++
          }
        }
        return Effect.void
      },
      finish: () => {
        for (; nextCorrection < corrections.length; nextCorrection++)
          projection.apply(corrections[nextCorrection] as NonceReconciled)
      },
      applied: () => applied
    }
  }
}

/** The projection rebuilt from scratch from the store: a fresh follower brought up to its coverage. */
export const rebuildProjection = (
  store: EventStoreShape,
  options: FollowerOptions
): Effect.Effect<ProjectionFollower, EventStoreError | MalformedEvent> =>
  Effect.suspend(() => {
    const follower = new ProjectionFollower(options)
    return Effect.as(follower.sync(store), follower)
  })
