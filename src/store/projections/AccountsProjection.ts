/**
 * The live Accounts projection: the pure fold of `accounts.ts` applied one input at a time, with
 * an undo journal for the unfinalized blocks so a reorg rewinds it without a rebuild. States are
 * immutable, so the journal holds the previous state of each changed id, and readers can tell
 * a changed account by identity.
 *
 * Ids are also grouped in 256 buckets by their first byte, each with a version that changes with
 * any account in it: a reader that keeps something per account (the precomputed response body)
 * redoes only the buckets whose version moved, without scanning every account.
 */
import type { Hex } from "viem"
import { type AccountState, type AccountsContext, applyToAccount, type ProjectionInput } from "./accounts.js"

interface JournalEntry {
  readonly blockNumber: number
  readonly id: Hex
  readonly previous: AccountState | undefined
}

export const ACCOUNT_BUCKETS = 256

/** The bucket of an id: its first byte. */
export const bucketOf = (id: Hex): number => Number.parseInt(id.slice(2, 4), 16)

export interface AccountBucket {
  /** Changes whenever an account of the bucket changes. */
  readonly version: number
  readonly ids: ReadonlySet<Hex>
}

let nextEpoch = 0

export class AccountsProjection {
  /** Tells projections apart: bucket versions compare only within one projection. */
  readonly epoch = ++nextEpoch
  private readonly states = new Map<Hex, AccountState>()
  private readonly bucketIds: Array<Set<Hex>> = Array.from({ length: ACCOUNT_BUCKETS }, () => new Set())
  private readonly bucketVersions: Array<number> = new Array(ACCOUNT_BUCKETS).fill(0)
  private journal: Array<JournalEntry> = []
  /** Inputs of blocks from here on are journaled; a rewind below `journalFrom - 1` needs a rebuild. */
  private journalFrom = 0
  private contentVersion = 0

  constructor(private readonly context: AccountsContext) {}

  get accounts(): ReadonlyMap<Hex, AccountState> {
    return this.states
  }

  /** Changes whenever any account changes. */
  get version(): number {
    return this.contentVersion
  }

  get(id: Hex): AccountState | undefined {
    return this.states.get(id)
  }

  bucket(index: number): AccountBucket {
    return { version: this.bucketVersions[index] ?? 0, ids: this.bucketIds[index] ?? new Set() }
  }

  private put(id: Hex, next: AccountState | undefined): void {
    const b = bucketOf(id)
    if (next === undefined) {
      this.states.delete(id)
      this.bucketIds[b]?.delete(id)
    } else {
      if (!this.states.has(id)) this.bucketIds[b]?.add(id)
      this.states.set(id, next)
    }
    this.bucketVersions[b] = (this.bucketVersions[b] ?? 0) + 1
    this.contentVersion++
  }

  /** Applies one input; inputs of unfinalized blocks keep what they replaced so `rewind` can take them back. */
  apply(input: ProjectionInput): void {
    const previous = this.states.get(input.id)
    // The chain's nonces mean nothing for an id no event has mentioned.
    if (previous === undefined && input.name === "NonceReconciled") return
    const next = applyToAccount(this.context, previous, input)
    if (next === previous) return
    if (input.blockNumber >= this.journalFrom)
      this.journal.push({ blockNumber: input.blockNumber, id: input.id, previous })
    this.put(input.id, next)
  }

  /** Whether the journal reaches back far enough to rewind to `block`. */
  canRewindTo(block: number): boolean {
    return block + 1 >= this.journalFrom
  }

  /** Takes back every input of blocks above `block`; false (and nothing done) when the journal is too short. */
  rewind(block: number): boolean {
    if (!this.canRewindTo(block)) return false
    while (this.journal.length > 0) {
      const last = this.journal[this.journal.length - 1] as JournalEntry
      if (last.blockNumber <= block) break
      this.journal.pop()
      this.put(last.id, last.previous)
    }
    return true
  }

  /** Inputs of blocks up to `block` can no longer be taken back; their journal entries go. */
  finalize(block: number): void {
    if (block + 1 <= this.journalFrom) return
    this.journalFrom = block + 1
    let keep = 0
    while (keep < this.journal.length && (this.journal[keep] as JournalEntry).blockNumber <= block) keep++
    if (keep > 0) this.journal = this.journal.slice(keep)
  }

  /** Back to no accounts at all; inputs from `journalFrom` on will be journaled. */
  reset(journalFrom: number): void {
    if (this.states.size > 0) {
      this.states.clear()
      for (let b = 0; b < ACCOUNT_BUCKETS; b++) {
        this.bucketIds[b]?.clear()
        this.bucketVersions[b] = (this.bucketVersions[b] ?? 0) + 1
      }
      this.contentVersion++
    }
    this.journal = []
    this.journalFrom = journalFrom
  }
}
