/**
 * Submission: the requests taken together under one hold of the key's lock are signed at
 * consecutive nonces, stored in one statement and then broadcast in turn. A refusal of a nonce,
 * fee or a gap below it is worked out here (`nextSubmitStep`); once stored, a request is the
 * monitor's to finish and its caller gets the hash. Nothing stored, or a request the node refuses
 * outright (it is dropped), means a refusal: `TxSubmitError`, nothing of it sent.
 *
 * The batch's nonces stay contiguous whatever the node answers in the middle of it: a request
 * refused outright frees its nonce, so each request stored above it, not broadcast yet, is
 * re-signed one nonce lower first; a request whose nonce another sender used (with any stored
 * above it whose nonces that sender used too) goes to the end of the batch and is re-signed there.
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Cause, Chunk, Clock, Data, Deferred, Effect, Exit, Option } from "effect"
import type { Hex } from "viem"
import type { ChainRequestError } from "../chain/ChainClient.js"
import { describeFailure } from "../logging.js"
import { type SenderCore, sendOutcome } from "./core.js"
import { feesOf, maxBig, nextSubmitStep } from "./decisions.js"
import { type Fees, initialFees, replacementFees } from "./fees.js"
import { bounded, type HoldExpired, type KeyHold, type KeyLock, LockLost, type LockTimeout } from "./lock.js"
import {
  type NewTransaction,
  type Payload,
  refusedByDatabase,
  type Sender,
  type SignedAttempt,
  type TxStoreError
} from "./store.js"
import {
  HotKeyUnderfunded,
  SendUnavailable,
  TxRejected,
  type TxRequest,
  type TxSubmitError
} from "./TxSenderShape.js"

/** The batch's statement got no answer and its rows were not found: it may yet be stored. */
class StoreOutcomeUnknown extends Data.TaggedError("StoreOutcomeUnknown")<{}> {}

/** Requests taken together under one hold of the lock. */
export const MAX_BATCH = 64

export interface Job {
  readonly request: TxRequest
  readonly done: Deferred.Deferred<Hex, TxSubmitError>
  /** When its caller queued it: its wait for the key's lock counts from here. */
  readonly queuedAtMs?: number
}

const complete = (job: Job, hash: Hex) => Deferred.succeed(job.done, hash)
export const refuse = (job: Job, error: TxSubmitError) => Deferred.fail(job.done, error)

/** A request of the batch, stored. */
interface Stored {
  readonly job: Job
  readonly payload: Payload
  readonly txId: string
  /** Its latest stored signature. */
  attempt: SignedAttempt
  /** Broadcasts so far; `nextSubmitStep` bounds them. */
  rounds: number
  /** Another sender used its nonce: it was sent to the end of the batch. */
  requeued: boolean
  /** Every signature broadcast so far, any of which a node may hold. */
  readonly broadcast: Array<Hex>
}

/** After a request's turn: the lowest nonce still free for the batch, and whether it comes again. */
interface Turn {
  readonly next: bigint
  readonly again: boolean
}

/**
 * Sends a batch of queued requests, holding the key; every job is completed or refused. A batch
 * waits for the key's lock until its oldest caller has waited `lockWaitMs` (the lock's own wait
 * when absent), so no caller waits longer for it, however many batches are ahead.
 */
export const makeSubmitBatch = (core: SenderCore, withLock: KeyLock, lockWaitMs?: number) => {
  const { chain, store, address, cap, metrics } = core

  /**
   * The turn of a stored request, at `next`. Whatever happens once a request is stored, its caller
   * gets its hash or, when the node refused it and it was dropped, a refusal. Fails only with
   * `LockLost`, before broadcasting, or `HoldExpired`, when an RPC went unanswered past the hold's
   * deadline: the batch then stops sending (see the end of the batch).
   */
  const turn = (
    s: Sender,
    entry: Stored,
    next: bigint,
    estimate: Fees
  ): Effect.Effect<Turn, LockLost | HoldExpired, KeyHold> =>
    Effect.gen(function* () {
      // Its nonce was used by the sender that took the one below: it goes to the end too.
      if (entry.attempt.nonce < next && !entry.requeued) {
        entry.requeued = true
        return { next, again: true }
      }
      if (entry.attempt.nonce !== next) {
        // Not broadcast at its own nonce: a refusal below freed a lower one, or it was requeued.
        const moved = yield* core.sign(s, entry.payload, next, feesOf(entry.attempt), "renonce")
        yield* store.addAttempt(entry.txId, moved)
        entry.attempt = moved
        if (entry.requeued) yield* metrics.recordRenonce
      }
      for (;;) {
        const attempt = entry.attempt
        entry.broadcast.push(attempt.hash)
        const result = yield* core.broadcast(attempt.raw)
        switch (nextSubmitStep(result, ++entry.rounds)) {
          case "done":
            // Accepted, or possibly lost on the way: either way it is stored and the monitor
            // re-broadcasts it for as long as no node holds it.
            yield* complete(entry.job, attempt.hash)
            return { next: attempt.nonce + 1n, again: false }
          case "renonce": {
            // "Nonce too low" also answers a retry of our own broadcast whose first answer was
            // lost after the node took it: then it is out, and signing it again would send it
            // twice.
            const own = yield* heldByNode(entry.broadcast)
            if (own !== undefined) {
              yield* complete(entry.job, own)
              return { next: attempt.nonce + 1n, again: false }
            }
            // Another sender used this nonce: the request comes again after the rest of the
            // batch, above everything the node knows.
            const chainNext = BigInt(
              yield* bounded("eth_getTransactionCount", chain.getTransactionCount(address, "pending"))
            )
            entry.requeued = true
            return { next: maxBig(attempt.nonce + 1n, chainNext), again: true }
          }
          case "heal_gap": {
            // A lower nonce is missing from the node: restore it, then offer this one again.
            const chainNext = BigInt(
              yield* bounded("eth_getTransactionCount", chain.getTransactionCount(address, "pending"))
            )
            yield* core.healGap(s, chainNext, attempt.nonce, estimate)
            break
          }
          case "reprice": {
            const fresh = yield* bounded("estimateFeesPerGas", chain.estimateFeesPerGas)
            const fees = replacementFees(feesOf(attempt), fresh, cap)
            if (Option.isNone(fees)) {
              // Over the cap: it waits stored, re-broadcast by the monitor as fees allow.
              yield* complete(entry.job, attempt.hash)
              return { next: attempt.nonce + 1n, again: false }
            }
            const repriced = yield* core.sign(s, entry.payload, attempt.nonce, fees.value, "reprice")
            yield* store.addAttempt(entry.txId, repriced)
            entry.attempt = repriced
            break
          }
          case "drop": {
            // No node holds any attempt of it, so its nonce is free for the next request.
            const underfunded = result._tag === "Refused" && result.kind === "insufficient_funds"
            // Dropped and refused together: a stop in between must not answer with its hash.
            yield* store.markDropped(entry.txId, underfunded ? "insufficient_funds" : "rejected").pipe(
              Effect.tap(() => refuse(entry.job, underfunded ? new HotKeyUnderfunded() : new TxRejected())),
              Effect.uninterruptible
            )
            yield* metrics.recordSettled("dropped")
            yield* Effect.logWarning("tx sender: the node refused a transaction; nothing was sent").pipe(
              Effect.annotateLogs({ class: sendOutcome(result) })
            )
            return { next: attempt.nonce, again: false }
          }
        }
      }
    }).pipe(
      // A read or write failed, or a defect: the request stays pending at its latest stored
      // signature (a failed drop included, which the monitor then keeps offering and replacing),
      // the monitor carries it on, and no later request of the batch may take that nonce. The
      // lock lost, or the hold expired: the batch stops (its caller gets the hash at its end).
      Effect.catchAllCause((cause): Effect.Effect<Turn, LockLost | HoldExpired> => {
        if (Cause.isInterruptedOnly(cause)) return Effect.interrupt
        const failures = Cause.failures(cause)
        if (Chunk.some(failures, (e) => e._tag === "LockLost")) return Effect.fail(new LockLost())
        const expired = Chunk.findFirst(failures, (e): e is HoldExpired => e._tag === "HoldExpired")
        if (Option.isSome(expired)) return Effect.fail(expired.value)
        return Effect.gen(function* () {
          if (Cause.isDie(cause))
            yield* Effect.logError("tx sender: a stored request's turn failed; it stays pending").pipe(
              Effect.annotateLogs("failure", describeFailure(cause))
            )
          yield* complete(entry.job, entry.attempt.hash)
          return { next: maxBig(next, entry.attempt.nonce + 1n), again: false }
        })
      })
    )

  /** The first of `hashes`, newest first, that a node holds, pending or mined. */
  const heldByNode = (hashes: ReadonlyArray<Hex>) =>
    Effect.gen(function* () {
      for (const hash of [...hashes].reverse())
        if (Option.isSome(yield* bounded("eth_getTransactionByHash", chain.getTransaction(hash)))) return hash
      return undefined
    })

  /**
   * Stores the batch in one statement; its ids, or undefined when the statement's answer was lost
   * but the batch is found stored. A statement the database refused stored nothing
   * (`TxStoreError`); one whose answer never came may have been stored or may still be
   * (`StoreOutcomeUnknown`).
   */
  const storeBatch = (s: Sender, entries: ReadonlyArray<NewTransaction>) =>
    store.insert(s, entries).pipe(
      Effect.catchTag(
        "TxStoreError",
        (error): Effect.Effect<undefined, TxStoreError | StoreOutcomeUnknown> =>
          refusedByDatabase(error.cause)
            ? Effect.fail(error)
            : store.byHash((entries[0] as NewTransaction).attempt.hash).pipe(
                Effect.flatMap((found) =>
                  Option.isSome(found) && found.value.state !== "dropped"
                    ? Effect.succeed(undefined)
                    : Effect.fail(new StoreOutcomeUnknown())
                ),
                Effect.catchTag("TxStoreError", () => Effect.fail(new StoreOutcomeUnknown()))
              )
      )
    )

  return (jobs: ReadonlyArray<Job>): Effect.Effect<void> =>
    Effect.gen(function* () {
      const s = yield* core.sender
      // What is left of the oldest caller's wait.
      const now = yield* Clock.currentTimeMillis
      const oldest = Math.min(...jobs.map((job) => job.queuedAtMs ?? now))
      const waitMs = lockWaitMs === undefined ? undefined : Math.max(0, lockWaitMs - (now - oldest))
      yield* withLock(
        Effect.gen(function* () {
          // The monitor's fresh reading when there is one (core.ts), else the chain's answer.
          const reading = yield* core.freshReading
          const [chainNext, estimate, stored] = yield* Effect.all(
            [
              reading === undefined
                ? bounded("eth_getTransactionCount", chain.getTransactionCount(address, "pending"))
                : Effect.succeed(Number(reading.chainNext)),
              reading === undefined
                ? bounded("estimateFeesPerGas", chain.estimateFeesPerGas)
                : Effect.succeed(reading.fees),
              store.nextNonce(s)
            ],
            { concurrency: "unbounded" }
          )
          // Above everything this relayer stored and everything the node knows of this key.
          const first = maxBig(stored, BigInt(chainNext))
          const fees = initialFees(estimate, cap)
          const signed = yield* Effect.forEach(jobs, (job, i) => {
            const payload: Payload = {
              to: job.request.to,
              data: job.request.data,
              value: job.request.value ?? 0n,
              gas: job.request.gas
            }
            return Effect.map(core.sign(s, payload, first + BigInt(i), fees, "original"), (attempt) => ({
              job,
              payload,
              attempt
            }))
          })
          const entries = signed.map(({ job, payload, attempt }) => ({
            purpose: "request" as const,
            payload,
            attempt,
            storedWith: job.request.storedWith?.(attempt.hash)
          }))
          // Uninterruptible from the insert until the completion below is in place: a stop
          // during the statement must not refuse callers whose requests it stored.
          yield* Effect.uninterruptibleMask((restore) =>
            Effect.gen(function* () {
              const ids = yield* storeBatch(s, entries)
              if (ids === undefined) {
                // Stored, though the store's answer was lost: the monitor sends them.
                yield* Effect.forEach(signed, ({ job, attempt }) => complete(job, attempt.hash), {
                  discard: true
                })
                return
              }
              const batch: Array<Stored> = signed.map((entry, i) => ({
                ...entry,
                txId: ids[i] as string,
                rounds: 0,
                requeued: false,
                broadcast: []
              }))
              let next = first
              yield* restore(
                Effect.gen(function* () {
                  for (let i = 0; i < batch.length; i++) {
                    const entry = batch[i] as Stored
                    const { next: after, again } = yield* turn(s, entry, next, estimate)
                    next = after
                    if (again) batch.push(entry)
                  }
                })
              ).pipe(
                // Stopping, the lock lost (or anything else ending the loop early): whatever is
                // still unanswered is stored, and the monitor of whoever holds the lock sends it,
                // after a restart if need be; its caller gets the hash rather than a refusal.
                Effect.onExit((exit) =>
                  Exit.isSuccess(exit)
                    ? Effect.void
                    : Effect.forEach(batch, (entry) => complete(entry.job, entry.attempt.hash), {
                        discard: true
                      })
                )
              )
            })
          )
        }),
        waitMs
      )
    }).pipe(
      Effect.catchAll(
        (
          error:
            | ChainRequestError
            | TxStoreError
            | StoreOutcomeUnknown
            | LockTimeout
            | LockLost
            | HoldExpired
            | SqlError
        ) => {
          // An expired hold before anything was stored: the chain did not answer in time.
          const reason =
            error._tag === "LockTimeout" || error._tag === "LockLost"
              ? "lock"
              : error._tag === "StoreOutcomeUnknown"
                ? "store_unsure"
                : error._tag === "TxStoreError" || error._tag === "SqlError"
                  ? "store"
                  : "chain"
          return Effect.forEach(jobs, (job) => refuse(job, new SendUnavailable({ reason })), {
            discard: true
          })
        }
      ),
      Effect.catchAllCause((cause) =>
        Cause.isInterruptedOnly(cause)
          ? Effect.failCause(cause)
          : Effect.logError("tx sender: a submission batch failed").pipe(
              Effect.annotateLogs("failure", describeFailure(cause)),
              Effect.zipRight(
                Effect.forEach(jobs, (job) => refuse(job, new SendUnavailable({ reason: "internal" })), {
                  discard: true
                })
              )
            )
      )
    )
}
