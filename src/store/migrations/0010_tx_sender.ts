/**
 * The transaction sender's outbox: every transaction the relayer signs, stored before it is
 * broadcast, so that a restart resumes watching it and no nonce is ever used twice.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient
  // One row per transaction the sender owes the chain: a request (what `submit` was given) or a
  // no-op self-transfer that fills a nonce gap. `nonce` is the one it currently holds (it moves
  // only when an outsider used it first). `state` goes pending -> mined | dropped; `outcome` is
  // success | reverted | cancelled (replaced by a no-op) when mined, the reason when dropped.
  yield* sql`
    CREATE TABLE relayer_txs (
      id           bigserial     PRIMARY KEY,
      chain_id     integer       NOT NULL,
      sender       text          NOT NULL,
      nonce        bigint        NOT NULL,
      purpose      text          NOT NULL,
      to_address   text          NOT NULL,
      data         text          NOT NULL,
      value        numeric(78,0) NOT NULL,
      gas          numeric(78,0) NOT NULL,
      state        text          NOT NULL,
      outcome      text,
      mined_hash   text,
      block_number bigint,
      created_at   timestamptz   NOT NULL DEFAULT now(),
      settled_at   timestamptz
    )`
  // A nonce belongs to at most one live (pending or mined) transaction: reuse is impossible even
  // if two senders raced past the lock. A dropped transaction never reached a node, so its nonce
  // is free again.
  yield* sql`
    CREATE UNIQUE INDEX relayer_txs_live_nonce ON relayer_txs (chain_id, sender, nonce)
    WHERE state <> 'dropped'`
  yield* sql`CREATE INDEX relayer_txs_pending ON relayer_txs (chain_id, sender, nonce) WHERE state = 'pending'`
  // Every signed transaction, append-only: the original, fee bumps, no-op cancellations and
  // re-signatures at a new nonce. Any of these hashes leads back to its transaction. A request
  // dropped unsent and then sent again at the same nonce signs to the very same bytes, so a hash
  // may belong to a dropped transaction and to the live one after it.
  yield* sql`
    CREATE TABLE relayer_tx_attempts (
      seq                      bigserial     PRIMARY KEY,
      hash                     text          NOT NULL,
      tx_id                    bigint        NOT NULL REFERENCES relayer_txs (id),
      nonce                    bigint        NOT NULL,
      kind                     text          NOT NULL,
      max_fee_per_gas          numeric(78,0) NOT NULL,
      max_priority_fee_per_gas numeric(78,0) NOT NULL,
      raw                      text          NOT NULL,
      signed_at                timestamptz   NOT NULL DEFAULT now(),
      UNIQUE (hash, tx_id)
    )`
  yield* sql`CREATE INDEX relayer_tx_attempts_by_tx ON relayer_tx_attempts (tx_id, seq)`
})
