/**
 * The Accounts projection plugged into the store's follower (`follower.ts`): the live projection
 * the vault indexer serves, equal to the fold of the store's canonical events and nonce
 * corrections up to the coverage. The writer syncs it after each commit and a replica that does
 * not index on every poll; both read the same store, so both serve the same accounts.
 *
 * It folds inside the follower's consistent read, page by page (a start-up replay does not hold
 * every event in memory); the indexer's permit keeps readers out meanwhile. A reorg is taken back
 * with the projection's undo journal; one deeper than the journal (the confirmation depth) starts
 * over from the start block. The writer's own commit, when it is exactly what changed in the
 * store, is folded in from memory: its events are then precisely the store's canonical events of
 * that range.
 */
import { Effect, Either } from "effect"
import type { Address } from "viem"
import type {
  EventStoreError,
  EventStoreShape,
  NonceReconciliation,
  StoredEvent
} from "../store/EventStore.js"
import { AccountsProjection } from "../store/projections/AccountsProjection.js"
import type { NonceReconciled } from "../store/projections/accounts.js"
import { decodeVaultEvent, type MalformedEvent } from "../store/projections/vaultEvents.js"
import {
  type Committed,
  type FollowedProjection,
  StoreFollower,
  type StoreFollowerOptions,
  type SyncCounts
} from "./follower.js"
import type { Coverage } from "./ranges.js"

export interface FollowerOptions extends StoreFollowerOptions {
  readonly settlementAsset: Address
  /** How many blocks below the coverage a reorg may still reach (the journal's depth). */
  readonly confirmationDepth: number
}

export interface SyncOutcome extends SyncCounts {
  /** Events folded in by this sync. */
  readonly applied: number
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

class FollowedAccounts
  implements
    FollowedProjection<
      AccountsProjection,
      Committed | undefined,
      { readonly applied: number },
      MalformedEvent
    >
{
  readonly model: AccountsProjection
  /** False from the first change of a fold until its end. */
  intact = true

  constructor(private readonly options: FollowerOptions) {
    this.model = new AccountsProjection({ settlementAsset: options.settlementAsset })
  }

  get version(): number {
    return this.model.version
  }

  canRewindTo(block: number): boolean {
    return this.model.canRewindTo(block)
  }

  committedIn(input: Committed | undefined): Committed | undefined {
    return input
  }

  read: FollowedProjection<
    AccountsProjection,
    Committed | undefined,
    { readonly applied: number },
    MalformedEvent
  >["read"] = (store, ref, plan, committed) =>
    Effect.suspend(() => {
      const { startBlock, confirmationDepth } = this.options
      const target = plan.target
      if (plan.startOver || plan.rewindTo !== undefined) this.intact = false
      if (target === undefined) {
        if (plan.startOver) this.model.reset(0)
        this.intact = true
        return Effect.succeed(Effect.succeed(() => ({ applied: 0 })))
      }
      if (plan.fromScratch) this.model.reset(Math.max(startBlock, target.block - confirmationDepth + 1))
      else if (plan.rewindTo !== undefined) this.model.rewind(plan.rewindTo)
      const folding =
        plan.ownCommit && committed !== undefined
          ? this.applyInputs(committed.events, committed.reconciliations.map(toReconciled))
          : this.apply(store, ref, plan.from, target)
      return folding.pipe(
        Effect.map((applied) => {
          this.intact = true
          return Effect.succeed(() => {
            this.model.finalize(target.block - confirmationDepth)
            return { applied }
          })
        })
      )
    })

  /** Folds the canonical events and nonce corrections of `from..target.block` in, reading them from the store. */
  private apply(
    store: EventStoreShape,
    ref: StoreFollowerOptions["ref"],
    from: number,
    target: Coverage
  ): Effect.Effect<number, EventStoreError | MalformedEvent> {
    if (target.block < from) return Effect.succeed(0)
    return Effect.gen(this, function* () {
      const corrections = (yield* store.reconciliations(ref, from, target.block)).map(toReconciled)
      const fold = this.folder(corrections)
      this.intact = false
      yield* store.canonicalEvents(ref, from, target.block, (page) => Effect.suspend(() => fold.events(page)))
      fold.finish()
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
      this.intact = false
      return fold.events(ordered).pipe(
        Effect.map(() => {
          fold.finish()
          return fold.applied()
        })
      )
    })
  }

  private folder(corrections: ReadonlyArray<NonceReconciled>) {
    let nextCorrection = 0
    let applied = 0
    const projection = this.model
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

/** The store's follower with the Accounts projection plugged in. */
export class AccountsFollower extends StoreFollower<
  AccountsProjection,
  Committed | undefined,
  { readonly applied: number },
  MalformedEvent
> {
  constructor(options: FollowerOptions) {
    super({ ref: options.ref, startBlock: options.startBlock }, new FollowedAccounts(options))
  }
}

/** The projection rebuilt from scratch from the store: a fresh follower brought up to its coverage. */
export const rebuildProjection = (
  store: EventStoreShape,
  options: FollowerOptions
): Effect.Effect<AccountsFollower, EventStoreError | MalformedEvent> =>
  Effect.suspend(() => {
    const follower = new AccountsFollower(options)
    return Effect.as(follower.sync(store), follower)
  })
