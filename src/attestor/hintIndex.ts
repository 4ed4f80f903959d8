/**
 * The attestor's hint index (docs/attestor.md §4): the hint projection (`store/projections/hints.ts`)
 * kept equal to the fold of the event store's canonical `TokenLaunched` events, up to the blocks
 * the store covers. It reads the store the vault indexer writes, the way the indexer's own
 * Accounts follower does, and indexes nothing itself.
 *
 * Each sync reads, in one consistent snapshot of the store, the ranges and orphan markers
 * appended since the last one and the canonical launches of the blocks to add; a marker at or
 * below the covered block (a reorg, or a block coming back) takes the launches above it back
 * first. The hints are opened outside that transaction (decryption is the slow part, and the
 * embedded database has one connection), letting I/O in between launches, and the projection
 * changes in one synchronous step at the end: a reader never sees half a sync. A sync that fails
 * half-way makes the next one start over from the start block.
 *
 * A supervised fiber runs the syncs: whenever the indexer's projection changes (block, hash or
 * content), and at least every `resyncIntervalMs`. A failure is logged without account data,
 * counted (`attestor_hint_index_restarts_total`) and followed by a restart with jittered
 * exponential backoff; the server keeps serving the last index meanwhile.
 *
 * Wiring (`layers/attestor.ts`): `hintIndexLayer({ startBlock })` needs
 * - `Indexer`: `indexerLayer(...)` of the attestor's vault on the attestor's own database, with the
 *   same start block (its snapshot names the chain and vault, and its changes trigger syncs);
 * - `EventStore`: `eventStoreLayer` over the same SQL client (`storageLayer(...)`, migrations
 *   applied);
 * - `HintDecryptor`: `HintDecryptor.layer` (from `AttestorSettings.hintKey`).
 */

import { Cause, Context, Duration, Effect, Either, Layer, Metric, Option, Ref } from "effect"
import type { Address, Hex } from "viem"
import { pollForChanges } from "../background/poll.js"
import { supervised } from "../background/supervised.js"
import { counter } from "../http/metrics.js"
import { Indexer } from "../indexer/Indexer.js"
import type { Coverage } from "../indexer/ranges.js"
import { StoreCursor } from "../indexer/storeCursor.js"
import type { EventStoreError, EventStoreShape, VaultRef } from "../store/EventStore.js"
import { EventStore } from "../store/EventStore.js"
import {
  decodeTokenLaunched,
  type Escrow,
  type EscrowHint,
  HintProjection,
  type TokenLaunched
} from "../store/projections/hints.js"
import { countRejections, HintDecryptor } from "./HintDecryptor.js"
import type { HintOpener, HintRejection } from "./hints.js"

export interface HintFollowerOptions {
  readonly ref: VaultRef
  /** The indexer's start block: coverage is counted from here. */
  readonly startBlock: number
}

export interface HintSyncOutcome {
  /** Launches folded in by this sync. */
  readonly applied: number
  /** Blocks taken back by this sync. */
  readonly rewound: number
  /** The index was rebuilt from the start block. */
  readonly rebuilt: boolean
  /** Hints and envelopes set aside while opening this sync's launches. */
  readonly rejected: ReadonlyArray<HintRejection>
}

/** What one sync will do to the projection, decided from one consistent read of the store. */
interface Plan {
  readonly reset: boolean
  /** Take back launches above this block first (before adding); none when nothing is taken back. */
  readonly rewindTo: number | undefined
  readonly target: Coverage | undefined
  readonly launches: ReadonlyArray<TokenLaunched>
  readonly malformed: number
  readonly rewound: number
}

/** Launches opened between two chances for I/O to run. */
const OPEN_SLICE_MS = 20

const letIoIn = Effect.async<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})

/**
 * Keeps a `HintProjection` equal to the fold of the store's canonical launches up to the store's
 * coverage. Only `sync` changes it, one at a time.
 */
export class HintFollower {
  readonly projection = new HintProjection()
  private readonly cursor: StoreCursor
  private covered: Coverage | undefined
  /** False from the first bookkeeping change of a sync until its projection change. */
  private consistent = true
  private changes = 0

  constructor(readonly options: HintFollowerOptions) {
    this.cursor = new StoreCursor(options.ref, options.startBlock)
  }

  /** Every block from the start block to this one is folded in. */
  get coverage(): Coverage | undefined {
    return this.covered
  }

  /** Changes whenever the index or its coverage changes. */
  get version(): number {
    return this.changes + this.projection.version
  }

  /** The part of a sync inside one consistent read: bookkeeping and the launches to add. */
  private plan(store: EventStoreShape): Effect.Effect<Plan, EventStoreError> {
    return store.consistentRead(
      Effect.gen(this, function* () {
        const { ref, startBlock } = this.options
        const reset = !this.consistent
        const before = reset ? undefined : this.covered
        this.consistent = false
        const { target, keepAtMost: rewindTo } = yield* this.cursor.advance(store, before?.block)
        if (target === undefined)
          return { reset: true, rewindTo: undefined, target, launches: [], malformed: 0, rewound: 0 }
        let from = startBlock
        let keep: number | undefined
        if (before !== undefined) {
          keep = Math.min(rewindTo, target.block, before.block)
          from = keep + 1
          if (keep >= before.block) keep = undefined
        }
        const launches: Array<TokenLaunched> = []
        let malformed = 0
        if (target.block >= from)
          yield* store.canonicalEvents(ref, from, target.block, (page) =>
            Effect.sync(() => {
              for (const e of page) {
                if (e.eventName !== "TokenLaunched") continue
                const decoded = decodeTokenLaunched(e)
                if (Either.isLeft(decoded)) malformed++
                else if (decoded.right !== undefined) launches.push(decoded.right)
              }
            })
          )
        const rewound = before === undefined || keep === undefined ? 0 : before.block - keep
        return { reset: before === undefined, rewindTo: keep, target, launches, malformed, rewound }
      })
    )
  }

  /**
   * Brings the index up to the store's current coverage, opening new launches with `opener`.
   * Interrupted or failed, it leaves the index as it was and the next sync starts over.
   */
  sync(store: EventStoreShape, opener: HintOpener): Effect.Effect<HintSyncOutcome, EventStoreError> {
    return Effect.gen(this, function* () {
      const plan = yield* this.plan(store)
      const rejected: Array<HintRejection> = []
      for (let i = 0; i < plan.malformed; i++) rejected.push("event")
      const opened: Array<EscrowHint | undefined> = []
      // Wall time on purpose: this measures work done, to yield the CPU, not the protocol clock.
      let slice = Date.now()
      for (const launch of plan.launches) {
        const opening = opener(launch.beneficiaryId, launch.beneficiaryHint)
        opened.push(opening.hint)
        rejected.push(...opening.rejected)
        if (Date.now() - slice >= OPEN_SLICE_MS) {
          yield* letIoIn
          slice = Date.now()
        }
      }
      return yield* Effect.sync(() => {
        const before = this.covered
        if (plan.reset) this.projection.reset()
        else if (plan.rewindTo !== undefined) this.projection.rewind(plan.rewindTo)
        plan.launches.forEach((launch, i) => {
          this.projection.apply(launch, opened[i])
        })
        if (before?.block !== plan.target?.block || before?.hash !== plan.target?.hash) this.changes++
        this.covered = plan.target
        this.consistent = true
        return {
          applied: plan.launches.length,
          rewound: plan.rewound,
          rebuilt: plan.reset && before !== undefined,
          rejected
        } satisfies HintSyncOutcome
      })
    })
  }
}

/** The index rebuilt from scratch from the store: a fresh follower brought up to its coverage. */
export const rebuildHintIndex = (
  store: EventStoreShape,
  options: HintFollowerOptions,
  opener: HintOpener
): Effect.Effect<HintFollower, EventStoreError> =>
  Effect.suspend(() => {
    const follower = new HintFollower(options)
    return Effect.as(follower.sync(store, opener), follower)
  })

// ---------------------------------------------------------------------------------------------
// The service
// ---------------------------------------------------------------------------------------------

export type HintIndexState = "starting" | "ready" | "retrying" | "disabled"

export interface HintIndexStatus {
  readonly state: HintIndexState
  /** Highest block the index covers; absent until it covers its first range. */
  readonly block: number | undefined
  readonly hash: Hex | undefined
}

/** The index as readers see it: consistent, at one block of the canonical chain. */
export interface HintSnapshot {
  readonly chainId: number
  readonly vault: Address
  readonly block: number
  readonly hash: Hex
  /** Changes whenever the content (escrows or block) changes. */
  readonly version: number
  readonly projection: Pick<HintProjection, "epoch" | "escrowsOf" | "escrow" | "escrows">
}

/** One platform user's escrows at the block the index covers. */
export interface EscrowsAt {
  readonly block: number
  readonly hash: Hex
  readonly escrows: ReadonlyArray<Escrow>
}

export interface HintIndexShape {
  readonly status: Effect.Effect<HintIndexStatus>
  /** Runs `f` on the index as it is now; `undefined` until it covers its first range. */
  readonly read: <A>(f: (snapshot: HintSnapshot | undefined) => A) => Effect.Effect<A>
  /** The escrows of `(platformId, userId)`, in the order of their first launch; none until the index is ready. */
  readonly escrowsOf: (platformId: number, userId: string) => Effect.Effect<Option.Option<EscrowsAt>>
}

export class HintIndex extends Context.Tag("HintIndex")<HintIndex, HintIndexShape>() {
  /** No index: for wiring without a vault indexer (tests of routes that do not read hints). */
  static readonly disabled: Layer.Layer<HintIndex> = Layer.succeed(HintIndex, {
    status: Effect.succeed<HintIndexStatus>({ state: "disabled", block: undefined, hash: undefined }),
    read: (f) => Effect.sync(() => f(undefined)),
    escrowsOf: () => Effect.succeed(Option.none())
  })
}

export interface HintIndexConfig {
  /** The indexer's start block. */
  readonly startBlock: number
  /** How often the indexer's projection is looked at for changes. Default 100 ms. */
  readonly pollIntervalMs?: number
  /** Longest time between two syncs when the indexer shows no change. Default 5 s. */
  readonly resyncIntervalMs?: number
  /** First restart delay after a failure; doubles per consecutive failure. Default 500 ms. */
  readonly restartBaseDelayMs?: number
  /** Longest restart delay. Default 30 s. */
  readonly restartMaxDelayMs?: number
}

const indexBlock = Metric.gauge("attestor_hint_index_block", {
  description: "Highest block the hint index covers"
})
const indexRestarts = counter(
  "attestor_hint_index_restarts_total",
  "Times the hint index's sync failed and was restarted"
)

export const makeHintIndex = (config: HintIndexConfig) =>
  Effect.gen(function* () {
    const indexer = yield* Indexer
    const store = yield* EventStore
    const decryptor = yield* HintDecryptor
    const pollInterval = Duration.millis(config.pollIntervalMs ?? 100)
    const resyncInterval = config.resyncIntervalMs ?? 5_000
    const state = yield* Ref.make<HintIndexState>(indexer.enabled ? "starting" : "disabled")
    let follower: HintFollower | undefined

    /** The indexer's projection, as far as a change of it matters here. */
    const indexerView = indexer.read((s) =>
      s === undefined
        ? undefined
        : { ref: { chainId: s.chainId, vault: s.vault }, key: `${s.block}:${s.hash}:${s.version}` }
    )

    const syncOnce = (f: HintFollower) =>
      Effect.gen(function* () {
        const outcome = yield* f.sync(store, decryptor.opener)
        yield* countRejections(outcome.rejected)
        const block = f.coverage?.block
        if (block !== undefined) yield* Metric.set(indexBlock, block)
        if (outcome.rewound > 0 || outcome.rebuilt)
          yield* Effect.logDebug("hint index took launches back").pipe(
            Effect.annotateLogs({ rewound_blocks: outcome.rewound, rebuilt: outcome.rebuilt })
          )
      })

    /** Syncs whenever the indexer's projection changes; fails only with a sync's failure. */
    const follow = pollForChanges({
      read: indexerView,
      keyOf: (view) => view.key,
      onChange: ({ ref }) =>
        Effect.gen(function* () {
          if (follower === undefined || follower.options.ref.chainId !== ref.chainId)
            follower = new HintFollower({ ref, startBlock: config.startBlock })
          yield* syncOnce(follower)
          if (follower.coverage !== undefined) yield* Ref.set(state, "ready")
        }),
      pollInterval,
      resyncInterval
    })

    const run = supervised("hint index", follow, {
      baseDelayMs: config.restartBaseDelayMs,
      maxDelayMs: config.restartMaxDelayMs,
      onRestart: (cause) =>
        Effect.gen(function* () {
          // A defect may have left the follower anywhere: the next term starts from scratch.
          if (Option.isSome(Cause.dieOption(cause))) follower = undefined
          yield* Metric.increment(indexRestarts)
          yield* Ref.set(state, "retrying")
        })
    })

    if (indexer.enabled) yield* Effect.forkScoped(run)

    const read: HintIndexShape["read"] = (fn) =>
      Effect.sync(() => {
        const f = follower
        const cov = f?.coverage
        if (f === undefined || cov === undefined) return fn(undefined)
        return fn({
          chainId: f.options.ref.chainId,
          vault: f.options.ref.vault,
          block: cov.block,
          hash: cov.hash,
          version: f.version,
          projection: f.projection
        })
      })

    const status: HintIndexShape["status"] = Effect.flatMap(Ref.get(state), (s) =>
      read((snapshot) => ({ state: s, block: snapshot?.block, hash: snapshot?.hash }))
    )

    const escrowsOf: HintIndexShape["escrowsOf"] = (platformId, userId) =>
      read((s) =>
        s === undefined
          ? Option.none()
          : Option.some({ block: s.block, hash: s.hash, escrows: s.projection.escrowsOf(platformId, userId) })
      )

    return { status, read, escrowsOf } satisfies HintIndexShape
  })

/**
 * The hint index of the indexed vault, kept live by a scoped fiber. Needs `Indexer` (running on
 * the same database, same start block), `EventStore` and `HintDecryptor`; see the module comment.
 */
export const hintIndexLayer = (
  config: HintIndexConfig
): Layer.Layer<HintIndex, never, Indexer | EventStore | HintDecryptor> =>
  Layer.scoped(HintIndex, makeHintIndex(config))
