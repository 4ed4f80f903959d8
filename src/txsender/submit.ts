/**
 * Submission: requests taken together under one hold of the key's lock get the next nonces in
 * turn, each signed, stored and only then broadcast. A refusal of its nonce, fee or a gap below it
 * is worked out here (`nextSubmitStep`); once stored, a request is the monitor's to finish and its
 * caller gets the hash. Nothing stored means a refusal: `TxSubmitError`, nothing sent.
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Cause, Deferred, Effect, Option } from "effect"
import type { Hex } from "viem"
import type { ChainRequestError } from "../chain/ChainClient.js"
import { describeFailure } from "../logging.js"
import { HotKeyUnderfunded, SendUnavailable, TxRejected, type TxRequest, type TxSubmitError } from "./api.js"
import { type SenderCore, sendOutcome } from "./core.js"
import { feesOf, maxBig, nextSubmitStep } from "./decisions.js"
import { type Fees, initialFees, replacementFees } from "./fees.js"
import type { KeyLock, LockTimeout } from "./lock.js"
import type { Payload, Sender, SignedAttempt, TxStoreError } from "./store.js"

/** Requests taken together under one hold of the lock. */
export const MAX_BATCH = 64

export interface Job {
  readonly request: TxRequest
  readonly done: Deferred.Deferred<Hex, TxSubmitError>
}

const complete = (job: Job, hash: Hex) => Deferred.succeed(job.done, hash)
export const refuse = (job: Job, error: TxSubmitError) => Deferred.fail(job.done, error)

/** Sends a batch of queued requests, holding the key; every job is completed or refused. */
export const makeSubmitBatch = (core: SenderCore, withLock: KeyLock) => {
  const { chain, store, address, cap, metrics } = core

  /**
   * Sends one request at `nonce` (or later); returns the lowest nonce still free after it. Fails
   * only when nothing was stored, leaving `nonce` free.
   */
  const submitOne = (
    s: Sender,
    job: Job,
    nonce: bigint,
    estimate: Fees
  ): Effect.Effect<bigint, TxStoreError> => {
    // The latest attempt known to be stored: once there is one, the request is the monitor's
    // to finish whatever happens here, and the caller gets its hash.
    let stored: SignedAttempt | undefined
    return Effect.gen(function* () {
      const payload: Payload = {
        to: job.request.to,
        data: job.request.data,
        value: job.request.value ?? 0n,
        gas: job.request.gas
      }
      let attempt = yield* core.sign(s, payload, nonce, initialFees(estimate, cap), "original")
      const txId = yield* store.insert(s, "request", payload, attempt, job.request.storedWith?.(attempt.hash))
      stored = attempt
      for (let round = 1; ; round++) {
        const result = yield* core.broadcast(attempt.raw)
        switch (nextSubmitStep(result, round)) {
          case "done":
            // Accepted, or possibly lost on the way: either way it is stored and the monitor
            // re-broadcasts it for as long as no node holds it.
            yield* complete(job, attempt.hash)
            return attempt.nonce + 1n
          case "renonce": {
            // Another sender used this nonce: sign again above everything the node knows.
            const chainNext = BigInt(yield* chain.getTransactionCount(address, "pending"))
            const next = maxBig(attempt.nonce + 1n, chainNext)
            attempt = yield* core.sign(s, payload, next, feesOf(attempt), "renonce")
            yield* store.addAttempt(txId, attempt)
            stored = attempt
            yield* metrics.recordRenonce
            break
          }
          case "heal_gap": {
            // A lower nonce is missing from the node: restore it, then offer this one again.
            const chainNext = BigInt(yield* chain.getTransactionCount(address, "pending"))
            yield* core.healGap(s, chainNext, attempt.nonce, estimate)
            break
          }
          case "reprice": {
            const fresh = yield* chain.estimateFeesPerGas
            const fees = replacementFees(feesOf(attempt), fresh, cap)
            if (Option.isNone(fees)) {
              // Over the cap: it waits stored, re-broadcast by the monitor as fees allow.
              yield* complete(job, attempt.hash)
              return attempt.nonce + 1n
            }
            attempt = yield* core.sign(s, payload, attempt.nonce, fees.value, "reprice")
            yield* store.addAttempt(txId, attempt)
            stored = attempt
            break
          }
          case "drop": {
            // No node holds any attempt of it, so its nonce is free for the next request.
            const underfunded = result._tag === "Refused" && result.kind === "insufficient_funds"
            yield* store.markDropped(txId, underfunded ? "insufficient_funds" : "rejected")
            stored = undefined
            yield* metrics.recordSettled("dropped")
            yield* Effect.logWarning("tx sender: the node refused a transaction; nothing was sent").pipe(
              Effect.annotateLogs({ class: sendOutcome(result) })
            )
            yield* refuse(job, underfunded ? new HotKeyUnderfunded() : new TxRejected())
            return attempt.nonce
          }
        }
      }
    }).pipe(
      Effect.catchAll((error): Effect.Effect<bigint, TxStoreError> => {
        const kept = stored
        if (kept === undefined) {
          return error._tag === "TxStoreError"
            ? Effect.fail(error)
            : Effect.as(refuse(job, new SendUnavailable({ reason: "chain" })), nonce)
        }
        // A read or write failed after the request was stored: it stays pending (a failed drop
        // included, which then goes out once the key is funded) and the monitor carries it on.
        return Effect.as(complete(job, kept.hash), kept.nonce + 1n)
      })
    )
  }

  return (jobs: ReadonlyArray<Job>): Effect.Effect<void> =>
    Effect.gen(function* () {
      const s = yield* core.sender
      yield* withLock(
        Effect.gen(function* () {
          // The monitor's fresh reading when there is one (core.ts), else the chain's answer.
          const reading = yield* core.freshReading
          const [chainNext, estimate, stored] = yield* Effect.all(
            [
              reading === undefined
                ? chain.getTransactionCount(address, "pending")
                : Effect.succeed(Number(reading.chainNext)),
              reading === undefined ? chain.estimateFeesPerGas : Effect.succeed(reading.fees),
              store.nextNonce(s)
            ],
            { concurrency: "unbounded" }
          )
          // Above everything this relayer stored and everything the node knows of this key.
          let next = maxBig(stored, BigInt(chainNext))
          for (const job of jobs) {
            next = yield* submitOne(s, job, next, estimate).pipe(
              Effect.catchAll((error) =>
                Effect.as(
                  refuse(
                    job,
                    new SendUnavailable({ reason: error._tag === "TxStoreError" ? "store" : "chain" })
                  ),
                  next
                )
              )
            )
          }
        })
      )
    }).pipe(
      Effect.catchAll((error: ChainRequestError | TxStoreError | LockTimeout | SqlError) => {
        const reason =
          error._tag === "LockTimeout"
            ? "lock"
            : error._tag === "TxStoreError" || error._tag === "SqlError"
              ? "store"
              : "chain"
        return Effect.forEach(jobs, (job) => refuse(job, new SendUnavailable({ reason })), {
          discard: true
        })
      }),
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
