/**
 * The hint follower over the event store on each database, with ranges and reorgs written
 * directly: launches folded in range by range, a reorg taken back by rewinding (not rebuilding)
 * to the same index a fresh rebuild reaches, and a malformed stored launch counted, not fatal.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { getAddress, type Hex, keccak256, numberToHex, stringToHex } from "viem"
import { TEST_HINT_PRIVATE_KEY } from "../../src/attestor/hints/HintDecryptor.js"
import { HintFollower, rebuildHintIndex } from "../../src/attestor/hints/HintIndex.js"
import {
  encodeBeneficiaryHint,
  type HintPlaintext,
  hintBeneficiaryId,
  hintOpener,
  hintPublicKeyOf,
  makeHint,
  sealHint
} from "../../src/attestor/hints/hintEnvelopes.js"
import {
  type AppendBatch,
  EventStore,
  type EventStoreShape,
  type StoredEvent,
  type VaultRef
} from "../../src/store/EventStore.js"
import { migrate } from "../../src/store/migrations.js"
import { testDatabases } from "../support/database.js"

const START = 10
const PUBLIC = hintPublicKeyOf(TEST_HINT_PRIVATE_KEY)
const opener = hintOpener(TEST_HINT_PRIVATE_KEY)
const PEPPER = new TextEncoder().encode("hint follower test pepper")

const hashOf = (n: number, branch = "a"): Hex => keccak256(stringToHex(`${branch}:${n}`))
const hint = (userId: string): HintPlaintext => makeHint(PEPPER, 3, userId, keccak256(stringToHex(userId)))
const token = (n: number) => getAddress(numberToHex(0x7000 + n, { size: 20 }))

const launched = (n: number, branch: string, logIndex: number, h: HintPlaintext): StoredEvent => ({
  blockNumber: n,
  blockHash: hashOf(n, branch),
  logIndex,
  txHash: keccak256(stringToHex(`tx:${branch}:${n}:${logIndex}`)),
  eventName: "TokenLaunched",
  args: {
    token: token(n * 10 + logIndex),
    beneficiaryId: hintBeneficiaryId(h),
    beneficiaryHint: encodeBeneficiaryHint([sealHint(PUBLIC, h)])
  }
})

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

let vaultCounter = 0
const freshRef = (): VaultRef => ({
  chainId: 41_000 + vaultCounter,
  vault: getAddress(numberToHex(0xfeed00 + vaultCounter++, { size: 20 }))
})

const usersOf = (f: HintFollower) => f.projection.escrows().map((e) => e.hint.userId)

const expectEqualsRebuild = (store: EventStoreShape, ref: VaultRef, live: HintFollower) =>
  Effect.gen(function* () {
    const rebuilt = yield* rebuildHintIndex(store, { ref, startBlock: START }, opener)
    expect(rebuilt.coverage).toEqual(live.coverage)
    expect(rebuilt.projection.escrows()).toEqual(live.projection.escrows())
  })

for (const database of testDatabases()) {
  describe(database.name, () => {
    const stack = EventStore.layer.pipe(
      Layer.provideMerge(Layer.effectDiscard(migrate).pipe(Layer.provideMerge(database.layer)))
    )
    layer(stack, { timeout: 60_000 })((it) => {
      it.effect("folds launches range by range and rewinds a reorg to what a rebuild finds", () =>
        Effect.gen(function* () {
          const store = yield* EventStore
          const ref = freshRef()
          const live = new HintFollower({ ref, startBlock: START })
          let seq = yield* store.append(ref, 0, batch(10, 14, "a", [launched(12, "a", 0, hint("1"))]))
          let outcome = yield* live.sync(store, opener)
          expect(outcome).toMatchObject({ applied: 1, rewound: 0, rebuilt: false, rejected: [] })
          seq = yield* store.append(
            ref,
            seq,
            batch(15, 17, "a", [launched(16, "a", 0, hint("2")), launched(16, "a", 1, hint("1"))])
          )
          outcome = yield* live.sync(store, opener)
          expect(outcome.applied).toBe(2)
          expect(live.coverage).toEqual({ block: 17, hash: hashOf(17) })
          expect(usersOf(live)).toEqual(["1", "2"])
          expect(live.projection.escrowsOf(3, "1")[0]?.launches).toHaveLength(2)

          // Blocks 15..17 are abandoned for branch b, which launches for someone else.
          seq = yield* store.recordReorg(ref, seq, {
            ancestor: { number: 14, hash: hashOf(14) },
            abandoned: [15, 16, 17].map((n) => ({ number: n, hash: hashOf(n) })),
            kept: []
          })
          outcome = yield* live.sync(store, opener)
          expect(outcome).toMatchObject({ applied: 0, rewound: 3, rebuilt: false })
          expect(live.coverage).toEqual({ block: 14, hash: hashOf(14) })
          expect(usersOf(live)).toEqual(["1"])
          expect(live.projection.escrowsOf(3, "1")[0]?.launches).toHaveLength(1)
          yield* expectEqualsRebuild(store, ref, live)

          yield* store.append(ref, seq, batch(15, 18, "b", [launched(17, "b", 0, hint("3"))]))
          outcome = yield* live.sync(store, opener)
          expect(outcome).toMatchObject({ applied: 1, rewound: 0 })
          expect(live.coverage).toEqual({ block: 18, hash: hashOf(18, "b") })
          expect(usersOf(live)).toEqual(["1", "3"])
          expect(live.projection.escrowsOf(3, "2")).toEqual([])
          yield* expectEqualsRebuild(store, ref, live)
        })
      )

      it.effect("counts a malformed stored launch and goes on", () =>
        Effect.gen(function* () {
          const store = yield* EventStore
          const ref = freshRef()
          const live = new HintFollower({ ref, startBlock: START })
          const bad: StoredEvent = { ...launched(11, "a", 0, hint("4")), args: { token: "nope" } }
          const garbage: StoredEvent = {
            ...launched(11, "a", 1, hint("5")),
            args: { token: token(1), beneficiaryId: hashOf(1), beneficiaryHint: "0x00" }
          }
          yield* store.append(ref, 0, batch(10, 12, "a", [bad, garbage, launched(12, "a", 0, hint("6"))]))
          const outcome = yield* live.sync(store, opener)
          expect(outcome.applied).toBe(2)
          expect([...outcome.rejected].sort()).toEqual(["encoding", "event"])
          expect(usersOf(live)).toEqual(["6"])
          yield* expectEqualsRebuild(store, ref, live)
        })
      )
    })
  })
}
