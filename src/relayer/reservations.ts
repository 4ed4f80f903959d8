/**
 * Nonce reservations (migration 0012): the account nonces and bind nonces a relayed transaction
 * will consume, held from the moment its request passed its checks until the transaction is mined
 * or dropped. A second request for a held nonce is refused with 409 `nonce_mismatch` before it is
 * simulated, so duplicates posted together, to one replica or to several sharing one database,
 * cost no gas (docs/relayer.md §4, docs/protocol.md §7).
 *
 * Liveness is read, not written: a row is live while the transaction its hash leads to
 * (relayer_tx_attempts → relayer_txs) is pending, or, with no transaction yet, for
 * `unsentTtl` after it was taken (a crash between taking and sending must not hold a nonce for
 * ever). So a transaction that is mined (success, reverted, or cancelled by a no-op) or dropped
 * frees its nonces without any step of the sender's, and a reorg that makes it pending again
 * holds them again. Taking over a dead row happens inside the INSERT (ON CONFLICT DO UPDATE …
 * WHERE dead), which PostgreSQL and PGlite serialize on the primary key: two takers cannot both
 * win.
 */
import { randomUUID } from "node:crypto"
import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type * as Statement from "@effect/sql/Statement"
import { Array as Arr, Context, Data, Duration, Effect, Layer } from "effect"
import type { NonEmptyReadonlyArray } from "effect/Array"
import type { Address, Hex } from "viem"
import { NonceMismatch, Unavailable } from "../../schema/errors.js"
import type { TxRequest } from "../txsender/api.js"

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
  /** Frees the rows (nothing was sent). Never fails: unreleased rows expire after `unsentTtl`. */
  readonly release: (reservation: Reservation) => Effect.Effect<void>
}

/** How long a row with no transaction yet holds: longer than any request takes to reach the sender. */
export const DEFAULT_UNSENT_TTL = Duration.minutes(2)

class Held extends Data.TaggedError("Held")<{ readonly kind: ReservationKind }> {}

const inFlight = (kind: ReservationKind) =>
  new NonceMismatch({
    message:
      kind === "nonce"
        ? "a transaction for this nonce is already in flight; retry once it is mined or dropped"
        : "a transaction for this bindNonce is already in flight; retry once it is mined or dropped"
  })

const unavailable = () => new Unavailable({ message: "the relayer's database is not answering" })

/** Keys in one order for every taker, so two transactions taking overlapping sets cannot deadlock. */
const ordered = (keys: ReadonlyArray<ReservationKey>) =>
  Arr.dedupeWith(
    [...keys].sort((a, b) =>
      a.kind !== b.kind ? (a.kind < b.kind ? -1 : 1) : a.value < b.value ? -1 : a.value > b.value ? 1 : 0
    ),
    (a, b) => a.kind === b.kind && a.value === b.value
  )

export const makeNonceReservations = (options: { readonly unsentTtl?: Duration.DurationInput } = {}) =>
  Effect.map(SqlClient, (sql): NonceReservationsShape => {
    const ttl = `${Duration.toMillis(options.unsentTtl ?? DEFAULT_UNSENT_TTL)} milliseconds`
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
      prune: Statement.Fragment
    ) =>
      sql<{ readonly token: string }>`
        ${prune}
        INSERT INTO relayer_nonce_reservations AS r (vault, account_id, kind, value, token)
        VALUES (${vault}, ${id}, ${key.kind}, ${key.value.toString()}, ${token})
        ON CONFLICT (vault, account_id, kind, value) DO UPDATE
          SET token = excluded.token, tx_hash = NULL, taken_at = now()
          WHERE (r.tx_hash IS NULL AND r.taken_at < now() - ${ttl}::interval)
             OR (r.tx_hash IS NOT NULL AND ${settledTx} AND NOT ${pendingTx})
        RETURNING token`.pipe(
        Effect.flatMap((rows) =>
          rows.length === 1 ? Effect.void : Effect.fail(new Held({ kind: key.kind }))
        )
      )

    const take: NonceReservationsShape["take"] = (vault, id, keys) =>
      Effect.gen(function* () {
        const scope = [vault.toLowerCase(), id.toLowerCase()] as const
        const token = randomUUID()
        const taking = ordered(keys)
        const prune = pruneSettled(...scope, taking)
        // One key is one statement, atomic on its own: no transaction's two extra round trips.
        yield* taking.length === 1 && taking[0] !== undefined
          ? takeOne(...scope, taking[0], token, prune)
          : Effect.forEach(
              taking,
              (key, i) => takeOne(...scope, key, token, i === 0 ? prune : sql.literal("")),
              { discard: true }
            ).pipe(sql.withTransaction)
        return { vault: scope[0], accountId: scope[1], token }
      }).pipe(
        Effect.catchTags({
          Held: (held) => Effect.fail(inFlight(held.kind)),
          SqlError: (_: SqlError) => Effect.fail(unavailable())
        })
      )

    const linkOnStore: NonceReservationsShape["linkOnStore"] = (reservation) => (txHash) =>
      sql`
        UPDATE relayer_nonce_reservations SET tx_hash = ${txHash.toLowerCase()}
        WHERE vault = ${reservation.vault} AND account_id = ${reservation.accountId}
          AND token = ${reservation.token}`

    const release: NonceReservationsShape["release"] = (reservation) =>
      sql`
        DELETE FROM relayer_nonce_reservations
        WHERE vault = ${reservation.vault} AND account_id = ${reservation.accountId}
          AND token = ${reservation.token}`.pipe(
        Effect.asVoid,
        Effect.catchAll(() =>
          Effect.logWarning("nonce reservations: could not release a reservation; it expires unlinked")
        )
      )

    return { take, linkOnStore, release }
  })

export class NonceReservations extends Context.Tag("NonceReservations")<
  NonceReservations,
  NonceReservationsShape
>() {
  /** Reservations in the relayer's database. */
  static readonly layer: Layer.Layer<NonceReservations, never, SqlClient> = Layer.effect(
    NonceReservations,
    makeNonceReservations()
  )

  /** Holds nothing: for pipelines under test that have no database and send nothing. */
  static readonly unguarded: Layer.Layer<NonceReservations> = Layer.succeed(NonceReservations, {
    take: (vault, id) => Effect.succeed({ vault, accountId: id, token: "" }),
    linkOnStore: () => undefined,
    release: () => Effect.void
  })
}
