/**
 * The attestor's hint index (docs/attestor.md §4): the hint projection (`store/projections/hints.ts`)
 * kept equal to the fold of the event store's canonical `TokenLaunched` events, up to the blocks
 * the store covers. It is a projection plugged into the store's follower (src/indexer/follower.ts),
 * the one the indexer's Accounts projection is plugged into: it reads the store the vault indexer
 * writes and indexes nothing itself.
 *
 * Each sync reads, in one consistent snapshot of the store, what the follower asks for: the
 * canonical launches of the blocks to add; a marker at or below the covered block (a reorg, or a
 * block coming back) takes the launches above it back first. The hints are opened outside that
 * transaction (decryption is the slow part, and the embedded database has one connection),
 * letting I/O in between launches, and the projection changes in one synchronous step at the end:
 * a reader never sees half a sync. A sync that fails after taking launches back makes the next
 * one start over from the start block.
 *
 * A supervised fiber runs the syncs: whenever the indexer's projection changes (block, hash or
 * content), and at least every `resyncIntervalMs`. A failure is logged without account data,
 * counted (`attestor_hint_index_restarts_total`) and followed by a restart with jittered
 * exponential backoff; the server keeps serving the last index meanwhile.
 *
 * Wiring (`layers/attestor.ts`): `HintIndex.layer({ startBlock })` needs
 * - `Indexer`: `Indexer.layer(...)` of the attestor's vault on the attestor's own database, with the
 *   same start block (its snapshot names the chain and vault, and its changes trigger syncs);
 * - `EventStore`: `EventStore.layer` over the same SQL client (`storageLayer(...)`, migrations
 *   applied);
 * - `HintDecryptor`: `HintDecryptor.layer` (from `AttestorSettings.hintKey`).
 */

import { Cause, Context, Duration, Effect, Either, Layer, Metric, Option, Ref } from "effect"
import type { Address, Hex } from "viem"
import { pollForChanges } from "../../background/poll.js"
import { supervised } from "../../background/supervised.js"
import { counter, type SeriesAtZero } from "../../http/metrics.js"
import {
  type FollowedProjection,
  StoreFollower,
  type StoreFollowerOptions,
  type SyncCounts
} from "../../indexer/follower.js"
import { Indexer } from "../../indexer/Indexer.js"
import type { EventStoreError, EventStoreShape } from "../../store/EventStore.js"
import { EventStore } from "../../store/EventStore.js"
import {
  decodeTokenLaunched,
  type Escrow,
  type EscrowHint,
  HintProjection,
  type TokenLaunched
} from "../../store/projections/hints.js"
import { countRejections, HintDecryptor } from "./HintDecryptor.js"
import type { HintOpener, HintRejection } from "./hintEnvelopes.js"

export type HintFollowerOptions = StoreFollowerOptions

export interface HintSyncOutcome extends SyncCounts {
  /** Launches folded in by this sync. */
  readonly applied: number
  /** Hints and envelopes set aside while opening this sync's launches. */
  readonly rejected: ReadonlyArray<HintRejection>
}

/** Launches opened between two chances for I/O to run. */
const OPEN_SLICE_MS = 20

const letIoIn = Effect.async<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})

type HintChange = Omit<HintSyncOutcome, keyof SyncCounts>

/**
 * The hint projection plugged into the store's follower: the canonical launches of the blocks to
 * add are read inside the follower's consistent read; their hints are opened outside it
 * (decryption is the slow part, and the embedded database has one connection), letting I/O in
 * between launches; the projection changes only in the follower's last synchronous step, so a
 * reader never sees half a sync.
 */
class FollowedHints implements FollowedProjection<HintProjection, HintOpener, HintChange, never> {
  readonly model = new HintProjection()
  /** The projection changes in one synchronous step: never half-way. */
  readonly intact = true

  get version(): number {
    return this.model.version
  }

  /** The projection keeps every launch it holds, so it can always take blocks back. */
  canRewindTo(): boolean {
    return true
  }

  /** The hint index only reads the store the indexer writes. */
  committedIn(): undefined {
    return undefined
  }

  read: FollowedProjection<HintProjection, HintOpener, HintChange, never>["read"] = (
    store,
    ref,
    plan,
    opener
  ) =>
    Effect.gen(this, function* () {
      const launches: Array<TokenLaunched> = []
      let malformed = 0
      const target = plan.target
      if (target !== undefined && target.block >= plan.from)
        yield* store.canonicalEvents(ref, plan.from, target.block, (page) =>
          Effect.sync(() => {
            for (const e of page) {
              if (e.eventName !== "TokenLaunched") continue
              const decoded = decodeTokenLaunched(e)
              if (Either.isLeft(decoded)) malformed++
              else if (decoded.right !== undefined) launches.push(decoded.right)
            }
          })
        )
      return this.open(plan, launches, malformed, opener)
    })

  /** Opens the launches' hints outside the store's read; answers the change to make. */
  private open(
    plan: { readonly startOver: boolean; readonly rewindTo: number | undefined },
    launches: ReadonlyArray<TokenLaunched>,
    malformed: number,
    opener: HintOpener
  ): Effect.Effect<() => HintChange> {
    return Effect.gen(this, function* () {
      const rejected: Array<HintRejection> = []
      for (let i = 0; i < malformed; i++) rejected.push("event")
      const opened: Array<EscrowHint | undefined> = []
      // Wall time on purpose: this measures work done, to yield the CPU, not the protocol clock.
      let slice = Date.now()
      for (const launch of launches) {
        const opening = opener(launch.beneficiaryId, launch.beneficiaryHint)
        opened.push(opening.hint)
        rejected.push(...opening.rejected)
        if (Date.now() - slice >= OPEN_SLICE_MS) {
          yield* letIoIn
          slice = Date.now()
        }
      }
      return () => {
        if (plan.startOver) this.model.reset()
        else if (plan.rewindTo !== undefined) this.model.rewind(plan.rewindTo)
        launches.forEach((launch, i) => {
          this.model.apply(launch, opened[i])
        })
        return { applied: launches.length, rejected }
      }
    })
  }
}

/**
 * The store's follower with the hint projection plugged in: keeps a `HintProjection` equal to the
 * fold of the store's canonical launches up to the store's coverage. Only `sync` changes it, one
 * at a time; interrupted or failed, it leaves the index as it was.
 */
export class HintFollower extends StoreFollower<HintProjection, HintOpener, HintChange, never> {
  constructor(options: HintFollowerOptions) {
    super(options, new FollowedHints())
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
  /**
   * The hint index of the indexed vault, kept live by a scoped fiber. Needs `Indexer` (running on
   * the same database, same start block), `EventStore` and `HintDecryptor`; see the module comment.
   */
  static readonly layer = (
    config: HintIndexConfig
  ): Layer.Layer<HintIndex, never, Indexer | EventStore | HintDecryptor> =>
    Layer.scoped(HintIndex, makeHintIndex(config))

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

/** The index's restarts, exported at 0 from start-up (docs/operations.md "Metrics reference"). */
export const hintIndexSeriesAtZero: ReadonlyArray<SeriesAtZero> = [indexRestarts]

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

    const read: HintIndexShape["read"] = (fn) => Effect.sync(() => fn(follower?.snapshot()))

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
