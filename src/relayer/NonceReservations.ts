/**
 * Nonce reservations (migration 0012): the account nonces and bind nonces a relayed transaction
 * will consume, held from the moment its request passed its checks until the transaction is mined
 * or dropped. A second request for a held nonce is refused with 409 `nonce_mismatch` before it is
 * simulated, so duplicates posted together, to one replica or to several sharing one database,
 * cost no gas (docs/relayer.md §4, docs/protocol.md §7).
 *
 * Liveness is read, not written: a row is live while the transaction its hash leads to
 * (relayer_tx_attempts → relayer_txs) is pending, or, with no transaction yet, while the process
 * that took it runs and for at most `unsentTtl` after it was taken. A process runs while it holds
 * its holder lock (migration 0014, `reservationHolder`): a session advisory lock that PostgreSQL
 * lets go when the process's session ends (a crash, `kill -9`), and that a restarted embedded
 * database no longer has, so a crash between taking and sending frees its nonces at once and a hung
 * process's after the TTL. So a transaction that is mined (success, reverted, or cancelled by a
 * no-op) or dropped frees its nonces without any step of the sender's, and a reorg that makes it
 * pending again holds them again. Taking over a dead row happens inside the INSERT (ON CONFLICT DO
 * UPDATE … WHERE dead), which PostgreSQL and PGlite serialize on the primary key: two takers cannot
 * both win.
 *
 * The module also finds a request's transaction again by its call (`storedFor`), so the same
 * signed request sent again is answered with the hash it was stored under (docs/relayer.md §4).
 */
import { randomBytes, randomUUID } from "node:crypto"
import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type * as Statement from "@effect/sql/Statement"
import {
  Array as Arr,
  Context,
  Data,
  Duration,
  Effect,
  Exit,
  Layer,
  Option,
  Ref,
  Schedule,
  Scope
} from "effect"
import type { NonEmptyReadonlyArray } from "effect/Array"
import type { Address, Hex } from "viem"
import { NonceMismatch, Unavailable } from "../../schema/errors.js"
import { isEmbeddedDatabase, sessionLock } from "../store/advisoryLock.js"
import type { TxRequest } from "../txsender/TxSenderShape.js"

/** `nonces(id)` (claims, owner actions) or `bindNonces(id)` (propose, cancel and finalize bind). */
export type ReservationKind = "nonce" | "bindNonce"

export interface ReservationKey {
  readonly kind: ReservationKind
  readonly value: bigint
}

/** The rows one request holds, told apart from a later taker's by `token`. */
export interface Reservation {
  /** Lowercase, as stored: with the account they find the rows by their primary key. */
  readonly vault: string
  readonly accountId: string
  readonly token: string
}

export interface NonceReservationsShape {
  /**
   * Takes every key of `id` in `vault`, all or none. Fails with `NonceMismatch` when another
   * request holds one of them, `Unavailable` when the database does not answer.
   */
  readonly take: (
    vault: Address,
    id: Hex,
    keys: NonEmptyReadonlyArray<ReservationKey>
  ) => Effect.Effect<Reservation, NonceMismatch | Unavailable>
  /**
   * What ties the rows to the transaction's hash, live from then on while it is pending: the
   * sender writes it in the statement that stores the transaction (`TxRequest.storedWith`), so
   * no stored transaction leaves its nonces to expire unlinked. None when nothing is stored.
   */
  readonly linkOnStore: (reservation: Reservation) => TxRequest["storedWith"]
  /**
   * Frees the rows (nothing was sent). Never fails: a delete the database does not answer is tried
   * again in the background; rows it never frees expire after `unsentTtl`.
   */
  readonly release: (reservation: Reservation) => Effect.Effect<void>
  /**
   * The first hash of the transaction this relayer stored for the call `data` to `vault`, unless
   * it was dropped: the same signed request sent again (its calldata carries every signature).
   */
  readonly storedFor: (vault: Address, data: Hex) => Effect.Effect<Option.Option<Hex>, Unavailable>
}

/**
 * The process taking reservations, by the key of a session advisory lock it holds while it runs:
 * an unlinked row whose holder's lock nobody holds is free at once.
 */
export interface ReservationHolder {
  /** The key now held (decimal); it changes only if the lock was lost and another had to be taken. */
  readonly key: Effect.Effect<string>
}

/** How often a PostgreSQL holder asks whether its session still holds its lock. */
const HOLDER_CHECK_INTERVAL = Duration.seconds(2)

/** A fresh key: positive and below 2^62, so `pg_locks` shows it as two oids without a sign. */
const freshHolderKey = () => BigInt.asUintN(62, randomBytes(8).readBigUInt64BE()).toString()

/** How long a row with no transaction yet holds: longer than any request takes to reach the sender. */
export const DEFAULT_UNSENT_TTL = Duration.minutes(2)

/** How often a release the database did not answer is tried again. */
const RELEASE_RETRY_INTERVAL = Duration.seconds(1)

class Held extends Data.TaggedError("Held")<{ readonly key: ReservationKey }> {}

/** The refusal of a held key: "in flight" only when a transaction is linked to it. */
const heldBy = (kind: ReservationKind, linked: boolean) =>
  new NonceMismatch({
    message: linked
      ? `a transaction for this ${kind} is already in flight; retry once it is mined or dropped`
      : `another request for this ${kind} is being processed and nothing is sent for it yet; send this request again in a few seconds`
  })

const unavailable = () => new Unavailable({ message: "the relayer's database is not answering" })

/** Whether some session of this database holds the advisory lock on the bigint `key` (a SQL expression). */
const lockedBy = (key: string) =>
  `EXISTS (SELECT 1 FROM pg_locks l
          WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
            AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
            AND l.classid::bigint = (${key}) >> 32 AND l.objid::bigint = (${key}) & 4294967295)`

/** Keys in one order for every taker, so two transactions taking overlapping sets cannot deadlock. */
const ordered = (keys: ReadonlyArray<ReservationKey>) =>
  Arr.dedupeWith(
    [...keys].sort((a, b) =>
      a.kind !== b.kind ? (a.kind < b.kind ? -1 : 1) : a.value < b.value ? -1 : a.value > b.value ? 1 : 0
    ),
    (a, b) => a.kind === b.kind && a.value === b.value
  )

/**
 * Takes this process's holder lock for the scope: on PostgreSQL on a connection of its own, asked
 * every few seconds whether its session still holds it and taken again if not (a session ended by
 * the database or a proxy); on the embedded database in its one session, which ends with the
 * process.
 */
export const reservationHolder: Effect.Effect<ReservationHolder, SqlError, SqlClient | Scope.Scope> =
  Effect.gen(function* () {
    const sql = yield* SqlClient
    if (yield* isEmbeddedDatabase) {
      // One session for the process, where advisory locks are re-entrant: a key of 62 random bits
      // is its own.
      const key = freshHolderKey()
      yield* sql`SELECT pg_advisory_lock(${key}::bigint)`
      yield* Effect.addFinalizer(() => sql`SELECT pg_advisory_unlock(${key}::bigint)`.pipe(Effect.ignore))
      return { key: Effect.succeed(key) }
    }
    /** The lock on `key` in a scope of its own, or none when another session holds that key. */
    const lockOn = (key: string) =>
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        // A random key, recorded as it is in the rows it takes and looked up as it is in
        // `pg_locks` by the liveness check: never derived from the schema.
        const locked = yield* sessionLock(sql, key, { databaseWide: true }).pipe(
          Scope.extend(scope),
          Effect.flatMap((lock) =>
            Effect.map(lock.tryLock, (held) => (held ? Option.some(lock) : Option.none()))
          ),
          Effect.onExit((exit) =>
            Exit.isSuccess(exit) && Option.isSome(exit.value) ? Effect.void : Scope.close(scope, Exit.void)
          )
        )
        return Option.map(locked, (lock) => ({ key, lock, scope }))
      })
    const fresh = Effect.flatMap(Effect.sync(freshHolderKey), (key) => lockOn(key)).pipe(
      Effect.repeat({ until: Option.isSome }),
      Effect.map(Option.getOrThrow)
    )
    const current = yield* Ref.make(yield* fresh)
    yield* Effect.addFinalizer(() =>
      Effect.flatMap(Ref.get(current), (held) => Scope.close(held.scope, Exit.void))
    )
    // Lost (the session ended): the same key again, so rows this process took while it was lost
    // are its own again; another only if some other session took that key meanwhile.
    const keep = Effect.gen(function* () {
      const held = yield* Ref.get(current)
      if (yield* Effect.orElseSucceed(held.lock.held, () => false)) return
      yield* Scope.close(held.scope, Exit.void)
      const again = yield* lockOn(held.key)
      yield* Ref.set(current, Option.isSome(again) ? again.value : yield* fresh)
      yield* Effect.logWarning(
        "nonce reservations: the holder lock's session ended; the lock was taken again"
      )
    }).pipe(Effect.catchAll(() => Effect.void))
    yield* keep.pipe(Effect.repeat(Schedule.spaced(HOLDER_CHECK_INTERVAL)), Effect.forkScoped)
    return { key: Effect.map(Ref.get(current), (held) => held.key) }
  })

export const makeNonceReservations = (
  options: {
    readonly unsentTtl?: Duration.DurationInput
    /** Without one, an unlinked row holds until the unsent TTL whoever took it. */
    readonly holder?: ReservationHolder
    /** How often a release the database did not answer is tried again. */
    readonly releaseRetryInterval?: Duration.DurationInput
  } = {}
) =>
  Effect.map(SqlClient, (sql): NonceReservationsShape => {
    const unsentTtl = Duration.decode(options.unsentTtl ?? DEFAULT_UNSENT_TTL)
    const releaseRetryInterval = Duration.decode(options.releaseRetryInterval ?? RELEASE_RETRY_INTERVAL)
    const ttl = `${Duration.toMillis(unsentTtl)} milliseconds`
    // Liveness reads other tables, and a statement's subqueries read the snapshot it started
    // with, while ON CONFLICT and a DELETE's recheck read a row's newest version: a statement
    // that began just before a store committed meets the store's link but not the transaction
    // behind it. So a linked row is dead only on evidence that its transaction settled, never for
    // want of a pending one: a hash not yet visible reads as held (transactions are never
    // deleted, so no row is held for ever by it).
    // A hash may belong to several transactions (a dropped one sent again at the same nonce,
    // migration 0010), hence EXISTS over all of them.
    const pendingTx = sql.literal(`
      EXISTS (SELECT 1 FROM relayer_tx_attempts a JOIN relayer_txs t ON t.id = a.tx_id
              WHERE a.hash = r.tx_hash AND t.state = 'pending')`)
    // Mined (success, reverted, or cancelled by a no-op) or dropped: the transaction stored for
    // this holder, after its take, not an earlier one dropped under the same hash (a request
    // sent again at the same nonce and fees signs to the same bytes). Past the unsent TTL any
    // statement sees the holder's own transaction, so then the time need not be trusted.
    const settledTx = sql.literal(`
      EXISTS (SELECT 1 FROM relayer_tx_attempts a JOIN relayer_txs t ON t.id = a.tx_id
              WHERE a.hash = r.tx_hash AND t.state <> 'pending'
                AND (t.created_at >= r.taken_at OR r.taken_at < now() - '${ttl}'::interval))`)
    // Unlinked and its taker gone: the holder lock it took it under is held by no session.
    const holderGone = sql.literal(`(r.holder IS NOT NULL AND NOT ${lockedBy("r.holder")})`)
    // Mined and still shallow enough for a reorg to make it pending again.
    const unconfirmedTx = sql.literal(`
      EXISTS (SELECT 1 FROM relayer_tx_attempts a JOIN relayer_txs t ON t.id = a.tx_id
              WHERE a.hash = r.tx_hash AND t.state = 'mined' AND t.confirmed_at IS NULL)`)

    // Rows of this account whose transaction is settled for good: nothing can revive them. Pruned
    // by the statement that takes the first key, leaving the keys being taken alone (one statement
    // must not both delete and take over a row).
    const pruneSettled = (vault: string, id: string, taking: ReadonlyArray<ReservationKey>) => sql`
      WITH pruned AS (
        DELETE FROM relayer_nonce_reservations r
        WHERE r.vault = ${vault} AND r.account_id = ${id} AND r.tx_hash IS NOT NULL
          AND (r.kind || ':' || r.value::text) NOT IN ${sql.in(taking.map((k) => `${k.kind}:${k.value.toString()}`))}
          AND ${settledTx} AND NOT ${pendingTx} AND NOT ${unconfirmedTx}
      )`

    const takeOne = (
      vault: string,
      id: string,
      key: ReservationKey,
      token: string,
      holder: string | null,
      prune: Statement.Fragment
    ) =>
      sql<{ readonly token: string }>`
        ${prune}
        INSERT INTO relayer_nonce_reservations AS r (vault, account_id, kind, value, token, holder)
        VALUES (${vault}, ${id}, ${key.kind}, ${key.value.toString()}, ${token}, ${holder}::bigint)
        ON CONFLICT (vault, account_id, kind, value) DO UPDATE
          SET token = excluded.token, holder = excluded.holder, tx_hash = NULL, taken_at = now()
          WHERE (r.tx_hash IS NULL AND (r.taken_at < now() - ${ttl}::interval OR ${holderGone}))
             OR (r.tx_hash IS NOT NULL AND ${settledTx} AND NOT ${pendingTx})
        RETURNING token`.pipe(
        Effect.flatMap((rows) => (rows.length === 1 ? Effect.void : Effect.fail(new Held({ key }))))
      )

    /** Whether a held key has a transaction linked: what its refusal may say. */
    const linked = (vault: string, id: string, key: ReservationKey) =>
      sql<{ readonly linked: boolean }>`
        SELECT tx_hash IS NOT NULL AS linked FROM relayer_nonce_reservations
        WHERE vault = ${vault} AND account_id = ${id} AND kind = ${key.kind}
          AND value = ${key.value.toString()}`.pipe(
        Effect.map((rows) => rows[0]?.linked === true),
        // The refusal stands whatever this read says; without an answer it claims nothing.
        Effect.orElseSucceed(() => false)
      )

    const take: NonceReservationsShape["take"] = (vault, id, keys) => {
      const scope = [vault.toLowerCase(), id.toLowerCase()] as const
      return Effect.gen(function* () {
        const token = randomUUID()
        const holder = options.holder === undefined ? null : yield* options.holder.key
        const taking = ordered(keys)
        const prune = pruneSettled(...scope, taking)
        // One key is one statement, atomic on its own: no transaction's two extra round trips.
        yield* taking.length === 1 && taking[0] !== undefined
          ? takeOne(...scope, taking[0], token, holder, prune)
          : Effect.forEach(
              taking,
              (key, i) => takeOne(...scope, key, token, holder, i === 0 ? prune : sql.literal("")),
              { discard: true }
            ).pipe(sql.withTransaction)
        return { vault: scope[0], accountId: scope[1], token }
      }).pipe(
        Effect.catchTags({
          Held: (held) =>
            Effect.flatMap(linked(...scope, held.key), (isLinked) =>
              Effect.fail(heldBy(held.key.kind, isLinked))
            ),
          SqlError: (_: SqlError) => Effect.fail(unavailable())
        })
      )
    }

    const linkOnStore: NonceReservationsShape["linkOnStore"] = (reservation) => (txHash) =>
      sql`
        UPDATE relayer_nonce_reservations SET tx_hash = ${txHash.toLowerCase()}
        WHERE vault = ${reservation.vault} AND account_id = ${reservation.accountId}
          AND token = ${reservation.token} AND tx_hash IS NULL`

    const deleteRows = (reservation: Reservation) =>
      sql`
        DELETE FROM relayer_nonce_reservations
        WHERE vault = ${reservation.vault} AND account_id = ${reservation.accountId}
          AND token = ${reservation.token} AND tx_hash IS NULL`
    // A release the database did not answer (an outage) is tried again in the background until
    // it does, within the unsent TTL: this process's holder lock is taken again under the same
    // key after the outage, so the rows would otherwise hold the request's nonces, and refuse its
    // client's retries as "being processed", for the whole TTL (docs/operations.md "Replicas on
    // one PostgreSQL"). The token makes a late delete harmless to a later taker.
    const release: NonceReservationsShape["release"] = (reservation) =>
      deleteRows(reservation).pipe(
        Effect.asVoid,
        Effect.catchAll(() =>
          Effect.logWarning(
            "nonce reservations: could not release a reservation; trying again until the database answers"
          ).pipe(
            Effect.zipRight(
              deleteRows(reservation).pipe(
                Effect.retry(Schedule.spaced(releaseRetryInterval).pipe(Schedule.upTo(unsentTtl))),
                Effect.tapError(() =>
                  Effect.logWarning(
                    "nonce reservations: a reservation could not be released; it expires unlinked"
                  )
                ),
                Effect.ignore,
                Effect.forkDaemon
              )
            ),
            Effect.asVoid
          )
        )
      )

    // The index of migration 0014 finds the call by its md5; the comparison of the data decides.
    // The first attempt's hash: the one the reservations were linked to, which any later
    // attempt's status follows.
    const storedFor: NonceReservationsShape["storedFor"] = (vault, data) =>
      sql<{ readonly hash: string }>`
        SELECT a.hash FROM relayer_txs t JOIN relayer_tx_attempts a ON a.tx_id = t.id
        WHERE t.to_address = ${vault.toLowerCase()} AND md5(t.data) = md5(${data.toLowerCase()})
          AND t.data = ${data.toLowerCase()} AND t.purpose = 'request' AND t.state <> 'dropped'
        ORDER BY t.id DESC, a.seq
        LIMIT 1`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (row) => row.hash as Hex)),
        Effect.mapError(unavailable)
      )

    return { take, linkOnStore, release, storedFor }
  })

export class NonceReservations extends Context.Tag("NonceReservations")<
  NonceReservations,
  NonceReservationsShape
>() {
  /** Reservations in the relayer's database, held by this process while it runs. */
  static readonly layer: Layer.Layer<NonceReservations, SqlError, SqlClient> = Layer.scoped(
    NonceReservations,
    Effect.flatMap(reservationHolder, (holder) => makeNonceReservations({ holder }))
  )

  /** Holds nothing: for pipelines under test that have no database and send nothing. */
  static readonly test: Layer.Layer<NonceReservations> = Layer.succeed(NonceReservations, {
    take: (vault, id) => Effect.succeed({ vault, accountId: id, token: "" }),
    linkOnStore: () => undefined,
    release: () => Effect.void,
    storedFor: () => Effect.succeedNone
  })
}
