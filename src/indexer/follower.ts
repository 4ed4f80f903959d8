/**
 * The follower of the event store, generic over its projection: it keeps a projection equal to
 * the fold of the store's canonical events up to the blocks the store covers. The vault indexer's
 * Accounts projection (`AccountsFollower.ts`) and the attestor's hint index
 * (src/attestor/hints/HintIndex.ts) are two projections plugged into it; the writer syncs after each
 * commit, a replica that does not index and the hint index on every poll, and all read the same
 * store, so all serve the same state.
 *
 * Each sync reads, in one consistent snapshot of the store, the ranges and orphan markers appended
 * since the last one (`StoreCursor`), and decides with `planSync` (decisions.ts) what to take back
 * (a marker at or below the covered block: a reorg, or a block coming back) and which blocks to
 * fold in. The projection then reads what it needs inside that snapshot, may do slow work outside
 * it, and makes its last change in one synchronous step together with the coverage. A sync that
 * fails after taking something back, or after the projection began changing, makes the next one
 * start over from the start block.
 */
import { Effect } from "effect"
import type { Address, Hex } from "viem"
import type {
  EventStoreError,
  EventStoreShape,
  NonceReconciliation,
  StoredEvent,
  VaultRef
} from "../store/EventStore.js"
import { planSync, type SyncPlan } from "./decisions.js"
import type { Coverage, RangeBook } from "./ranges.js"
import { StoreCursor } from "./storeCursor.js"

export interface StoreFollowerOptions {
  readonly ref: VaultRef
  /** The indexer's start block: coverage is counted from here. */
  readonly startBlock: number
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

/** How a sync went, whatever the projection. */
export interface SyncCounts {
  /** Blocks taken back by this sync. */
  readonly rewound: number
  /** The projection was rebuilt from the start block. */
  readonly rebuilt: boolean
  /**
   * The events applied were read from the store from the start block up: a first sync (the
   * start-up replay) or a rebuild, not the writer's own commit.
   */
  readonly replayed: boolean
}

/**
 * A projection plugged into the follower. `Input` is what each sync is given (the writer's own
 * commit, a hint opener); `Outcome` what it reports besides the counts.
 */
export interface FollowedProjection<Model, Input, Outcome, E> {
  /** The projection itself, as readers see it. */
  readonly model: Model
  /** Changes whenever the projection's content changes. */
  readonly version: number
  /** False while a change the projection began is unfinished: it shows no coverage, and starts over. */
  readonly intact: boolean
  /** Whether it can take back every block above `block` (an undo journal may be shorter). */
  canRewindTo(block: number): boolean
  /** The writer's own commit in this sync's input, if any. */
  committedIn(input: Input): Committed | undefined
  /**
   * Inside the sync's consistent read of the store: what `plan` needs from the store. Answers the
   * rest of the sync, run outside the read, whose result is the last change, made synchronously.
   */
  read(
    store: EventStoreShape,
    ref: VaultRef,
    plan: SyncPlan,
    input: Input
  ): Effect.Effect<Effect.Effect<() => Outcome, E>, EventStoreError | E>
}

/** The projection as readers see it: consistent, at one block of the canonical chain. */
export interface FollowedSnapshot<Model> {
  readonly chainId: number
  readonly vault: Address
  readonly block: number
  readonly hash: Hex
  /** Changes whenever the content (the projection or its block) changes. */
  readonly version: number
  readonly projection: Model
}

/** The sync's input when a projection takes an optional one (the writer's commit). */
type SyncInput<Input> = undefined extends Input ? [input?: Input] : [input: Input]

export class StoreFollower<Model, Input, Outcome, E> {
  private readonly cursor: StoreCursor
  private covered: Coverage | undefined
  /** False from a sync's first step the cursor cannot redo (a rewind, a start-over) until its end. */
  private settled = true
  private changes = 0

  constructor(
    readonly options: StoreFollowerOptions,
    private readonly followed: FollowedProjection<Model, Input, Outcome, E>
  ) {
    this.cursor = new StoreCursor(options.ref, options.startBlock)
  }

  get projection(): Model {
    return this.followed.model
  }

  /** The ranges the store holds, as far as this follower has read. */
  get ranges(): RangeBook {
    return this.cursor.ranges
  }

  /** Whether a hash is on the canonical chain as far as the store knows. */
  readonly isCanonical = (hash: Hex): boolean => this.cursor.isCanonical(hash)

  /** What the projection covers: every block from the start block to this one. */
  get coverage(): Coverage | undefined {
    return this.followed.intact ? this.covered : undefined
  }

  /** The latest range sequence number seen: a writer's commit must extend exactly this. */
  get expectedRangeSeq(): number {
    return this.cursor.expectedRangeSeq
  }

  /** Changes whenever the projection's content (or its coverage) changes. */
  get version(): number {
    return this.changes + this.followed.version
  }

  /** The projection with its block; `undefined` until it covers its first range. */
  snapshot(): FollowedSnapshot<Model> | undefined {
    const coverage = this.coverage
    if (coverage === undefined) return undefined
    return {
      chainId: this.options.ref.chainId,
      vault: this.options.ref.vault,
      block: coverage.block,
      hash: coverage.hash,
      version: this.version,
      projection: this.followed.model
    }
  }

  /** Brings the projection up to the store's current coverage. */
  sync(
    store: EventStoreShape,
    ...[input]: SyncInput<Input>
  ): Effect.Effect<SyncCounts & Outcome, EventStoreError | E> {
    return Effect.gen(this, function* () {
      const { ref, startBlock } = this.options
      const { plan, rest } = yield* store.consistentRead(
        Effect.gen(this, function* () {
          const intact = this.settled && this.followed.intact
          const covered = intact ? this.covered : undefined
          const { progress, target, keepAtMost } = yield* this.cursor.advance(store, covered?.block)
          const plan = planSync({
            startBlock,
            covered,
            intact,
            target,
            keepAtMost,
            canRewindTo: (block) => this.followed.canRewindTo(block),
            appended: { rangeSeqs: progress.ranges.map((r) => r.seq), markers: progress.markers.length },
            committed: this.followed.committedIn(input as Input)
          })
          // The markers are read: should this sync fail, the next cannot tell what to take back.
          if (plan.startOver || plan.rewindTo !== undefined) this.settled = false
          const rest = yield* this.followed.read(store, ref, plan, input as Input)
          return { plan, rest }
        })
      )
      const finish = yield* rest
      return yield* Effect.sync(() => {
        const outcome = finish()
        const before = this.covered
        if (
          plan.startOver ||
          plan.rewound > 0 ||
          before?.block !== plan.target?.block ||
          before?.hash !== plan.target?.hash
        )
          this.changes++
        this.covered = plan.target
        this.settled = true
        return { ...outcome, rewound: plan.rewound, rebuilt: plan.rebuilt, replayed: plan.replayed }
      })
    })
  }
}
