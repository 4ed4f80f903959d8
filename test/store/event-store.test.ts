/**
 * The event store on each database: idempotent appends, writer conflicts, orphan markers hiding
 * abandoned blocks (and a later marker bringing one back), ranges surviving a reorg up to the
 * ancestor, nonce corrections, the single-writer lock, and the projection follower rewinding with
 * its journal to the same state a fresh rebuild reaches.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Either, Exit, Layer, Scope } from "effect"
import { getAddress, type Hex, keccak256, numberToHex, stringToHex } from "viem"
import { ProjectionFollower } from "../../src/indexer/follower.js"
import {
  type AppendBatch,
  EventStore,
  eventStoreLayer,
  type StoredEvent,
  type VaultRef
} from "../../src/store/EventStore.js"
import { migrate } from "../../src/store/migrations.js"
import { testDatabases } from "../support/database.js"

const USDT = getAddress(numberToHex(0x1001, { size: 20 }))
const START = 10

/** Block `n` of a branch: branches differ in every hash. */
const hashOf = (n: number, branch = "a"): Hex => keccak256(stringToHex(`${branch}:${n}`))
const idOf = (n: number): Hex => keccak256(numberToHex(n, { size: 32 }))

const deposit = (
  n: number,
  branch: string,
  logIndex: number,
  account: number,
  amount: bigint
): StoredEvent => ({
  blockNumber: n,
  blockHash: hashOf(n, branch),
  logIndex,
  txHash: keccak256(stringToHex(`tx:${branch}:${n}:${logIndex}`)),
  eventName: "Deposited",
  args: { id: idOf(account), asset: USDT, from: USDT, amount: amount.toString() }
})

const registration = (n: number, branch: string, logIndex: number, account: number): StoredEvent => ({
  blockNumber: n,
  blockHash: hashOf(n, branch),
  logIndex,
  txHash: keccak256(stringToHex(`tx:${branch}:${n}:${logIndex}`)),
  eventName: "Registered",
  args: {
    id: idOf(account),
    kind: 1,
    owner: USDT,
    commitment: idOf(account + 1000),
    fallbackRecipient: "0x0000000000000000000000000000000000000000",
    fallbackDelay: "0"
  }
})

/** A batch of blocks `from..to` of `branch` with headers for each and the given events. */
const batch = (from: number, to: number, branch: string, events: StoredEvent[] = []): AppendBatch => ({
  fromBlock: from,
  toBlock: to,
  toHash: hashOf(to, branch),
  baseHash: from === START ? undefined : hashOf(from - 1, "a"),
  events,
  headers: Array.from({ length: to - from + 1 }, (_, i) => ({
    number: from + i,
    hash: hashOf(from + i, branch),
    parentHash: hashOf(from + i - 1, from + i - 1 < 15 ? "a" : branch)
  })),
  reconciliations: []
})

const follower = (ref: VaultRef, confirmationDepth = 64) =>
  new ProjectionFollower({ ref, startBlock: START, settlementAsset: USDT, confirmationDepth })

const accountsOf = (f: ProjectionFollower) => new Map(f.projection.accounts)

let vaultCounter = 0
/** Each test indexes its own vault, so tests sharing a database do not see each other. */
const freshRef = (): VaultRef => ({
  chainId: 31337 + vaultCounter,
  vault: getAddress(numberToHex(0xbeef00 + vaultCounter++, { size: 20 }))
})

for (const database of testDatabases()) {
  describe(database.name, () => {
    const stack = eventStoreLayer.pipe(
      Layer.provideMerge(Layer.effectDiscard(migrate).pipe(Layer.provideMerge(database.layer)))
    )
    layer(stack, { timeout: 60_000 })((it) => {
      it.effect("appends idempotently and refuses a writer whose view is stale", () =>
        Effect.gen(function* () {
          const store = yield* EventStore
          const ref = freshRef()
          const events = [registration(10, "a", 0, 1), deposit(11, "a", 0, 1, 5n), deposit(11, "a", 1, 1, 6n)]
          const seq = yield* store.append(ref, 0, batch(10, 11, "a", events))
          // The same batch again from a writer that saw nothing: a conflict, not a duplicate.
          const stale = yield* Effect.either(store.append(ref, 0, batch(10, 11, "a", events)))
          expect(Either.isLeft(stale) && stale.left._tag).toBe("WriterConflict")
          // The same logs again in a later, overlapping batch: stored once.
          yield* store.append(ref, seq, { ...batch(12, 12, "a", [...events]), fromBlock: 12 })
          const stored: StoredEvent[] = []
          yield* store.canonicalEvents(ref, START, 12, (page) => Effect.sync(() => stored.push(...page)))
          expect(stored.map((e) => [e.blockNumber, e.logIndex])).toEqual([
            [10, 0],
            [11, 0],
            [11, 1]
          ])
          expect(stored[1]?.args).toEqual(events[1]?.args)
        })
      )

      it.effect("hides orphaned blocks, keeps ranges up to the ancestor, and rewinds the projection", () =>
        Effect.gen(function* () {
          const store = yield* EventStore
          const ref = freshRef()
          const live = follower(ref)
          let seq = yield* store.append(
            ref,
            0,
            batch(10, 14, "a", [registration(12, "a", 0, 1), deposit(14, "a", 0, 1, 1n)])
          )
          seq = yield* store.append(
            ref,
            seq,
            batch(15, 17, "a", [deposit(16, "a", 0, 1, 10n), registration(17, "a", 0, 2)])
          )
          yield* live.sync(store)
          expect(live.coverage).toEqual({ block: 17, hash: hashOf(17) })
          expect(accountsOf(live).get(idOf(1))?.balances[USDT]).toBe(11n)

          // Blocks 15..17 of branch a are abandoned; 14 is the common ancestor.
          seq = yield* store.recordReorg(ref, seq, {
            ancestor: { number: 14, hash: hashOf(14) },
            abandoned: [15, 16, 17].map((n) => ({ number: n, hash: hashOf(n) })),
            kept: live.ranges.keptUpTo({ number: 14, hash: hashOf(14) }, live.isCanonical)
          })
          const rewound = yield* live.sync(store)
          expect(rewound).toMatchObject({ rewound: 3, rebuilt: false })
          expect(live.coverage).toEqual({ block: 14, hash: hashOf(14) })
          expect(accountsOf(live).get(idOf(1))?.balances[USDT]).toBe(1n)
          expect(accountsOf(live).has(idOf(2))).toBe(false)

          // Branch b at the same heights.
          seq = yield* store.append(ref, seq, {
            ...batch(15, 17, "b", [deposit(15, "b", 0, 1, 100n)]),
            baseHash: hashOf(14)
          })
          yield* live.sync(store)
          expect(live.coverage).toEqual({ block: 17, hash: hashOf(17, "b") })
          expect(accountsOf(live).get(idOf(1))?.balances[USDT]).toBe(101n)

          // A fresh rebuild reaches the same state.
          const fresh = follower(ref)
          yield* fresh.sync(store)
          expect(fresh.coverage).toEqual(live.coverage)
          expect(accountsOf(fresh)).toEqual(accountsOf(live))

          // The chain flips back to branch a: b is orphaned, a's blocks come back when seen again.
          seq = yield* store.recordReorg(ref, seq, {
            ancestor: { number: 14, hash: hashOf(14) },
            abandoned: [15, 16, 17].map((n) => ({ number: n, hash: hashOf(n, "b") })),
            kept: live.ranges.keptUpTo({ number: 14, hash: hashOf(14) }, live.isCanonical)
          })
          yield* store.append(
            ref,
            seq,
            batch(15, 17, "a", [deposit(16, "a", 0, 1, 10n), registration(17, "a", 0, 2)])
          )
          yield* live.sync(store)
          expect(live.coverage).toEqual({ block: 17, hash: hashOf(17) })
          expect(accountsOf(live).get(idOf(1))?.balances[USDT]).toBe(11n)
          expect(accountsOf(live).has(idOf(2))).toBe(true)
          const again = follower(ref)
          yield* again.sync(store)
          expect(accountsOf(again)).toEqual(accountsOf(live))
        })
      )

      it.effect("rebuilds from the start when a reorg reaches below the undo journal", () =>
        Effect.gen(function* () {
          const store = yield* EventStore
          const ref = freshRef()
          const live = follower(ref, 2)
          let seq = yield* store.append(
            ref,
            0,
            batch(10, 20, "a", [registration(11, "a", 0, 1), deposit(12, "a", 0, 1, 3n)])
          )
          yield* live.sync(store)
          seq = yield* store.recordReorg(ref, seq, {
            ancestor: { number: 11, hash: hashOf(11) },
            abandoned: Array.from({ length: 9 }, (_, i) => ({ number: 12 + i, hash: hashOf(12 + i) })),
            kept: live.ranges.keptUpTo({ number: 11, hash: hashOf(11) }, live.isCanonical)
          })
          const outcome = yield* live.sync(store)
          expect(outcome.rebuilt).toBe(true)
          expect(live.coverage).toEqual({ block: 11, hash: hashOf(11) })
          expect(accountsOf(live).get(idOf(1))?.balances).toEqual({})
          void seq
        })
      )

      it.effect("applies nonce corrections after the events of their block", () =>
        Effect.gen(function* () {
          const store = yield* EventStore
          const ref = freshRef()
          yield* store.append(ref, 0, {
            ...batch(10, 12, "a", [registration(11, "a", 0, 1)]),
            reconciliations: [
              { blockNumber: 12, blockHash: hashOf(12), id: idOf(1), nonce: 7n, bindNonce: 2n }
            ]
          })
          const f = follower(ref)
          yield* f.sync(store)
          expect(accountsOf(f).get(idOf(1))).toMatchObject({ nonce: 7n, bindNonce: 2n })
        })
      )

      it.effect("loads only the ranges that matter after a summing range", () =>
        Effect.gen(function* () {
          const store = yield* EventStore
          const ref = freshRef()
          let seq = 0
          for (let n = START; n < START + 20; n++)
            seq = yield* store.append(ref, seq, {
              ...batch(n, n, "a", [deposit(n, "a", 0, 1, 1n)]),
              baseHash: n === START ? undefined : hashOf(n - 1)
            })
          seq = yield* store.append(ref, seq, {
            ...batch(START, START + 15, "a"),
            headers: [],
            baseHash: undefined
          })
          const progress = yield* store.progress(ref, { rangeSeq: 0, markerSeq: 0, startBlock: START })
          // The summing range and the four beyond it.
          expect(progress.ranges.map((r) => [r.fromBlock, r.toBlock])).toEqual([
            [26, 26],
            [27, 27],
            [28, 28],
            [29, 29],
            [10, 25]
          ])
          const f = follower(ref)
          yield* f.sync(store)
          expect(f.coverage?.block).toBe(29)
          expect(accountsOf(f).get(idOf(1))?.balances[USDT]).toBe(20n)
          void seq
        })
      )

      it.effect("gives the indexing lock to one holder at a time", () =>
        Effect.gen(function* () {
          const store = yield* EventStore
          const ref = freshRef()
          const first = yield* Scope.make()
          const a = yield* Scope.extend(store.leadership(ref), first)
          expect(yield* a.tryAcquire).toBe(true)
          yield* a.check
          // PostgreSQL: a session advisory lock. Embedded: PGlite has one session behind every
          // connection, so the election is decided in-process among leaderships of one client.
          const b = yield* store.leadership(ref)
          expect(yield* b.tryAcquire).toBe(false)
          // Another vault's lock is independent.
          const other = yield* store.leadership(freshRef())
          expect(yield* other.tryAcquire).toBe(true)
          // The holder keeps it until its scope closes; then the other candidate takes over.
          expect(yield* a.tryAcquire).toBe(true)
          expect(yield* b.tryAcquire).toBe(false)
          yield* Scope.close(first, Exit.void)
          expect(yield* b.tryAcquire).toBe(true)
          expect(yield* b.tryAcquire).toBe(true)
          yield* b.check
          // And a third candidate now loses to the second.
          const c = yield* store.leadership(ref)
          expect(yield* c.tryAcquire).toBe(false)
        }).pipe(Effect.scoped)
      )
    })
  })
}
