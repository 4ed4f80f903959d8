/**
 * The event store on each database: idempotent appends, writer conflicts, orphan markers hiding
 * abandoned blocks (and a later marker bringing one back), ranges surviving a reorg up to the
 * ancestor, nonce corrections, the single-writer lock, and the projection follower rewinding with
 * its journal to the same state a fresh rebuild reaches, and header pruning below the horizon of
 * every vault of the chain.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Either, Exit, Layer, Scope } from "effect"
import { getAddress, type Hex, keccak256, numberToHex, stringToHex } from "viem"
import { AccountsFollower } from "../../src/indexer/AccountsFollower.js"
import { type AppendBatch, EventStore, type StoredEvent, type VaultRef } from "../../src/store/EventStore.js"
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
  new AccountsFollower({ ref, startBlock: START, settlementAsset: USDT, confirmationDepth })

const accountsOf = (f: AccountsFollower) => new Map(f.projection.accounts)

let vaultCounter = 0
/** Each test indexes its own vault, so tests sharing a database do not see each other. */
const freshRef = (): VaultRef => ({
  chainId: 31337 + vaultCounter,
  vault: getAddress(numberToHex(0xbeef00 + vaultCounter++, { size: 20 }))
})

for (const database of testDatabases()) {
  describe(database.name, () => {
    const stack = EventStore.layer.pipe(
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
          // The first sync reads the store up from the start block: a replay (src/background/collectGarbage.ts).
          expect(yield* live.sync(store)).toMatchObject({ applied: 4, replayed: true })
          expect(live.coverage).toEqual({ block: 17, hash: hashOf(17) })
          expect(accountsOf(live).get(idOf(1))?.balances[USDT]).toBe(11n)

          // Blocks 15..17 of branch a are abandoned; 14 is the common ancestor.
          seq = yield* store.recordReorg(ref, seq, {
            ancestor: { number: 14, hash: hashOf(14) },
            abandoned: [15, 16, 17].map((n) => ({ number: n, hash: hashOf(n) })),
            kept: live.ranges.keptUpTo({ number: 14, hash: hashOf(14) }, live.isCanonical)
          })
          const rewound = yield* live.sync(store)
          expect(rewound).toMatchObject({ rewound: 3, rebuilt: false, replayed: false })
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
          expect(outcome).toMatchObject({ rebuilt: true, replayed: true })
          expect(live.coverage).toEqual({ block: 11, hash: hashOf(11) })
          expect(accountsOf(live).get(idOf(1))?.balances).toEqual({})
          void seq
        })
      )

      it.effect("counts as a replay only a sync that reads the store up from the start block", () =>
        Effect.gen(function* () {
          const store = yield* EventStore
          const ref = freshRef()

          // A writer on an empty store: its first commit, folded in from memory, is no replay
          // (no collection after it), though the projection starts from the start block.
          const writer = follower(ref)
          expect(yield* writer.sync(store)).toMatchObject({ applied: 0, replayed: false })
          const first = batch(10, 12, "a", [registration(11, "a", 0, 1)])
          let seq = yield* store.append(ref, 0, first)
          expect(yield* writer.sync(store, { ...first, seq })).toMatchObject({ applied: 1, replayed: false })

          // A process starting over that store reads it up from the start block: a replay.
          const restarted = follower(ref)
          expect(yield* restarted.sync(store)).toMatchObject({ applied: 1, replayed: true })

          // Later blocks read from the store past its coverage: not a replay.
          seq = yield* store.append(ref, seq, batch(13, 14, "a", [deposit(14, "a", 0, 1, 5n)]))
          expect(yield* restarted.sync(store)).toMatchObject({ applied: 1, replayed: false })
          expect(accountsOf(restarted).get(idOf(1))?.balances[USDT]).toBe(5n)
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

      it.effect("prunes headers below the horizon of every vault of the chain, nothing else", () =>
        Effect.gen(function* () {
          const store = yield* EventStore
          const sql = yield* SqlClient
          const ref = freshRef()
          const headerNumbers = (chainId = ref.chainId) =>
            Effect.map(
              sql<{ number: string }>`
                SELECT number FROM block_headers WHERE chain_id = ${chainId} ORDER BY number`,
              (rows) => rows.map((r) => Number(r.number))
            )
          const eventBlocks = (r: VaultRef) =>
            Effect.gen(function* () {
              const stored: StoredEvent[] = []
              yield* store.canonicalEvents(r, START, 1_000, (page) => Effect.sync(() => stored.push(...page)))
              return stored.map((e) => e.blockNumber)
            })
          const blocks = (from: number, to: number) =>
            Array.from({ length: to - from + 1 }, (_, i) => from + i)
          /** Blocks `from..to` of branch a in batches of ten, a deposit in each batch's first block. */
          const appendTo = (r: VaultRef, seq: number, from: number, to: number) =>
            Effect.gen(function* () {
              for (let n = from; n <= to; n += 10) {
                seq = yield* store.append(r, seq, {
                  ...batch(n, Math.min(n + 9, to), "a", [deposit(n, "a", 0, 1, 1n)]),
                  baseHash: n === START ? undefined : hashOf(n - 1)
                })
              }
              return seq
            })

          // One vault with headers of blocks 10..109, indexed in ten ranges; another chain's too.
          let seq = yield* appendTo(ref, 0, START, 109)
          expect(yield* headerNumbers()).toEqual(blocks(10, 109))
          const otherChain = freshRef()
          yield* appendTo(otherChain, 0, START, 29)
          const before = yield* store.progress(ref, { rangeSeq: 0, markerSeq: 0, startBlock: START })

          // Lowest heights first, whole heights (14 has a header of another branch), until `limit`
          // are gone; then everything below the horizon.
          yield* sql`
            INSERT INTO block_headers (chain_id, number, hash, parent_hash)
            VALUES (${ref.chainId}, 14, ${hashOf(14, "b")}, ${hashOf(13)})`
          const first = yield* store.pruneHeaders(ref, { keepFromBlock: 79, window: 30, limit: 5 })
          expect(first).toEqual({ horizon: 79, deleted: 6 })
          expect((yield* headerNumbers())[0]).toBe(15)
          const rest = yield* store.pruneHeaders(ref, { keepFromBlock: 79, window: 30, limit: 1_000 })
          expect(rest).toEqual({ horizon: 79, deleted: 64 })
          expect(yield* headerNumbers()).toEqual(blocks(79, 109))

          // The caller's bound is a ceiling: the store's tip minus the window may be lower.
          const capped = yield* store.pruneHeaders(ref, { keepFromBlock: 100, window: 40, limit: 1_000 })
          expect(capped).toEqual({ horizon: 69, deleted: 0 })

          // Events, ranges and markers stay; event blocks and range ends still serve a reorg walk.
          expect(yield* eventBlocks(ref)).toEqual([10, 20, 30, 40, 50, 60, 70, 80, 90, 100])
          expect(yield* store.progress(ref, { rangeSeq: 0, markerSeq: 0, startBlock: START })).toEqual(before)
          const walk = yield* store.storedBlocks(ref, 30, 80)
          expect(walk.map((b) => b.number)).toEqual([80, 79, 70, 69, 60, 59, 50, 49, 40, 39, 30])

          // A second vault of the chain lags at block 60 (one range): the horizon follows it.
          const lagging: VaultRef = { chainId: ref.chainId, vault: freshRef().vault }
          const laggingSeq = yield* store.append(lagging, 0, {
            ...batch(START, 60, "a", [deposit(START, "a", 1, 2, 1n), deposit(60, "a", 1, 2, 1n)]),
            baseHash: undefined
          })
          seq = yield* appendTo(ref, seq, 110, 159)
          const held = yield* store.pruneHeaders(ref, { keepFromBlock: 129, window: 30, limit: 1_000 })
          expect(held).toEqual({ horizon: 30, deleted: 20 })
          expect(yield* headerNumbers()).toEqual([...blocks(30, 60), ...blocks(79, 159)])
          expect(yield* eventBlocks(lagging)).toEqual([10, 60])
          expect(yield* eventBlocks(ref)).toEqual(blocks(1, 15).map((i) => 10 * i))
          expect(yield* headerNumbers(otherChain.chainId)).toEqual(blocks(10, 29))

          // A vault whose tip is unknown (its ranges orphaned) holds every header back.
          yield* store.recordReorg(lagging, laggingSeq, {
            ancestor: undefined,
            abandoned: [{ number: 60, hash: hashOf(60) }],
            kept: []
          })
          const unknown = yield* store.pruneHeaders(ref, { keepFromBlock: 129, window: 0, limit: 1_000 })
          expect(unknown).toEqual({ horizon: undefined, deleted: 0 })
          expect((yield* headerNumbers())[0]).toBe(30)
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
