/**
 * The vault indexer: a fiber started by a scoped layer that streams the vault's logs into the
 * event store and keeps the Accounts projection current. It is supervised: any failure (RPC,
 * database, a bug) is logged without account data, counted, and followed by a restart with
 * jittered exponential backoff; the HTTP server never goes down with it.
 *
 * One process per vault and database indexes (a PostgreSQL advisory lock on a connection of its
 * own); the others stand by, follow the store and serve the same accounts, and take over when
 * the lock frees up.
 *
 * The writer's loop, once per step (each choice is a pure decision of `decisions.ts`; this file
 * reads the chain and the store, asks, and carries the answer out):
 * - backfill: blocks at least `confirmationDepth` below the head are final; their logs come in
 *   adaptive `eth_getLogs` ranges, each committed with the header of its last block;
 * - follow: newer blocks are fetched header by header, each checked against its parent, and
 *   their logs only if every log's block hash matches the header at its height;
 * - reorg: when the stored tip is no longer the chain's block at that height, walk back through
 *   the stored blocks to the common ancestor, mark the abandoned ones orphaned, and go on from
 *   there (the next steps fetch the new branch);
 * - after each batch, the nonces of the accounts whose nonces it moved are reconciled with the
 *   chain's at its last block (the chain wins);
 * - while following, each time the tip has advanced `headerPruneIntervalBlocks` since the last
 *   time, the headers more than `headerRetentionBlocks` below it (and below every other vault's
 *   of the chain in the same database) are deleted: only the walk back of a reorg reads them.
 */
import { Cause, Clock, Context, Data, Duration, Effect, Either, Layer, Metric, Option, Ref } from "effect"
import type { Address, Hex, Log } from "viem"
import { collectReplayGarbage } from "../background/collectGarbage.js"
import { supervised as runSupervised } from "../background/supervised.js"
import { type ChainBlock, ChainClient } from "../chain/ChainClient.js"
import { describeFailure } from "../logging.js"
import {
  type BlockHeader,
  EventStore,
  type Leadership,
  type NonceReconciliation,
  type StoredEvent,
  type VaultRef
} from "../store/EventStore.js"
import type { AccountsProjection } from "../store/projections/AccountsProjection.js"
import type { AccountState } from "../store/projections/accounts.js"
import { decodeVaultEvent, isAccountEvent, type VaultEvent } from "../store/projections/vaultEvents.js"
import { AccountsFollower } from "./AccountsFollower.js"
import {
  type BatchBounds,
  backfillBatch,
  checkFollowHeaders,
  countedNonces,
  DEFAULT_HEADER_PRUNE_INTERVAL,
  followBatch,
  headerRetentionOf,
  logOffBranch,
  nextReorgRead,
  nonceCorrections,
  pauseAfter,
  planConsolidation,
  planHeaderPrune,
  planReorg,
  planStep,
  prunedAtAfter,
  type StepOutcome,
  type StepState,
  startReorgWalk,
  type TipCheck,
  withChainBlock,
  withStoredBlocks
} from "./decisions.js"
import type { Committed } from "./follower.js"
import { STALE_AFTER_POLLS } from "./freshness.js"
import { decodeVaultLog, makeLogFetcher, minedLog } from "./logs.js"
import * as M from "./metrics.js"
import { readChainNonces } from "./reconcile.js"

export interface IndexerConfig {
  /** The chain the vault lives on; when set, a node on another chain is refused. */
  readonly chainId: Option.Option<number>
  readonly vault: Address
  readonly startBlock: number
  readonly settlementAsset: Address
  readonly pollIntervalMs: number
  /** How far below the head a reorg may reach; blocks deeper than this are final. */
  readonly confirmationDepth: number
  /** Ceiling of the adaptive `eth_getLogs` range. */
  readonly maxBlockRange: number
  /** First restart delay after a failure; doubles per consecutive failure. Default 500 ms. */
  readonly restartBaseDelayMs?: number
  /** Longest restart delay. Default 30 s. */
  readonly restartMaxDelayMs?: number
  /**
   * Headers of this many blocks below the indexed tip are kept for reorg detection; older ones
   * are pruned. Default `max(confirmationDepth, 256) + 256`: every block a reorg within the
   * confirmation depth reaches and the reorg walk's first two windows. Never below the depth.
   */
  readonly headerRetentionBlocks?: number
  /** How far the tip advances while following between two prunings. Default 1000 blocks. */
  readonly headerPruneIntervalBlocks?: number
}

/** The settings both services name their indexer with (INDEXER_* and the vault's addresses). */
export interface IndexerSettings {
  readonly chainId: Option.Option<number>
  readonly vault: Address
  readonly indexerStartBlock: number
  readonly settlementAsset: Address
  readonly indexerPollIntervalMs: number
  readonly indexerConfirmationDepth: number
  readonly indexerMaxBlockRange: number
}

export const indexerConfigOf = (settings: IndexerSettings): IndexerConfig => ({
  chainId: settings.chainId,
  vault: settings.vault,
  startBlock: settings.indexerStartBlock,
  settlementAsset: settings.settlementAsset,
  pollIntervalMs: settings.indexerPollIntervalMs,
  confirmationDepth: settings.indexerConfirmationDepth,
  maxBlockRange: settings.indexerMaxBlockRange
})

export type IndexerStateName = M.IndexerState | "disabled"

export interface IndexerStatus {
  readonly state: IndexerStateName
  /** Highest block the projection covers. */
  readonly block: number | undefined
  /** Latest head seen. */
  readonly head: number | undefined
  /**
   * Epoch ms until which that head counts as current (`STALE_AFTER_POLLS` poll intervals after it
   * was read); past it the index is stale (`freshness.ts`). Absent before the first head read.
   */
  readonly freshUntil?: number | undefined
  /** Whether this process is the one indexing. */
  readonly leader: boolean
}

/** The projection as readers see it: consistent, at one block of the canonical chain. */
export interface AccountsSnapshot {
  readonly chainId: number
  readonly vault: Address
  readonly block: number
  readonly hash: Hex
  /** Changes whenever the content (accounts or block) changes. */
  readonly version: number
  readonly accounts: ReadonlyMap<Hex, AccountState>
  /** The accounts by bucket, to redo only what changed (see `AccountsProjection`). */
  readonly projection: Pick<AccountsProjection, "epoch" | "bucket">
}

export interface IndexerShape {
  readonly enabled: boolean
  readonly status: Effect.Effect<IndexerStatus>
  /**
   * Runs `f` on the projection while nothing changes it; `undefined` until the index covers its
   * first range (or with the indexer disabled).
   */
  readonly read: <A>(f: (snapshot: AccountsSnapshot | undefined) => A) => Effect.Effect<A>
}

export class Indexer extends Context.Tag("Indexer")<Indexer, IndexerShape>() {
  /** The indexer of the configured vault; needs the chain client and the event store. */
  static readonly layer = (config: IndexerConfig): Layer.Layer<Indexer, never, ChainClient | EventStore> =>
    Layer.scoped(Indexer, makeIndexer(config))

  /** `INDEXER_ENABLED=false`: nothing runs and nothing is indexed. */
  static readonly disabled: Layer.Layer<Indexer> = Layer.succeed(Indexer, {
    enabled: false,
    status: Effect.succeed<IndexerStatus>({
      state: "disabled",
      block: undefined,
      head: undefined,
      leader: false
    }),
    read: (f) => Effect.sync(() => f(undefined))
  })
}

/** The node serves another chain than the settings name. */
export class ChainMismatch extends Data.TaggedError("ChainMismatch")<{
  readonly expected: number
  readonly actual: number
}> {
  override get message() {
    return `the RPC serves chain ${this.actual}, the settings name chain ${this.expected}`
  }
}

/** Headers a follow step reads at once. */
const HEADER_CONCURRENCY = 4

export const makeIndexer = (config: IndexerConfig) =>
  Effect.gen(function* () {
    const chain = yield* ChainClient
    const store = yield* EventStore
    const permit = yield* Effect.makeSemaphore(1)
    const status = yield* Ref.make<IndexerStatus>({
      state: "starting",
      block: undefined,
      head: undefined,
      leader: false
    })
    const fetcher = yield* makeLogFetcher(chain, config.vault, { maxBlockRange: config.maxBlockRange })
    const depth = config.confirmationDepth
    const headerRetention = headerRetentionOf(depth, config.headerRetentionBlocks)
    const headerPruneInterval = Math.max(1, config.headerPruneIntervalBlocks ?? DEFAULT_HEADER_PRUNE_INTERVAL)
    const context = { settlementAsset: config.settlementAsset }
    let follower: AccountsFollower | undefined

    const setState = (state: M.IndexerState) =>
      Effect.zipRight(
        Ref.update(status, (s) => ({ ...s, state })),
        M.setState(state)
      )
    const setLeader = (leader: boolean) =>
      Effect.zipRight(
        Ref.update(status, (s) => ({ ...s, leader })),
        Metric.set(M.leaderGauge, leader ? 1 : 0)
      )
    const setHead = (head: number) =>
      Effect.gen(function* () {
        const freshUntil = (yield* Clock.currentTimeMillis) + STALE_AFTER_POLLS * config.pollIntervalMs
        const s = yield* Ref.updateAndGet(status, (s) => ({ ...s, head, freshUntil }))
        yield* Metric.set(M.headBlock, head)
        if (s.block !== undefined) yield* Metric.set(M.lagBlocks, Math.max(0, head - s.block))
      })

    const sync = (f: AccountsFollower, committed?: Committed) =>
      permit
        .withPermits(1)(f.sync(store, committed))
        .pipe(
          Effect.tap(collectReplayGarbage),
          Effect.tap(() =>
            Effect.gen(function* () {
              const block = f.coverage?.block
              const s = yield* Ref.updateAndGet(status, (s) => ({ ...s, block }))
              if (block !== undefined) {
                yield* Metric.set(M.indexedBlock, block)
                if (s.head !== undefined) yield* Metric.set(M.lagBlocks, Math.max(0, s.head - block))
              }
            })
          )
        )

    const resolveChainId = Effect.flatMap(chain.chainId, (actual) =>
      Option.match(config.chainId, {
        onNone: () => Effect.succeed(actual),
        onSome: (expected) =>
          expected === actual ? Effect.succeed(actual) : Effect.fail(new ChainMismatch({ expected, actual }))
      })
    )

    /** The chain's block at `n`; none when the chain is shorter. */
    const blockAt = (n: number) =>
      chain.getBlock({ blockNumber: BigInt(n) }).pipe(
        Effect.map(Option.some),
        Effect.catchTag("BlockNotFound", () => Effect.succeed(Option.none<ChainBlock>()))
      )

    const header = (b: ChainBlock): BlockHeader => ({
      number: Number(b.number),
      hash: b.hash,
      parentHash: b.parentHash
    })

    /** Stored events of logs; none when a log's block is not the one the step holds at its height. */
    const toStoredEvents = (logs: ReadonlyArray<Log>, expectedAt: (n: number) => Hex | undefined) =>
      Effect.gen(function* () {
        const events: Array<StoredEvent> = []
        for (const raw of logs) {
          const log = yield* minedLog(raw)
          if (logOffBranch(log, expectedAt)) return Option.none<Array<StoredEvent>>()
          events.push(yield* decodeVaultLog(log))
        }
        return Option.some(events)
      })

    /** The writer of one term: runs the steps `decisions.ts` plans, until the lock is lost or a step fails. */
    const writerFor = (ref: VaultRef, f: AccountsFollower, leadership: Leadership) => {
      let tipVerified = false
      let lastConsolidationAt = 0
      let reconcileSkipping = false
      /** The tip at the last complete pruning of this term; none yet prunes at the first follow commit. */
      let prunedAt: number | undefined

      const reconcile = (events: ReadonlyArray<StoredEvent>, toBlock: number, toHash: Hex) =>
        Effect.gen(function* () {
          const inputs: Array<VaultEvent> = []
          for (const e of events) {
            if (!isAccountEvent(e.eventName)) continue
            const decoded = decodeVaultEvent({ ...e })
            if (Either.isLeft(decoded)) return yield* Effect.fail(decoded.left)
            if (decoded.right !== undefined) inputs.push(decoded.right)
          }
          const counted = countedNonces(context, inputs, (id) => f.projection.get(id))
          if (counted.size === 0) return [] as Array<NonceReconciliation>
          const read = yield* Effect.either(
            readChainNonces(chain, config.vault, [...counted.keys()], toBlock)
          )
          if (Either.isLeft(read)) {
            yield* Metric.increment(M.nonceChecksSkipped)
            // A node without the state of old blocks refuses every batch of a long backfill: say it once.
            if (!reconcileSkipping)
              yield* Effect.logWarning(
                "nonce reconciliation skipped: the chain's state at the batch could not be read"
              ).pipe(Effect.annotateLogs({ reason: read.left._tag, block: toBlock }))
            reconcileSkipping = true
            return [] as Array<NonceReconciliation>
          }
          reconcileSkipping = false
          const corrections = nonceCorrections(counted, read.right, { block: toBlock, hash: toHash })
          if (corrections.length > 0) {
            yield* Metric.incrementBy(M.nonceMismatches, corrections.length)
            yield* Effect.logWarning(
              "nonces counted from events disagree with the chain; keeping the chain's"
            ).pipe(Effect.annotateLogs({ accounts: corrections.length, block: toBlock }))
          }
          return corrections
        })

      const commit = (bounds: BatchBounds, events: ReadonlyArray<StoredEvent>) =>
        Effect.gen(function* () {
          const batch = { ...bounds, events }
          const started = Date.now()
          const reconciliations = yield* reconcile(events, batch.toBlock, batch.toHash)
          const reconciled = Date.now()
          const seq = yield* store.append(ref, f.expectedRangeSeq, { ...batch, reconciliations })
          const appended = Date.now()
          yield* Metric.incrementBy(M.eventsIndexed, events.length)
          yield* Metric.increment(M.batchesCommitted)
          yield* sync(f, { ...batch, seq, reconciliations })
          yield* Effect.logDebug("indexed a block range").pipe(
            Effect.annotateLogs({
              from: batch.fromBlock,
              to: batch.toBlock,
              events: events.length,
              reconcile_ms: reconciled - started,
              append_ms: appended - reconciled,
              fold_ms: Date.now() - appended
            })
          )
          yield* consolidate
          return "progressed" as const
        })

      /** Sums up the final part of the coverage in one range, so the store's range list stays short to read. */
      const consolidate = Effect.gen(function* () {
        const plan = planConsolidation({
          startBlock: config.startBlock,
          confirmationDepth: depth,
          coverage: f.coverage,
          rangeCount: f.ranges.size,
          lastConsolidationAt
        })
        if (plan === undefined) return
        lastConsolidationAt = plan.finalBlock
        const [last] = yield* store.storedBlocks(ref, plan.from, plan.to)
        if (last === undefined) return
        yield* store.append(ref, f.expectedRangeSeq, {
          fromBlock: config.startBlock,
          toBlock: last.number,
          toHash: last.hash,
          baseHash: undefined,
          events: [],
          headers: [],
          reconciliations: []
        })
        yield* sync(f)
      })

      /**
       * Deletes headers no reorg walk will read again. Best effort: a failure is logged and
       * counted, never fails the writer, and is retried once the tip has moved another interval.
       */
      const pruneHeaders = Effect.gen(function* () {
        const tip = f.coverage?.block
        const plan = planHeaderPrune({
          startBlock: config.startBlock,
          tip,
          prunedAt,
          interval: headerPruneInterval,
          retention: headerRetention
        })
        if (tip === undefined || plan === undefined) return
        const result = yield* store.pruneHeaders(ref, plan)
        yield* Metric.incrementBy(M.headersPruned, result.deleted)
        prunedAt = prunedAtAfter(prunedAt, tip, result.deleted)
        yield* Effect.logDebug("pruned block headers").pipe(
          Effect.annotateLogs({ deleted: result.deleted, horizon: result.horizon ?? "none" })
        )
      }).pipe(
        Effect.catchAllCause((cause) =>
          Cause.isInterruptedOnly(cause)
            ? Effect.failCause(cause)
            : Effect.gen(function* () {
                prunedAt = f.coverage?.block
                yield* Metric.increment(M.headerPruneFailures)
                yield* Effect.logWarning("pruning block headers failed; indexing goes on").pipe(
                  Effect.annotateLogs({ failure: describeFailure(cause) })
                )
              })
        )
      )

      /** Walks back to the common ancestor (`ReorgWalk`), then records what the walk abandoned. */
      const handleReorg = Effect.gen(function* () {
        const ranges = f.ranges.canonical(f.isCanonical)
        let walk = startReorgWalk({ startBlock: config.startBlock, coverage: f.coverage, ranges })
        for (let read = nextReorgRead(walk); read._tag !== "Done"; read = nextReorgRead(walk)) {
          if (read._tag === "StoredBlocks")
            walk = withStoredBlocks(walk, yield* store.storedBlocks(ref, read.from, read.to))
          else walk = withChainBlock(walk, Option.getOrUndefined(yield* blockAt(read.block.number))?.hash)
        }
        const plan = planReorg(walk, ranges)
        if (plan.ancestor === undefined)
          yield* Effect.logError(
            "reorg reaches below every stored block; indexing again from the start block"
          )
        yield* store.recordReorg(ref, f.expectedRangeSeq, {
          ancestor: plan.ancestor,
          abandoned: plan.abandoned,
          kept: plan.kept
        })
        yield* Metric.increment(M.reorgs)
        yield* Metric.incrementBy(M.orphanedBlocks, plan.abandoned.length)
        yield* Effect.logWarning("reorg: abandoned blocks marked orphaned").pipe(
          Effect.annotateLogs({ orphaned: plan.abandoned.length, ancestor: plan.indexFrom - 1 })
        )
        yield* sync(f)
        tipVerified = true
        return "progressed" as const
      })

      const backfill = (from: number, limit: number) =>
        Effect.gen(function* () {
          yield* setState("backfilling")
          const base = f.coverage?.hash
          // The provider may answer a narrower range than asked: the commit ends where the logs do.
          const { toBlock, logs } = yield* fetcher.fetchSome(from, limit)
          const end = header(yield* chain.getBlock({ blockNumber: BigInt(toBlock) }))
          const events = yield* toStoredEvents(logs, (n) => (n === end.number ? end.hash : undefined))
          if (Option.isNone(events)) return "moved" as const
          return yield* commit(backfillBatch(from, end, base), events.value)
        })

      const follow = (from: number, to: number, head: ChainBlock) =>
        Effect.gen(function* () {
          yield* setState("following")
          const base = f.coverage?.hash
          const blocks = yield* Effect.forEach(
            Array.from({ length: to - from + 1 }, (_, i) => from + i),
            (n) => (BigInt(n) === head.number ? Effect.succeed(Option.some(head)) : blockAt(n)),
            { concurrency: HEADER_CONCURRENCY }
          )
          const headers = blocks.map((b) => (Option.isSome(b) ? header(b.value) : undefined))
          const check = checkFollowHeaders(base, headers)
          if (check === "reorg") return yield* handleReorg
          if (check === "moved") return "moved" as const
          const read = headers as ReadonlyArray<BlockHeader>
          const logs = yield* fetcher.fetchAll(from, to)
          const events = yield* toStoredEvents(logs, (n) => read[n - from]?.hash)
          if (Option.isNone(events)) return "moved" as const
          const outcome = yield* commit(followBatch(read, base), events.value)
          yield* pruneHeaders
          return outcome
        })

      const step = Effect.gen(function* () {
        const head = yield* chain.getBlock()
        const headNumber = Number(head.number)
        yield* setHead(headNumber)
        const state = (tip: TipCheck): StepState => ({
          startBlock: config.startBlock,
          confirmationDepth: depth,
          coverage: f.coverage,
          ranges: f.ranges.canonical(f.isCanonical),
          head: { number: headNumber, hash: head.hash },
          tip
        })
        let plan = planStep(state(tipVerified ? "verified" : "unchecked"))
        if (plan._tag === "VerifyTip") {
          const onChain = yield* blockAt(plan.block)
          plan = planStep(state({ onChain: Option.getOrUndefined(onChain)?.hash }))
          if (plan._tag !== "Reorg") tipVerified = true
        }
        switch (plan._tag) {
          case "Reorg":
            return yield* handleReorg
          case "Idle":
            yield* setState("following")
            return "idle" as const
          case "Backfill":
            return yield* backfill(plan.from, plan.to)
          case "Follow":
            return yield* follow(plan.from, plan.to, head)
          case "VerifyTip":
            // Planned again with the tip's hash: never asks twice.
            return "moved" as const
        }
      }) satisfies Effect.Effect<StepOutcome, unknown, unknown>

      return Effect.gen(function* () {
        yield* sync(f)
        while (true) {
          yield* leadership.check
          const pause = pauseAfter(yield* step, config.pollIntervalMs)
          if (pause > 0) yield* Effect.sleep(Duration.millis(pause))
        }
      })
    }

    /** One term: find the chain, then index as the writer or follow the store as a standby. */
    const term = Effect.scoped(
      Effect.gen(function* () {
        const chainId = yield* resolveChainId
        const ref: VaultRef = { chainId, vault: config.vault }
        if (follower === undefined || follower.options.ref.chainId !== chainId)
          follower = new AccountsFollower({
            ref,
            startBlock: config.startBlock,
            settlementAsset: config.settlementAsset,
            confirmationDepth: depth
          })
        const f = follower
        const leadership = yield* store.leadership(ref)
        while (true) {
          if (yield* leadership.tryAcquire) {
            yield* setLeader(true)
            yield* Effect.logInfo("indexing the vault as the writer")
            return yield* writerFor(ref, f, leadership).pipe(Effect.ensuring(setLeader(false)))
          }
          yield* setState("standby")
          yield* sync(f)
          // Only for the lag in health and metrics: a standby serves from the store with the chain down.
          const head = yield* Effect.option(chain.blockNumber)
          if (Option.isSome(head)) yield* setHead(Number(head.value))
          yield* Effect.sleep(Duration.millis(config.pollIntervalMs))
        }
      })
    )

    const supervised = Effect.zipRight(
      setState("starting"),
      runSupervised("indexer", term, {
        baseDelayMs: config.restartBaseDelayMs,
        maxDelayMs: config.restartMaxDelayMs,
        onRestart: () => Effect.zipRight(Metric.increment(M.restarts), setState("retrying"))
      })
    )

    yield* Effect.forkScoped(supervised)

    const read: IndexerShape["read"] = (fn) =>
      permit.withPermits(1)(
        Effect.sync(() => {
          const snapshot = follower?.snapshot()
          return fn(snapshot && { ...snapshot, accounts: snapshot.projection.accounts })
        })
      )

    return { enabled: true, status: Ref.get(status), read } satisfies IndexerShape
  })
