/**
 * The attestor's attestation records (src/attestor/binds/AttestationStore.ts, migration 0021) on each
 * test database: recording (idempotent, a revoked attestation stays revoked when issued again),
 * the visibilities a stealth owner was attested for, and contests (migration 0028): a contest
 * rules out every other owner attested for the id and the pending one, revokes their
 * attestations, and from then on a record of a contested (id, owner) is refused, also when the
 * contest and the record race on separate connections, also when the contest sees no pending
 * owner. A contest covers every escrow of the user the attestor knows. Contests made before
 * migration 0028 (revoked attestations) are migrated to contested pairs.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { type Address, getAddress, type Hex, keccak256, numberToHex } from "viem"
import { makeAttestationStore } from "../../src/attestor/binds/AttestationStore.js"
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
          expect(yield* store.record([], 1)).toEqual([])
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

      it.effect(
        "a contest rules out every other owner attested for the id and the pending one, and revokes them; records of them are refused from then on",
        () =>
          Effect.gen(function* () {
            const store = yield* makeAttestationStore
            const id = newId()
            const other = newId()
            const [mine, intruder, third, pending] = [newOwner(), newOwner(), newOwner(), newOwner()]
            const at = (newOwner: Address, onId = id, deadline = 5n) => ({
              id: onId,
              newOwner,
              bindNonce: 0n,
              deadline,
              visibility: "private" as const
            })
            expect(yield* store.record([at(mine), at(intruder), at(third), at(intruder, other)], 1)).toEqual(
              []
            )
            // The pending owner need not have been attested here (another attestor's signature).
            expect(yield* store.contest([{ id, pendingOwner: pending }], mine, 2)).toBe(3)
            expect(yield* store.contest([{ id, pendingOwner: pending }], mine, 3)).toBe(0)
            expect(yield* store.contestedOf(id.toUpperCase().replace("0X", "0x") as Hex)).toEqual(
              [intruder, third, pending].map((a) => a.toLowerCase()).sort()
            )
            const revoked = new Map((yield* store.ofId(id)).map((r) => [r.newOwner, r.revoked]))
            expect(revoked).toEqual(
              new Map([
                [mine.toLowerCase(), false],
                [intruder.toLowerCase(), true],
                [third.toLowerCase(), true]
              ])
            )
            // Another id is untouched.
            expect((yield* store.ofId(other)).map((r) => r.revoked)).toEqual([false])
            expect(yield* store.contestedOf(other)).toEqual([])
            // A contested owner is refused for the id, at any bind nonce or deadline, whatever the
            // case; the rest of the same record goes in. The contester's key and a fresh one are not.
            const fresh = newOwner()
            const later = [
              at(intruder, id, 6n),
              { ...at(pending), newOwner: pending.toLowerCase() as Address, bindNonce: 1n },
              at(mine, id, 6n),
              at(fresh),
              at(intruder, other, 6n)
            ]
            expect(yield* store.record(later, 4)).toEqual([later[0], later[1]])
            const rows = yield* store.ofId(id)
            expect(rows.filter((r) => !r.revoked).map((r) => [r.newOwner, r.deadline])).toEqual([
              [mine.toLowerCase(), 5n],
              [mine.toLowerCase(), 6n],
              [fresh.toLowerCase(), 5n]
            ])
            expect(rows.filter((r) => r.newOwner === pending.toLowerCase())).toEqual([])
            expect(yield* store.ofId(other)).toHaveLength(2)
            // A contest by a key that has nothing else to rule out rules out nothing.
            const quiet = newId()
            yield* store.record([at(mine, quiet)], 5)
            expect(yield* store.contest([{ id: quiet, pendingOwner: mine }], mine, 6)).toBe(0)
            expect(yield* store.contest([], mine, 6)).toBe(0)
            expect(yield* store.contestedOf(quiet)).toEqual([])
          })
      )

      it.effect(
        "a contest and a record of one id racing: the record of the contested owner is refused, or recorded and then revoked, never kept",
        () =>
          Effect.gen(function* () {
            const store = yield* makeAttestationStore
            const outcomes = { refused: 0, revoked: 0 }
            for (let round = 0; round < 20; round++) {
              const id = newId()
              const [victim, attacker] = [newOwner(), newOwner()]
              // Many attestations (fresh deadlines, as a replica whose index lags would sign)
              // make the record's transaction long enough for the contest to fall inside it.
              const attempt = Array.from({ length: 40 }, (_, i) => ({
                id,
                newOwner: attacker,
                bindNonce: 0n,
                deadline: BigInt(1_000 + i),
                visibility: "private" as const
              }))
              const contest = store.contest([{ id, pendingOwner: attacker }], victim, 10)
              const record = store.record(attempt, 10)
              // Either may start first.
              const [, refused] =
                round % 2 === 0
                  ? yield* Effect.all([contest, record], { concurrency: "unbounded" })
                  : (yield* Effect.all([record, contest], { concurrency: "unbounded" })).reverse()
              const rows = yield* store.ofId(id)
              if ((refused as ReadonlyArray<unknown>).length === 0) {
                // Recorded before the contest, which then revoked every one of them.
                outcomes.revoked++
                expect(rows).toHaveLength(attempt.length)
              } else {
                outcomes.refused++
                expect(refused).toEqual(attempt)
                expect(rows).toEqual([])
              }
              expect(rows.filter((r) => !r.revoked)).toEqual([])
              expect(yield* store.contestedOf(id)).toEqual([attacker.toLowerCase()])
              // And every record after the contest is refused.
              expect(yield* store.record([{ ...attempt[0]!, deadline: 5_000n }], 11)).toHaveLength(1)
              expect((yield* store.ofId(id)).filter((r) => !r.revoked)).toEqual([])
            }
            expect(outcomes.refused + outcomes.revoked).toBe(20)
          })
      )

      it.effect(
        "a contest covers every escrow of the user: each owner attested for any of them, and each pending owner, is contested for all of them",
        () =>
          Effect.gen(function* () {
            const store = yield* makeAttestationStore
            const [contested, signedToo, mineOnly, elsewhere] = [newId(), newId(), newId(), newId()]
            const [mine, attacker, pending] = [newOwner(), newOwner(), newOwner()]
            const at = (owner: Address, id: Hex, deadline = 5n) => ({
              id,
              newOwner: owner,
              bindNonce: 0n,
              deadline,
              visibility: "private" as const
            })
            // The attacker's key was signed for both of the user's escrows, and for another
            // user's; the user's own key for a third escrow.
            yield* store.record(
              [at(attacker, contested), at(attacker, signedToo), at(mine, mineOnly), at(attacker, elsewhere)],
              1
            )
            // The user contests one escrow; the attestor knows three of theirs.
            const escrows = [
              { id: contested, pendingOwner: attacker },
              { id: signedToo, pendingOwner: undefined },
              { id: mineOnly, pendingOwner: pending }
            ]
            expect(yield* store.contest(escrows, mine, 2)).toBe(6)
            expect(yield* store.contest(escrows, mine, 3)).toBe(0)
            for (const id of [contested, signedToo, mineOnly])
              expect(yield* store.contestedOf(id)).toEqual(
                [attacker, pending].map((a) => a.toLowerCase()).sort()
              )
            for (const id of [contested, signedToo])
              expect((yield* store.ofId(id)).map((r) => r.revoked)).toEqual([true])
            expect((yield* store.ofId(mineOnly)).map((r) => r.revoked)).toEqual([false])
            // Another user's escrow is not the contester's to speak for.
            expect(yield* store.contestedOf(elsewhere)).toEqual([])
            expect((yield* store.ofId(elsewhere)).map((r) => r.revoked)).toEqual([false])
            // No new signature for the attacker's key on any of the user's escrows; the user's
            // own key and a fresh one are still recorded.
            const fresh = newOwner()
            const later = [
              at(attacker, signedToo, 6n),
              at(attacker, mineOnly, 6n),
              at(pending, contested, 6n),
              at(mine, contested, 6n),
              at(fresh, signedToo, 6n)
            ]
            expect(yield* store.record(later, 4)).toEqual(later.slice(0, 3))
          })
      )

      it.effect(
        "a contest that sees no pending owner (its replica's index lags) racing a record of a key it finds attested on another of the user's escrows: never an unrevoked attestation of a contested owner",
        () =>
          Effect.gen(function* () {
            const store = yield* makeAttestationStore
            const outcomes = { refused: 0, revoked: 0 }
            for (let round = 0; round < 20; round++) {
              const [proposed, other] = [newId(), newId()]
              const [victim, attacker] = [newOwner(), newOwner()]
              const at = (id: Hex, deadline: bigint) => ({
                id,
                newOwner: attacker,
                bindNonce: 0n,
                deadline,
                visibility: "private" as const
              })
              // The signature behind the proposal, recorded before.
              yield* store.record([at(proposed, 999n)], 9)
              // Fresh signatures of the key for both escrows (the other not yet attested for
              // it), many, so the record's transaction is long enough for the contest to fall
              // inside it; the contest knows of no pending owner.
              const attempt = Array.from({ length: 40 }, (_, i) =>
                at(i % 2 === 0 ? other : proposed, BigInt(1_000 + i))
              )
              const contest = store.contest(
                [
                  { id: proposed, pendingOwner: undefined },
                  { id: other, pendingOwner: undefined }
                ],
                victim,
                10
              )
              const record = store.record(attempt, 10)
              const [, refused] =
                round % 2 === 0
                  ? yield* Effect.all([contest, record], { concurrency: "unbounded" })
                  : (yield* Effect.all([record, contest], { concurrency: "unbounded" })).reverse()
              const rows = [...(yield* store.ofId(proposed)), ...(yield* store.ofId(other))]
              if ((refused as ReadonlyArray<unknown>).length === 0) {
                // Recorded before the contest, which then revoked every one of them.
                outcomes.revoked++
                expect(rows).toHaveLength(attempt.length + 1)
              } else {
                outcomes.refused++
                expect(refused).toEqual(attempt)
                expect(rows).toHaveLength(1)
              }
              expect(rows.filter((r) => !r.revoked)).toEqual([])
              for (const id of [proposed, other])
                expect(yield* store.contestedOf(id)).toEqual([attacker.toLowerCase()])
            }
            expect(outcomes.refused + outcomes.revoked).toBe(20)
          })
      )

      // Databases of earlier versions: before migration 0028 (contests only revoked attestations),
      // and past 0028 as first released (no user contests, revoked pairs not contested).
      for (const [before, drop, expected] of [
        [
          "before migration 0028",
          ["DROP TABLE attestor_contests", "DROP INDEX attestor_sessions_user"],
          // The later migrations again too, as on a database of that time (they are IF NOT EXISTS).
          [
            [28, "attestor_contests"],
            [29, "attestor_payment_leases"],
            [30, "attestor_login_challenges"],
            [31, "attestor_user_contests"]
          ]
        ],
        ["past migration 0028 as first released", [], [[31, "attestor_user_contests"]]]
      ] as const)
        it.effect(`a database ${before} migrates: revoked pairs contested, a user's contests recorded`, () =>
          Effect.gen(function* () {
            const sql = yield* SqlClient
            const id = newId()
            const [kept, revoked] = [newOwner(), newOwner()]
            // The database as it was, with an attestation a contest revoked.
            for (const statement of drop) yield* sql.unsafe(statement)
            yield* sql`DROP TABLE attestor_user_contests`
            for (const [n] of expected) yield* sql`DELETE FROM schema_migrations WHERE migration_id = ${n}`
            for (const [owner, isRevoked] of [
              [kept, false],
              [revoked, true]
            ] as const)
              yield* sql`
                INSERT INTO attestor_attestations
                  (beneficiary_id, new_owner, bind_nonce, deadline, visibility, revoked, issued_at)
                VALUES (${id.toLowerCase()}, ${owner.toLowerCase()}, '0', '5', 'private', ${isRevoked}, 1)`
            expect(yield* migrate).toEqual(expected)
            expect(yield* migrate).toEqual([])
            const store = yield* makeAttestationStore
            expect(yield* store.contestedOf(id)).toEqual([revoked.toLowerCase()])
            // The contest lasts: the revoked owner is refused, the other one is not.
            const again = (owner: Address) => ({
              id,
              newOwner: owner,
              bindNonce: 1n,
              deadline: 6n,
              visibility: "private" as const
            })
            expect(yield* store.record([again(revoked), again(kept)], 2)).toEqual([again(revoked)])
            // Logins read the user's last contest: the table is there.
            expect(yield* sql`SELECT count(*) AS n FROM attestor_user_contests`).toHaveLength(1)
          })
        )
    })
  })
}
