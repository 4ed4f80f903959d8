/**
 * Nonce reservations (src/relayer/NonceReservations.ts) on PGlite, and on PostgreSQL when
 * `DATABASE_URL` is set: one holder per key however many take it at once, all keys or none,
 * released by their holder only, and live exactly while the linked transaction is pending in the
 * sender's store (or, not sent yet, while the process that took it runs and until the unsent TTL
 * passes); a request's transaction found again by its call.
 */
import { randomBytes } from "node:crypto"
import { SqlClient } from "@effect/sql/SqlClient"
import { describe, expect, layer } from "@effect/vitest"
import { Deferred, Effect, Either, Exit, Fiber, identity, Layer, Option, Scope, TestClock } from "effect"
import { type Address, type Hex, keccak256, toHex } from "viem"
import {
  makeNonceReservations,
  type ReservationKey,
  reservationHolder
} from "../../src/relayer/NonceReservations.js"
import { migrate } from "../../src/store/migrations.js"
import { makeTxStore, type Sender } from "../../src/txsender/store.js"
import type { TxRequest } from "../../src/txsender/TxSenderShape.js"
import { testDatabases } from "../support/database.js"

const VAULT: Address = "0x00000000000000000000000000000000000000E1"
const OTHER_VAULT: Address = "0x00000000000000000000000000000000000000E2"
/** The block a stored transaction is recorded as mined in. */
const BLOCK_HASH: Hex = keccak256(toHex("block 10"))
const SENDER: Sender = { chainId: 31337, address: "0x00000000000000000000000000000000000000aa" }

/** Real time: the database's `now()` decides liveness, and `it.effect` runs on a test clock. */
const sleep = (ms: number) => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, ms)))

/** Polls `query` until `done` holds; a test's timeout bounds it. */
const waitUntil = <A, E, R>(query: Effect.Effect<A, E, R>, done: (a: A) => boolean) =>
  Effect.gen(function* () {
    while (!done(yield* query)) yield* sleep(20)
  })

/**
 * A store committing while statements that began before it wait on its rows (PostgreSQL): `take`
 * runs in a transaction, `racing` starts once it has, and `store` finishes the transaction once
 * `waiting` of racing's statements wait on it. Returns what `racing` returned.
 */
const whileStoring = <H, A, E, R>(
  take: Effect.Effect<H, unknown, SqlClient>,
  store: (held: H) => Effect.Effect<unknown, unknown, SqlClient>,
  racing: Effect.Effect<A, E, R>,
  waiting: number
) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const begun = yield* Deferred.make<string>()
    const gate = yield* Deferred.make<void>()
    const storing = yield* Effect.gen(function* () {
      const held = yield* take
      const [xact] = yield* sql<{ readonly id: string }>`SELECT pg_current_xact_id()::text AS id`
      yield* Deferred.succeed(begun, xact?.id ?? "")
      yield* Deferred.await(gate)
      yield* store(held)
    }).pipe(sql.withTransaction, Effect.orDie, Effect.fork)
    const xact = yield* Deferred.await(begun)
    const raced = yield* Effect.fork(racing)
    yield* waitUntil(
      sql<{ readonly n: number }>`
        SELECT count(*)::int AS n FROM pg_locks
        WHERE locktype = 'transactionid' AND transactionid::text = ${xact} AND NOT granted`,
      (rows) => (rows[0]?.n ?? 0) >= waiting
    )
    yield* Deferred.succeed(gate, undefined)
    yield* Fiber.join(storing)
    return yield* Fiber.join(raced)
  })

const freshId = (): Hex => `0x${randomBytes(32).toString("hex")}`
const nonce = (value: bigint): ReservationKey => ({ kind: "nonce", value })
const bindNonce = (value: bigint): ReservationKey => ({ kind: "bindNonce", value })

let txCount = 0
/**
 * A pending transaction in the sender's store, as `submit` leaves it, stored with the requester's
 * write when there is one (the reservation linking itself); returns its id and hash.
 */
const storedTx = (storedWith?: TxRequest["storedWith"], atNonce?: bigint, bytes?: Hex) =>
  Effect.gen(function* () {
    const store = yield* makeTxStore(identity)
    txCount++
    const txNonce = atNonce ?? BigInt(1_000_000 + txCount)
    const raw = bytes ?? toHex(`tx-${txCount}-${randomBytes(4).toString("hex")}`)
    const hash = keccak256(raw)
    const [id] = yield* store.insert(SENDER, [
      {
        purpose: "request",
        payload: { to: VAULT, data: "0x", value: 0n, gas: 21_000n },
        // A nonce of its own: the store allows one live transaction per nonce.
        attempt: {
          hash,
          nonce: txNonce,
          kind: "original",
          maxFeePerGas: 2n,
          maxPriorityFeePerGas: 1n,
          raw
        },
        storedWith: storedWith?.(hash)
      }
    ])
    return { id: id as string, hash, nonce: txNonce, raw, store }
  })

const refusal = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.map(Effect.either(effect), (result) =>
    Either.isLeft(result) ? (result.left as { _tag: string; message: string }) : undefined
  )

for (const database of testDatabases()) {
  describe(database.name, () => {
    const storage = Layer.effectDiscard(migrate).pipe(Layer.provideMerge(database.layer))

    layer(storage, { timeout: 60_000 })((it) => {
      it.effect("a held key is refused with nonce_mismatch; other keys, ids and vaults are free", () =>
        Effect.gen(function* () {
          const reservations = yield* makeNonceReservations()
          const id = freshId()
          yield* reservations.take(VAULT, id, [nonce(0n)])
          const refused = yield* refusal(reservations.take(VAULT, id, [nonce(0n)]))
          expect(refused?._tag).toBe("NonceMismatch")
          // Nothing linked yet: not "in flight".
          expect(refused?.message).toMatch(/another request for this nonce is being processed/)
          const bind = yield* refusal(
            Effect.zipRight(
              reservations.take(VAULT, id, [bindNonce(0n)]),
              reservations.take(VAULT, id, [bindNonce(0n)])
            )
          )
          expect(bind?.message).toMatch(/another request for this bindNonce is being processed/)
          yield* reservations.take(VAULT, id, [nonce(1n)])
          yield* reservations.take(VAULT, freshId(), [nonce(0n)])
          yield* reservations.take(OTHER_VAULT, id, [nonce(0n)])
          // Ids and addresses are compared in lowercase.
          expect(
            (yield* refusal(
              reservations.take(VAULT, id.toUpperCase().replace("0X", "0x") as Hex, [nonce(0n)])
            ))?._tag
          ).toBe("NonceMismatch")
        })
      )

      it.effect("all keys or none", () =>
        Effect.gen(function* () {
          const reservations = yield* makeNonceReservations()
          const id = freshId()
          yield* reservations.take(VAULT, id, [nonce(6n)])
          expect((yield* refusal(reservations.take(VAULT, id, [nonce(5n), nonce(6n)])))?._tag).toBe(
            "NonceMismatch"
          )
          // 5 was not kept by the refused request.
          yield* reservations.take(VAULT, id, [nonce(5n)])
        })
      )

      it.effect("a release frees the keys; a stale holder's release does not free a later taker's", () =>
        Effect.gen(function* () {
          const quick = yield* makeNonceReservations({ unsentTtl: "1 millis" })
          const id = freshId()
          const first = yield* quick.take(VAULT, id, [nonce(0n)])
          yield* quick.release(first)
          const second = yield* quick.take(VAULT, id, [nonce(0n)])
          yield* sleep(20)
          // Unsent past the TTL: taken over; the first holder's late release changes nothing.
          yield* quick.take(VAULT, id, [nonce(0n)])
          yield* quick.release(second)
          const strict = yield* makeNonceReservations()
          expect((yield* refusal(strict.take(VAULT, id, [nonce(0n)])))?._tag).toBe("NonceMismatch")
        })
      )

      it.effect("an unsent reservation holds until the TTL, then is taken over", () =>
        Effect.gen(function* () {
          const reservations = yield* makeNonceReservations({ unsentTtl: "300 millis" })
          const id = freshId()
          yield* reservations.take(VAULT, id, [nonce(0n)])
          expect((yield* refusal(reservations.take(VAULT, id, [nonce(0n)])))?._tag).toBe("NonceMismatch")
          yield* sleep(400)
          yield* reservations.take(VAULT, id, [nonce(0n)])
        })
      )

      it.effect("linked: live while the transaction is pending, free once mined, dropped or cancelled", () =>
        Effect.gen(function* () {
          // A TTL that has passed: only the transaction keeps a reservation alive.
          const reservations = yield* makeNonceReservations({ unsentTtl: "1 millis" })
          const held = (id: Hex) =>
            Effect.map(refusal(reservations.take(VAULT, id, [nonce(0n)])), (r) => r?._tag)
          const linked = Effect.gen(function* () {
            const id = freshId()
            const tx = yield* storedTx(
              reservations.linkOnStore(yield* reservations.take(VAULT, id, [nonce(0n)]))
            )
            yield* sleep(20)
            expect(yield* held(id)).toBe("NonceMismatch")
            return { ...tx, account: id }
          })

          const success = yield* linked
          yield* success.store.markMined([
            {
              txId: success.id,
              outcome: "success",
              hash: success.hash,
              blockNumber: 10n,
              blockHash: BLOCK_HASH
            }
          ])
          expect(yield* held(success.account)).toBeUndefined()

          const reverted = yield* linked
          yield* reverted.store.markMined([
            {
              txId: reverted.id,
              outcome: "reverted",
              hash: reverted.hash,
              blockNumber: 10n,
              blockHash: BLOCK_HASH
            }
          ])
          expect(yield* held(reverted.account)).toBeUndefined()

          const cancelled = yield* linked
          yield* cancelled.store.markMined([
            {
              txId: cancelled.id,
              outcome: "cancelled",
              hash: cancelled.hash,
              blockNumber: 10n,
              blockHash: BLOCK_HASH
            }
          ])
          expect(yield* held(cancelled.account)).toBeUndefined()

          const dropped = yield* linked
          yield* dropped.store.markDropped(dropped.id, "rejected")
          expect(yield* held(dropped.account)).toBeUndefined()
        })
      )

      it.effect("linked by the statement that stores the transaction: a store that fails links nothing", () =>
        Effect.gen(function* () {
          const sql = yield* SqlClient
          const reservations = yield* makeNonceReservations({ unsentTtl: "300 millis" })
          const first = freshId()
          const stored = yield* storedTx(
            reservations.linkOnStore(yield* reservations.take(VAULT, first, [nonce(0n)]))
          )
          // A second transaction at the same sender nonce is refused by the store, and its link with it.
          const second = freshId()
          const failed = yield* Effect.either(
            storedTx(
              reservations.linkOnStore(yield* reservations.take(VAULT, second, [nonce(0n)])),
              stored.nonce
            )
          )
          expect(failed._tag).toBe("Left")
          const links = yield* sql<{ readonly account_id: string; readonly tx_hash: string | null }>`
            SELECT account_id, tx_hash FROM relayer_nonce_reservations
            WHERE account_id IN ${sql.in([first.toLowerCase(), second.toLowerCase()])}`
          expect(Object.fromEntries(links.map((r) => [r.account_id, r.tx_hash]))).toEqual({
            [first.toLowerCase()]: stored.hash,
            [second.toLowerCase()]: null
          })
          // Unlinked, the second holds only until the unsent TTL; the first for as long as its
          // transaction is pending.
          yield* sleep(400)
          yield* reservations.take(VAULT, second, [nonce(0n)])
          expect((yield* refusal(reservations.take(VAULT, first, [nonce(0n)])))?._tag).toBe("NonceMismatch")
        })
      )

      it.effect("a reorg that makes the transaction pending again holds its nonce again", () =>
        Effect.gen(function* () {
          const reservations = yield* makeNonceReservations({ unsentTtl: "1 millis" })
          const id = freshId()
          const tx = yield* storedTx(
            reservations.linkOnStore(yield* reservations.take(VAULT, id, [nonce(3n)]))
          )
          yield* tx.store.markMined([
            { txId: tx.id, outcome: "success", hash: tx.hash, blockNumber: 10n, blockHash: BLOCK_HASH }
          ])
          yield* tx.store.unmined(tx.id)
          yield* sleep(20)
          expect((yield* refusal(reservations.take(VAULT, id, [nonce(3n)])))?._tag).toBe("NonceMismatch")
        })
      )

      it.effect("many takers of one key at once: exactly one wins", () =>
        Effect.gen(function* () {
          const reservations = yield* makeNonceReservations()
          const id = freshId()
          const results = yield* Effect.all(
            Array.from({ length: 12 }, (_, i) =>
              Effect.either(reservations.take(VAULT, id, i % 2 === 0 ? [nonce(0n)] : [nonce(0n), nonce(1n)]))
            ),
            { concurrency: "unbounded" }
          )
          expect(results.filter(Either.isRight)).toHaveLength(1)
          for (const result of results.filter(Either.isLeft)) expect(result.left._tag).toBe("NonceMismatch")
        })
      )

      // A statement's subqueries read the snapshot it started with, while ON CONFLICT and a
      // DELETE's recheck read the row's newest version: a take that began before a store committed
      // meets the link without the transaction behind it. That must read as held, not as settled.
      it.effect.skipIf(database.name === "pglite")(
        "a take that began before the linking store committed holds, and its prune keeps the row",
        () =>
          Effect.gen(function* () {
            const reservations = yield* makeNonceReservations({ unsentTtl: "1 millis" })
            /** An account whose key 0 is held by a transaction since dropped. */
            const settledAccount = Effect.gen(function* () {
              const id = freshId()
              const settled = yield* storedTx(
                reservations.linkOnStore(yield* reservations.take(VAULT, id, [nonce(0n)]))
              )
              yield* settled.store.markDropped(settled.id, "rejected")
              return id
            })
            const id = yield* settledAccount
            const other = yield* settledAccount
            const [same, pruning] = yield* whileStoring(
              // A request's take of both settled rows, then its store linking them.
              Effect.all([
                reservations.take(VAULT, id, [nonce(0n)]),
                reservations.take(VAULT, other, [nonce(0n)])
              ]),
              (holders) => Effect.forEach(holders, (holder) => storedTx(reservations.linkOnStore(holder))),
              // The same key, and another key of `other` whose take prunes that account's rows.
              Effect.all(
                [
                  refusal(reservations.take(VAULT, id, [nonce(0n)])),
                  refusal(reservations.take(VAULT, other, [nonce(1n)]))
                ],
                { concurrency: "unbounded" }
              ),
              2
            )
            expect(same?._tag).toBe("NonceMismatch")
            expect(pruning).toBeUndefined()
            // The linked row of `other` survived the prune: its key is still held.
            expect((yield* refusal(reservations.take(VAULT, other, [nonce(0n)])))?._tag).toBe("NonceMismatch")
          })
      )

      // A request dropped and sent again at the same nonce and fees signs to the same bytes: the
      // dropped transaction is not evidence that the new one, under the same hash, settled.
      it.effect.skipIf(database.name === "pglite")(
        "a take that began before a dropped transaction's bytes were stored again holds",
        () =>
          Effect.gen(function* () {
            const reservations = yield* makeNonceReservations()
            const id = freshId()
            const dropped = yield* storedTx(
              reservations.linkOnStore(yield* reservations.take(VAULT, id, [nonce(0n)]))
            )
            yield* dropped.store.markDropped(dropped.id, "rejected")
            const refused = yield* whileStoring(
              reservations.take(VAULT, id, [nonce(0n)]),
              (holder) =>
                Effect.map(storedTx(reservations.linkOnStore(holder), dropped.nonce, dropped.raw), (again) =>
                  expect(again.hash).toBe(dropped.hash)
                ),
              refusal(reservations.take(VAULT, id, [nonce(0n)])),
              1
            )
            expect(refused?._tag).toBe("NonceMismatch")
          })
      )

      it.effect("settled reservations of an account are pruned when it reserves again", () =>
        Effect.gen(function* () {
          const sql = yield* SqlClient
          const reservations = yield* makeNonceReservations()
          const id = freshId()
          const tx = yield* storedTx(
            reservations.linkOnStore(yield* reservations.take(VAULT, id, [nonce(0n)]))
          )
          yield* tx.store.markMined([
            { txId: tx.id, outcome: "success", hash: tx.hash, blockNumber: 10n, blockHash: BLOCK_HASH }
          ])
          yield* tx.store.markConfirmed([tx.id])
          yield* reservations.take(VAULT, id, [nonce(1n)])
          const rows = yield* sql<{ readonly value: string }>`
            SELECT value FROM relayer_nonce_reservations WHERE account_id = ${id.toLowerCase()}`
          expect(rows.map((r) => String(r.value))).toEqual(["1"])
        })
      )

      it.effect(
        "a take prunes the account's settled rows and takes over a settled row of a key it takes",
        () =>
          Effect.gen(function* () {
            const sql = yield* SqlClient
            const reservations = yield* makeNonceReservations()
            const id = freshId()
            for (const value of [0n, 1n]) {
              const tx = yield* storedTx(
                reservations.linkOnStore(yield* reservations.take(VAULT, id, [nonce(value)]))
              )
              yield* tx.store.markMined([
                { txId: tx.id, outcome: "success", hash: tx.hash, blockNumber: 10n, blockHash: BLOCK_HASH }
              ])
              yield* tx.store.markConfirmed([tx.id])
            }
            const taken = yield* reservations.take(VAULT, id, [nonce(1n), nonce(2n)])
            const rows = yield* sql<{ readonly value: string; readonly token: string }>`
            SELECT value, token FROM relayer_nonce_reservations WHERE account_id = ${id.toLowerCase()}
            ORDER BY value`
            expect(rows.map((r) => [String(r.value), r.token])).toEqual([
              ["1", taken.token],
              ["2", taken.token]
            ])
            // Released by the rows' own key: nothing of the account is left.
            yield* reservations.release(taken)
            const left =
              yield* sql`SELECT 1 FROM relayer_nonce_reservations WHERE account_id = ${id.toLowerCase()}`
            expect(left).toHaveLength(0)
          })
      )

      it.effect("an unlinked reservation is free at once when the process that took it is gone", () =>
        Effect.gen(function* () {
          const sql = yield* SqlClient
          const id = freshId()
          // Two processes; the first stops without releasing anything, as a crash leaves it.
          const crashing = yield* Scope.make()
          const running = yield* Scope.make()
          const first = yield* makeNonceReservations({
            holder: yield* Scope.extend(reservationHolder, crashing)
          })
          const other = yield* makeNonceReservations({
            holder: yield* Scope.extend(reservationHolder, running)
          })
          yield* first.take(VAULT, id, [nonce(0n), nonce(1n)])
          yield* storedTx(first.linkOnStore(yield* first.take(VAULT, id, [nonce(5n)])))
          // While the first runs, its unlinked rows hold, and the refusal does not say "in flight".
          const unsent = yield* refusal(other.take(VAULT, id, [nonce(1n)]))
          expect(unsent?._tag).toBe("NonceMismatch")
          expect(unsent?.message).toMatch(/being processed and nothing is sent for it yet/)
          expect(unsent?.message).not.toMatch(/in flight/)
          const pending = yield* refusal(other.take(VAULT, id, [nonce(5n)]))
          expect(pending?.message).toMatch(/already in flight/)

          yield* Scope.close(crashing, Exit.void)
          const left = yield* sql<{ readonly value: string }>`
            SELECT value FROM relayer_nonce_reservations WHERE account_id = ${id.toLowerCase()} ORDER BY value`
          expect(left.map((r) => String(r.value))).toEqual(["0", "1", "5"])
          // Well inside the unsent TTL: free because their taker is gone. The linked row holds
          // while its transaction is pending, whoever took it.
          yield* other.take(VAULT, id, [nonce(0n), nonce(1n)])
          expect((yield* refusal(other.take(VAULT, id, [nonce(5n)])))?.message).toMatch(/already in flight/)
          // The running process's rows still hold against a third.
          const third = yield* Scope.make()
          const later = yield* makeNonceReservations({
            holder: yield* Scope.extend(reservationHolder, third)
          })
          expect((yield* refusal(later.take(VAULT, id, [nonce(1n)])))?._tag).toBe("NonceMismatch")
          yield* Scope.close(running, Exit.void)
          yield* later.take(VAULT, id, [nonce(1n)])
          yield* Scope.close(third, Exit.void)
        })
      )

      // A session the database ended (an idle timeout, a proxy, a restart) takes its lock with it:
      // the process takes the same key again, so what it holds stays held.
      it.effect.skipIf(database.name === "pglite")("a holder whose session ended takes its lock again", () =>
        Effect.gen(function* () {
          const sql = yield* SqlClient
          const scope = yield* Scope.make()
          const holder = yield* Scope.extend(reservationHolder, scope)
          const key = yield* holder.key
          const session = (k: string) =>
            sql<{ readonly pid: number }>`
                SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
                  AND classid::bigint = ${k}::bigint >> 32 AND objid::bigint = ${k}::bigint & 4294967295`
          const [before] = yield* session(key)
          expect(before).toBeDefined()
          yield* sql`SELECT pg_terminate_backend(${before?.pid ?? 0})`
          // The holder asks every few seconds, by the test clock.
          yield* waitUntil(
            Effect.zipRight(TestClock.adjust("2 seconds"), session(key)),
            (rows) => rows.length === 1 && rows[0]?.pid !== before?.pid
          )
          expect(yield* holder.key).toBe(key)
          yield* Scope.close(scope, Exit.void)
          expect(yield* session(key)).toHaveLength(0)
        })
      )

      // A database outage while a refused request releases its nonces: once the database answers
      // again the nonces are free, not held as "being processed" for the unsent TTL (the holder
      // takes its lock again under the same key, so its rows are not a gone process's).
      it.effect("a release the database did not answer frees the keys once it answers again", () =>
        Effect.gen(function* () {
          const sql = yield* SqlClient
          // Deletes of the tokens listed in `refusing` fail, as statements do while the database is away.
          const refusing = `refusing_${randomBytes(4).toString("hex")}`
          yield* sql.unsafe(`CREATE TABLE ${refusing} (token text PRIMARY KEY)`)
          yield* sql.unsafe(`CREATE FUNCTION ${refusing}() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              IF EXISTS (SELECT 1 FROM ${refusing} WHERE token = OLD.token) THEN
                RAISE EXCEPTION 'the database is not answering';
              END IF;
              RETURN OLD;
            END $$`)
          yield* sql.unsafe(`CREATE TRIGGER ${refusing} BEFORE DELETE ON relayer_nonce_reservations
            FOR EACH ROW EXECUTE FUNCTION ${refusing}()`)
          const scope = yield* Scope.make()
          const reservations = yield* makeNonceReservations({
            holder: yield* Scope.extend(reservationHolder, scope),
            releaseRetryInterval: "1 second"
          })
          const id = freshId()
          const taken = yield* reservations.take(VAULT, id, [nonce(0n)])
          yield* sql.unsafe(`INSERT INTO ${refusing} (token) VALUES ('${taken.token}')`)
          yield* reservations.release(taken)
          const held = Effect.map(refusal(reservations.take(VAULT, id, [nonce(0n)])), (r) => r?.message)
          expect(yield* held).toMatch(/being processed/)

          yield* sql.unsafe(`DELETE FROM ${refusing}`)
          // Well inside the unsent TTL (two minutes): ten seconds by the test clock.
          let free = false
          for (let s = 0; s < 10 && !free; s++) {
            yield* TestClock.adjust("1 second")
            yield* sleep(50)
            free = (yield* held) === undefined
          }
          expect(free).toBe(true)
          yield* sql.unsafe(`DROP TRIGGER ${refusing} ON relayer_nonce_reservations`)
          yield* sql.unsafe(`DROP FUNCTION ${refusing}()`)
          yield* sql.unsafe(`DROP TABLE ${refusing}`)
          yield* Scope.close(scope, Exit.void)
        })
      )

      it.effect("a request's transaction is found by its call, unless it was dropped", () =>
        Effect.gen(function* () {
          const reservations = yield* makeNonceReservations()
          const tx = yield* storedTx()
          const data = "0x" as Hex
          // storedTx stores every transaction with the call `0x` to VAULT: the newest is found.
          expect(yield* reservations.storedFor(VAULT, data)).toEqual(Option.some(tx.hash))
          expect(yield* reservations.storedFor(OTHER_VAULT, data)).toEqual(Option.none())
          expect(yield* reservations.storedFor(VAULT, "0x01")).toEqual(Option.none())
          yield* tx.store.markDropped(tx.id, "rejected")
          const found = yield* reservations.storedFor(VAULT, data)
          expect(found).not.toEqual(Option.some(tx.hash))
        })
      )

      it.effect("migrate applies the reservations migrations to a database past them", () =>
        Effect.gen(function* () {
          const sql = yield* SqlClient
          yield* sql`DROP TABLE relayer_nonce_reservations`
          yield* sql`DELETE FROM schema_migrations WHERE migration_id IN (12, 14)`
          expect(yield* migrate).toEqual([
            [12, "nonce_reservations"],
            [14, "reservation_holders"]
          ])
          expect(yield* migrate).toEqual([])
          const reservations = yield* makeNonceReservations()
          yield* reservations.take(VAULT, freshId(), [nonce(0n)])
        })
      )
    })
  })
}
