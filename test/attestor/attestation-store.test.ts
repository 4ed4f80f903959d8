/**
 * The attestor's attestation records (src/attestor/AttestationStore.ts, migration 0021) on each
 * test database: recording (idempotent, a revoked attestation stays revoked when issued again),
 * the visibilities a stealth owner was attested for, and a contest's revocation of every other
 * owner's attestations of one id.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { type Address, getAddress, type Hex, keccak256, numberToHex } from "viem"
import { makeAttestationStore } from "../../src/attestor/AttestationStore.js"
import { migrate } from "../../src/store/migrations.js"
import { testDatabases } from "../support/database.js"

let counter = 0
const newId = (): Hex => keccak256(numberToHex(++counter))
const newOwner = (): Address => getAddress(numberToHex(0xa11ce000 + ++counter, { size: 20 }))

const withMigrations = (database: ReturnType<typeof testDatabases>[number]) =>
  Layer.effectDiscard(migrate).pipe(Layer.provideMerge(database.layer))

for (const database of testDatabases()) {
  describe(`AttestationStore on ${database.name}`, () => {
    layer(withMigrations(database), { timeout: 60_000 })((it) => {
      it.effect("records attestations once each, by id, owner, bind nonce and deadline", () =>
        Effect.gen(function* () {
          const store = yield* makeAttestationStore
          const id = newId()
          const owner = newOwner()
          const a = {
            id,
            newOwner: owner,
            bindNonce: 1n,
            deadline: 1_700_000_400n,
            visibility: "private" as const
          }
          yield* store.record([a, { ...a, deadline: 1_700_001_000n }], 1_700_000_000)
          yield* store.record([a], 1_700_000_100)
          expect(yield* store.ofId(id)).toEqual([
            {
              ...a,
              id: id.toLowerCase(),
              newOwner: owner.toLowerCase(),
              revoked: false,
              issuedAt: 1_700_000_000
            },
            {
              ...a,
              id: id.toLowerCase(),
              newOwner: owner.toLowerCase(),
              deadline: 1_700_001_000n,
              revoked: false,
              issuedAt: 1_700_000_000
            }
          ])
          // Ids and owners match whatever their case.
          expect(yield* store.ofId(id.toUpperCase().replace("0X", "0x") as Hex)).toHaveLength(2)
          expect(yield* store.record([], 1)).toBeUndefined()
        })
      )

      it.effect("tells the visibilities a stealth owner was attested for", () =>
        Effect.gen(function* () {
          const store = yield* makeAttestationStore
          const owner = newOwner()
          expect([...(yield* store.visibilitiesOf(owner))]).toEqual([])
          yield* store.record(
            [{ id: newId(), newOwner: owner, bindNonce: 0n, deadline: 1n, visibility: "public" }],
            1
          )
          expect([...(yield* store.visibilitiesOf(owner.toLowerCase() as Address))]).toEqual(["public"])
          expect([...(yield* store.visibilitiesOf(newOwner()))]).toEqual([])
        })
      )

      it.effect(
        "an owner recorded for one visibility is refused for the other, and nothing of it is kept",
        () =>
          Effect.gen(function* () {
            const store = yield* makeAttestationStore
            const owner = newOwner()
            const id = newId()
            const other = newId()
            yield* store.record(
              [{ id, newOwner: owner, bindNonce: 0n, deadline: 1n, visibility: "private" }],
              1
            )
            const refused = yield* Effect.flip(
              store.record(
                [
                  { id: other, newOwner: owner, bindNonce: 0n, deadline: 1n, visibility: "public" },
                  { id, newOwner: owner, bindNonce: 1n, deadline: 1n, visibility: "public" }
                ],
                2
              )
            )
            expect(refused._tag).toBe("VisibilityConflict")
            expect(yield* store.ofId(other)).toEqual([])
            expect(yield* store.ofId(id)).toHaveLength(1)
            // The owner's case does not make it another owner.
            const again = yield* Effect.flip(
              store.record(
                [
                  {
                    id: other,
                    newOwner: owner.toLowerCase() as Address,
                    bindNonce: 0n,
                    deadline: 1n,
                    visibility: "public"
                  }
                ],
                3
              )
            )
            expect(again._tag).toBe("VisibilityConflict")
            // The same kind is still recorded.
            yield* store.record(
              [{ id: other, newOwner: owner, bindNonce: 0n, deadline: 1n, visibility: "private" }],
              4
            )
            expect(yield* store.ofId(other)).toHaveLength(1)
          })
      )

      it.effect(
        "concurrent records of one owner for the two visibilities: exactly one kind is ever kept",
        () =>
          Effect.gen(function* () {
            const store = yield* makeAttestationStore
            for (let round = 0; round < 10; round++) {
              const owner = newOwner()
              const attempts = Array.from({ length: 6 }, (_, i) => {
                const visibility = i % 2 === 0 ? ("public" as const) : ("private" as const)
                return store
                  .record(
                    [{ id: newId(), newOwner: owner, bindNonce: 0n, deadline: BigInt(i), visibility }],
                    1
                  )
                  .pipe(
                    Effect.as(visibility),
                    Effect.catchTag("VisibilityConflict", () => Effect.succeed("refused" as const))
                  )
              })
              const outcomes = yield* Effect.all(attempts, { concurrency: "unbounded" })
              const kept = new Set(outcomes.filter((o) => o !== "refused"))
              expect(kept.size).toBe(1)
              expect(outcomes.filter((o) => o === "refused")).toHaveLength(3)
              expect([...(yield* store.visibilitiesOf(owner))]).toEqual([...kept])
            }
          })
      )

      it.effect("a contest revokes every other owner's attestations of the id, and they stay revoked", () =>
        Effect.gen(function* () {
          const store = yield* makeAttestationStore
          const id = newId()
          const other = newId()
          const [mine, intruder, third] = [newOwner(), newOwner(), newOwner()]
          const at = (newOwner: Address, onId = id) => ({
            id: onId,
            newOwner,
            bindNonce: 0n,
            deadline: 5n,
            visibility: "private" as const
          })
          yield* store.record([at(mine), at(intruder), at(third), at(intruder, other)], 1)
          expect(yield* store.revokeOthers(id, mine)).toBe(2)
          expect(yield* store.revokeOthers(id, mine)).toBe(0)
          const revoked = new Map((yield* store.ofId(id)).map((r) => [r.newOwner, r.revoked]))
          expect(revoked).toEqual(
            new Map([
              [mine.toLowerCase(), false],
              [intruder.toLowerCase(), true],
              [third.toLowerCase(), true]
            ])
          )
          // Another id is untouched; issuing a revoked attestation again does not revive it.
          expect((yield* store.ofId(other)).map((r) => r.revoked)).toEqual([false])
          yield* store.record([at(intruder)], 2)
          expect((yield* store.ofId(id)).find((r) => r.newOwner === intruder.toLowerCase())?.revoked).toBe(
            true
          )
        })
      )
    })
  })
}
