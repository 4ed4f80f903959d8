/**
 * The only owner of the hot key's nonce. Submissions queue up for one fiber that, holding the
 * key's lock (see `lock.ts`), allocates the next nonce, signs, stores the signed
 * transaction and only then broadcasts it. A second fiber, the monitor, reconciles with the chain
 * at start and every `TX_POLL_INTERVAL_MS`: it settles receipts, re-broadcasts what a node lost,
 * fills nonce gaps with no-op self-transfers, re-signs transactions whose nonce someone else used,
 * and replaces stuck ones at the same nonce with higher fees (or with a no-op when they would now
 * revert). Everything lives in the store, so a restart, or another replica, picks up where this
 * one left off.
 *
 * A transaction is pending until one of its signed attempts is mined (`success`, `reverted`, or
 * `cancelled` when the no-op replacing it was mined) or it is dropped (no node ever held it).
 * Any hash it was signed under reports that one outcome.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import {
  Cause,
  Context,
  Data,
  Deferred,
  Duration,
  Effect,
  identity,
  Layer,
  Metric,
  Option,
  Queue,
  Redacted,
  type Scope
} from "effect"
import { type Address, type Hex, keccak256 } from "viem"
import { privateKeyToAccount } from "viem/accounts"
import { Unavailable } from "../../schema/errors.js"
import type { Bytes32 } from "../../schema/primitives.js"
import type { TxStatus } from "../../schema/relayer.js"
import { ChainClient, type ChainRequestError, type RpcRejectionKind } from "../chain/ChainClient.js"
import { RelayerSettings } from "../config/relayer.js"
import type { TxSenderSettings } from "../config/settings.js"
import { superviseForever } from "../indexer/health.js"
import { describeFailure } from "../logging.js"
import { type Fees, initialFees, replacementFees } from "./fees.js"
import {
  advisoryKey,
  embeddedStatements,
  isEmbeddedDatabase,
  type KeyLock,
  type LockTimeout,
  makeKeyLock
} from "./lock.js"
import {
  hotKeyBalance,
  initialiseMetrics,
  pendingTransactions,
  recordGapFill,
  recordRenonce,
  recordReorged,
  recordReplacement,
  recordReplacementSkipped,
  recordRestart,
  recordSend,
  recordSettled,
  type SendOutcome
} from "./metrics.js"
import {
  type AttemptKind,
  type MinedOutcome,
  makeTxStore,
  type Payload,
  type Sender,
  type SignedAttempt,
  type StoredAttempt,
  type StoredTx,
  type TxStoreError
} from "./store.js"

// ---------------------------------------------------------------------------------------------
// Interface

export interface TxRequest {
  readonly to: Address
  readonly data: Hex
  readonly value?: bigint
  /** Gas limit to send with (the pipeline already applied GAS_LIMIT_MULTIPLIER_BPS). */
  readonly gas: bigint
}

/** The hot key cannot pay for the transaction: an operator must top it up. */
export class HotKeyUnderfunded extends Data.TaggedError("HotKeyUnderfunded")<{}> {
  override get message() {
    return "the relayer's hot key cannot pay for gas"
  }
}

const unavailableMessages = {
  chain: "the chain RPC is not answering",
  store: "the transaction store is not answering",
  lock: "another relayer replica is holding the hot key",
  stopping: "the relayer is shutting down",
  internal: "the transaction sender failed"
} as const

/** Nothing was sent: the chain, the store or the key's lock could not be had, or the sender is stopping. */
export class SendUnavailable extends Data.TaggedError("SendUnavailable")<{
  readonly reason: keyof typeof unavailableMessages
}> {
  override get message() {
    return unavailableMessages[this.reason]
  }
}

/** The node refused the transaction itself (not its nonce, fee or funds); nothing was sent. */
export class TxRejected extends Data.TaggedError("TxRejected")<{}> {
  override get message() {
    return "the node refused the transaction"
  }
}

export type TxSubmitError = HotKeyUnderfunded | SendUnavailable | TxRejected

/** The refusal a client sees for a failed submission: 503 `unavailable`, nothing internal. */
export const txSubmitErrorToApi = (error: TxSubmitError): Unavailable =>
  new Unavailable({
    message: error._tag === "TxRejected" ? "the transaction could not be sent" : error.message
  })

export interface TxSenderShape {
  /** The hot key's address. */
  readonly address: Address
  /** Signs with the next nonce, stores the signed transaction, then broadcasts; returns its hash. */
  readonly submit: (request: TxRequest) => Effect.Effect<Hex, TxSubmitError>
  /** pending | success (with blockNumber) | reverted | unknown; any hash it was ever sent under follows the mined one. */
  readonly status: (hash: Hex) => Effect.Effect<TxStatus, Unavailable>
}

export interface SenderState {
  readonly address: Address
  /** Transactions sent and not yet mined or dropped. */
  readonly pending: number
  /** The nonce the next transaction gets (unless another sender uses it first). */
  readonly nextNonce: bigint
  /** Native balance in wei, as of the monitor's last round. */
  readonly balance: bigint
}

export class TxSender extends Context.Tag("TxSender")<TxSender, TxSenderShape>() {}

/** The hot key's state for health, from the same sender: nothing about any other account. */
export class HotKeyState extends Context.Tag("HotKeyState")<
  HotKeyState,
  { readonly state: Effect.Effect<SenderState, Unavailable> }
>() {}

export interface TxSenderOptions {
  readonly privateKey: Hex
  /** Known up front (settings or deployment file); otherwise asked of the chain on first use. */
  readonly chainId: Option.Option<number>
  readonly replaceAfter: Duration.DurationInput
  readonly maxReplacements: number
  /** Ceiling of `maxFeePerGas`, in wei. */
  readonly maxFeePerGas: bigint
  readonly pollInterval: Duration.DurationInput
  /** How long a submission waits for another replica holding the key. Default 30 s. */
  readonly lockTimeout?: Duration.DurationInput
  /** Excludes other senders of this process; by default the process-wide one of the key. */
  readonly semaphore?: Effect.Semaphore
  /**
   * How deep (the including block counts as 1) a mined transaction must be before the sender
   * stops watching it for reorgs. Default `DEFAULT_TX_CONFIRMATIONS`.
   */
  readonly confirmations?: number
}

export const DEFAULT_TX_CONFIRMATIONS = 12

// ---------------------------------------------------------------------------------------------
// Implementation

/** Requests taken together under one hold of the lock. */
const MAX_BATCH = 64
/** Broadcast rounds of one submission (re-priced, re-nonced or after healing a gap). */
const MAX_SUBMIT_ROUNDS = 4
/** No-ops sent per healing, so a database far ahead of a reset chain cannot flood it. */
const MAX_GAP_FILLS = 64
const NOOP_GAS = 21_000n

type Broadcast =
  | { readonly _tag: "Accepted" }
  | { readonly _tag: "Unavailable" }
  | { readonly _tag: "Refused"; readonly kind: RpcRejectionKind }

const sendOutcome = (result: Broadcast): SendOutcome => {
  switch (result._tag) {
    case "Accepted":
      return "accepted"
    case "Unavailable":
      return "unavailable"
    case "Refused":
      return result.kind === "range_too_large" || result.kind === "other" ? "rejected" : result.kind
  }
}

interface Job {
  readonly request: TxRequest
  readonly done: Deferred.Deferred<Hex, TxSubmitError>
}

const feesOf = (attempt: SignedAttempt): Fees => ({
  maxFeePerGas: attempt.maxFeePerGas,
  maxPriorityFeePerGas: attempt.maxPriorityFeePerGas
})

const maxBig = (a: bigint, b: bigint) => (a > b ? a : b)

const lastAttempt = (tx: StoredTx): StoredAttempt => {
  const last = tx.attempts[tx.attempts.length - 1]
  // The store never returns a transaction without attempts.
  if (last === undefined) throw new Error("transaction without attempts")
  return last
}

const asBytes32 = (hash: Hex): Bytes32 => hash.toLowerCase() as Bytes32

/** The sender and its health view; the sender's fibers stop when the scope closes. */
export const makeTxSenderWithState = (
  options: TxSenderOptions
): Effect.Effect<
  { readonly sender: TxSenderShape; readonly state: Effect.Effect<SenderState, Unavailable> },
  never,
  ChainClient | SqlClient | Scope.Scope
> =>
  Effect.gen(function* () {
    const chain = yield* ChainClient
    // Detected once: the database answered the migrations a moment ago.
    const embedded = yield* isEmbeddedDatabase.pipe(Effect.orElseSucceed(() => false))
    const store = yield* makeTxStore(
      embedded
        ? <A, E, R>(effect: Effect.Effect<A, E, R>) => embeddedStatements.withPermits(1)(effect)
        : identity
    )
    const account = yield* Effect.try(() => privateKeyToAccount(options.privateKey)).pipe(
      Effect.orDieWith(() => new Error("the sender's private key is not a valid secp256k1 key"))
    )
    const address = account.address
    const cap = options.maxFeePerGas
    const replaceAfterMs = Duration.toMillis(options.replaceAfter)
    const confirmations = Math.max(1, options.confirmations ?? DEFAULT_TX_CONFIRMATIONS)
    const withLock: KeyLock = yield* makeKeyLock({
      key: advisoryKey(`relayer-tx-sender:${address.toLowerCase()}`),
      timeout: options.lockTimeout ?? Duration.seconds(30),
      embedded,
      ...(options.semaphore === undefined ? {} : { semaphore: options.semaphore })
    })
    const noop: Payload = { to: address, data: "0x", value: 0n, gas: NOOP_GAS }

    let knownChainId = options.chainId
    const sender: Effect.Effect<Sender, ChainRequestError> = Effect.suspend(() =>
      Option.match(knownChainId, {
        onSome: (chainId) => Effect.succeed(chainId),
        onNone: () =>
          Effect.tap(chain.chainId, (chainId) =>
            Effect.sync(() => {
              knownChainId = Option.some(chainId)
            })
          )
      })
    ).pipe(Effect.map((chainId) => ({ chainId, address: address.toLowerCase() as Address })))

    const sign = (s: Sender, payload: Payload, nonce: bigint, fees: Fees, kind: AttemptKind) =>
      Effect.promise(() =>
        account.signTransaction({
          type: "eip1559",
          chainId: s.chainId,
          nonce: Number(nonce),
          to: payload.to,
          data: payload.data,
          value: payload.value,
          gas: payload.gas,
          maxFeePerGas: fees.maxFeePerGas,
          maxPriorityFeePerGas: fees.maxPriorityFeePerGas
        })
      ).pipe(
        Effect.map(
          (raw): SignedAttempt => ({
            hash: keccak256(raw),
            nonce,
            kind,
            maxFeePerGas: fees.maxFeePerGas,
            maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
            raw
          })
        )
      )

    const broadcast = (raw: Hex): Effect.Effect<Broadcast> =>
      chain.sendRawTransaction(raw).pipe(
        Effect.as<Broadcast>({ _tag: "Accepted" }),
        Effect.catchTags({
          ChainUnavailable: () => Effect.succeed<Broadcast>({ _tag: "Unavailable" }),
          RpcRejected: (e) => Effect.succeed<Broadcast>({ _tag: "Refused", kind: e.kind })
        }),
        Effect.tap((result) => recordSend(sendOutcome(result)))
      )

    /** Which attempt of `tx`, if any, is mined, and how it went. */
    const findMined = (tx: StoredTx) =>
      Effect.gen(function* () {
        for (const attempt of [...tx.attempts].reverse()) {
          const receipt = yield* chain.getTransactionReceipt(attempt.hash)
          if (Option.isSome(receipt)) {
            const outcome: MinedOutcome =
              receipt.value.status === "reverted"
                ? "reverted"
                : attempt.kind === "cancel"
                  ? "cancelled"
                  : "success"
            return Option.some({ attempt, outcome, blockNumber: receipt.value.blockNumber })
          }
        }
        return Option.none()
      })

    // -------------------------------------------------------------------------------------------
    // Gaps: nonces below the highest one in use that no node holds

    /**
     * Makes nonces `from..to-1` reach the node again: re-broadcasts the transaction that holds a
     * nonce, or fills a nonce nobody holds with a no-op. Returns the ids whose re-broadcast was
     * refused as underpriced, which want replacing now rather than after the usual wait.
     */
    const healGap = (s: Sender, from: bigint, to: bigint, estimate: Fees) =>
      Effect.gen(function* () {
        const underpriced = new Set<string>()
        if (to <= from) return underpriced
        const live = new Map((yield* store.pending(s)).map((tx) => [tx.nonce, tx] as const))
        let fills = 0
        for (let nonce = from; nonce < to; nonce++) {
          const tx = live.get(nonce)
          if (tx !== undefined) {
            const result = yield* broadcast(lastAttempt(tx).raw)
            if (result._tag === "Refused" && result.kind === "underpriced") underpriced.add(tx.id)
            continue
          }
          if (fills >= MAX_GAP_FILLS) break
          fills++
          const attempt = yield* sign(s, noop, nonce, initialFees(estimate, cap), "original")
          yield* store.insert(s, "filler", noop, attempt)
          yield* broadcast(attempt.raw)
          yield* recordGapFill
          yield* Effect.logWarning("tx sender: filled a nonce gap with a no-op")
        }
        return underpriced
      })

    // -------------------------------------------------------------------------------------------
    // Submission

    const complete = (job: Job, hash: Hex) => Deferred.succeed(job.done, hash)
    const refuse = (job: Job, error: TxSubmitError) => Deferred.fail(job.done, error)

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
        let attempt = yield* sign(s, payload, nonce, initialFees(estimate, cap), "original")
        const txId = yield* store.insert(s, "request", payload, attempt)
        stored = attempt
        for (let round = 1; ; round++) {
          const result = yield* broadcast(attempt.raw)
          const lastRound = round >= MAX_SUBMIT_ROUNDS
          // Accepted, or possibly lost on the way: either way it is stored and the monitor
          // re-broadcasts it for as long as no node holds it.
          if (result._tag !== "Refused" || (lastRound && result.kind !== "insufficient_funds")) {
            yield* complete(job, attempt.hash)
            return attempt.nonce + 1n
          }
          switch (result.kind) {
            case "nonce_too_low": {
              // Another sender used this nonce: sign again above everything the node knows.
              const chainNext = BigInt(yield* chain.getTransactionCount(address, "pending"))
              const next = maxBig(attempt.nonce + 1n, chainNext)
              attempt = yield* sign(s, payload, next, feesOf(attempt), "renonce")
              yield* store.addAttempt(txId, attempt)
              stored = attempt
              yield* recordRenonce
              break
            }
            case "nonce_too_high": {
              // A lower nonce is missing from the node: restore it, then offer this one again.
              const chainNext = BigInt(yield* chain.getTransactionCount(address, "pending"))
              yield* healGap(s, chainNext, attempt.nonce, estimate)
              break
            }
            case "underpriced": {
              const fresh = yield* chain.estimateFeesPerGas
              const fees = replacementFees(feesOf(attempt), fresh, cap)
              if (Option.isNone(fees)) {
                // Over the cap: it waits stored, re-broadcast by the monitor as fees allow.
                yield* complete(job, attempt.hash)
                return attempt.nonce + 1n
              }
              attempt = yield* sign(s, payload, attempt.nonce, fees.value, "reprice")
              yield* store.addAttempt(txId, attempt)
              stored = attempt
              break
            }
            case "insufficient_funds":
            case "range_too_large":
            case "other": {
              // No node holds any attempt of it, so its nonce is free for the next request.
              const underfunded = result.kind === "insufficient_funds"
              yield* store.markDropped(txId, underfunded ? "insufficient_funds" : "rejected")
              stored = undefined
              yield* recordSettled("dropped")
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

    const submitBatch = (jobs: ReadonlyArray<Job>) =>
      Effect.gen(function* () {
        const s = yield* sender
        yield* withLock(
          Effect.gen(function* () {
            const [chainNext, estimate, stored] = yield* Effect.all(
              [chain.getTransactionCount(address, "pending"), chain.estimateFeesPerGas, store.nextNonce(s)],
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

    // -------------------------------------------------------------------------------------------
    // Monitor

    /** Transactions whose nonce the chain has passed without any of their hashes being mined. */
    let suspects = new Set<string>()
    /** Mined, unconfirmed transactions whose receipt the node did not have on the last round. */
    let vanishing = new Set<string>()
    /** The head at which every mined, unconfirmed transaction was last found where it was stored. */
    let verifiedHead: Hex | undefined
    /** Transactions whose skipped replacement was already counted, so each is counted once. */
    const skipReported = new Set<string>()

    const settle = (
      tx: StoredTx,
      found: { attempt: StoredAttempt; outcome: MinedOutcome; blockNumber: bigint }
    ) =>
      store
        .markMined(tx.id, found.outcome, found.attempt.hash, found.blockNumber)
        .pipe(Effect.zipRight(recordSettled(found.outcome)))

    /** Someone else used the nonce of `tx`: sign it again at a free one, unless it would now revert. */
    const renonce = (s: Sender, tx: StoredTx, estimate: Fees) =>
      Effect.gen(function* () {
        const last = lastAttempt(tx)
        if (tx.purpose === "filler" || last.kind === "cancel") {
          // A gap someone else filled, or a transaction that was being cancelled anyway.
          yield* store.markDropped(tx.id, "nonce_taken")
          return yield* recordSettled("dropped")
        }
        const simulation = yield* chain
          .call({
            from: address,
            to: tx.payload.to,
            data: tx.payload.data,
            value: tx.payload.value,
            gas: tx.payload.gas
          })
          .pipe(Effect.either)
        if (simulation._tag === "Left") {
          if (simulation.left._tag !== "ChainReverted") return
          yield* store.markDropped(tx.id, "nonce_taken")
          yield* Effect.logWarning(
            "tx sender: another sender used a nonce and the transaction would now revert"
          )
          return yield* recordSettled("dropped")
        }
        const [chainNext, stored] = yield* Effect.all([
          chain.getTransactionCount(address, "pending"),
          store.nextNonce(s)
        ])
        const attempt = yield* sign(
          s,
          tx.payload,
          maxBig(stored, BigInt(chainNext)),
          initialFees(estimate, cap),
          "renonce"
        )
        yield* store.addAttempt(tx.id, attempt)
        yield* broadcast(attempt.raw)
        yield* recordRenonce
        yield* Effect.logWarning("tx sender: another sender used a nonce; re-signed at a free one")
      })

    /**
     * Replaces a stuck transaction at its nonce with fees bumped by at least 12.5%. Simulated
     * first: if the head of the queue would now revert, a no-op self-transfer takes its place so
     * the nonce is not held up (later ones simulate against a state their predecessors have not
     * changed yet, so a revert there proves nothing).
     */
    const replace = (s: Sender, tx: StoredTx, isHead: boolean, estimate: Fees) =>
      Effect.gen(function* () {
        const replacements = tx.attempts.filter((a) => a.kind === "bump" || a.kind === "cancel").length
        if (replacements >= options.maxReplacements) {
          if (!skipReported.has(tx.id)) {
            skipReported.add(tx.id)
            yield* recordReplacementSkipped("max_replacements")
            yield* Effect.logWarning("tx sender: a stuck transaction reached TX_MAX_REPLACEMENTS; waiting")
          }
          return
        }
        const last = lastAttempt(tx)
        let payload = tx.purpose === "filler" || last.kind === "cancel" ? noop : tx.payload
        let kind: "bump" | "cancel" = last.kind === "cancel" ? "cancel" : "bump"
        if (payload !== noop) {
          const simulation = yield* chain
            .call({
              from: address,
              to: payload.to,
              data: payload.data,
              value: payload.value,
              gas: payload.gas
            })
            .pipe(Effect.either)
          if (simulation._tag === "Left") {
            if (simulation.left._tag !== "ChainReverted") return
            if (isHead) {
              payload = noop
              kind = "cancel"
            }
          }
        }
        const fees = replacementFees(feesOf(last), estimate, cap)
        if (Option.isNone(fees)) {
          if (!skipReported.has(tx.id)) {
            skipReported.add(tx.id)
            yield* recordReplacementSkipped("fee_cap")
            yield* Effect.logWarning("tx sender: a stuck transaction cannot be bumped within TX_MAX_FEE_GWEI")
          }
          return
        }
        const attempt = yield* sign(s, payload, tx.nonce, fees.value, kind)
        yield* store.addAttempt(tx.id, attempt)
        const result = yield* broadcast(attempt.raw)
        if (result._tag === "Accepted") yield* recordReplacement(kind)
        yield* Effect.logInfo(
          kind === "cancel"
            ? "tx sender: replaced a transaction that would now revert with a no-op"
            : "tx sender: replaced a stuck transaction with higher fees"
        ).pipe(Effect.annotateLogs({ replacement: replacements + 1, class: sendOutcome(result) }))
      })

    /**
     * Mined transactions stay watched until they are `confirmations` deep: whenever the head
     * changes, each is looked up again. One a reorg moved to another block (or whose other
     * attempt is mined now) is recorded there; one whose receipt is gone on two rounds in a row
     * (not a lagging node) is pending again, so the monitor re-broadcasts or replaces it like
     * any stuck transaction. Deep enough, it is confirmed and never looked at again.
     */
    const watchMined = (s: Sender) =>
      Effect.gen(function* () {
        const mined = yield* store.unconfirmed(s)
        if (mined.length === 0) {
          vanishing = new Set()
          verifiedHead = undefined
          return
        }
        const latest = yield* chain
          .getBlock()
          .pipe(Effect.catchTag("BlockNotFound", () => Effect.succeed(undefined)))
        if (latest === undefined || latest.hash === verifiedHead) return
        const head = latest
        const nextVanishing = new Set<string>()
        for (const tx of mined) {
          const found = yield* findMined(tx)
          if (Option.isNone(found)) {
            if (!vanishing.has(tx.id)) {
              nextVanishing.add(tx.id)
              continue
            }
            yield* store.unmined(tx.id)
            yield* recordReorged
            yield* Effect.logWarning(
              "tx sender: a reorg took out a mined transaction before it was confirmed; it is pending again"
            )
            continue
          }
          const { attempt, outcome, blockNumber } = found.value
          if (attempt.hash !== tx.minedHash || blockNumber !== tx.blockNumber || outcome !== tx.outcome) {
            yield* store.remined(tx.id, outcome, attempt.hash, blockNumber)
            yield* Effect.logInfo("tx sender: a reorg moved a mined transaction to another block")
          }
          if (head.number - blockNumber + 1n >= BigInt(confirmations)) yield* store.markConfirmed(tx.id)
        }
        vanishing = nextVanishing
        verifiedHead = nextVanishing.size === 0 ? head.hash : undefined
      })

    /** The work that allocates nonces or sends, done holding the key. */
    const maintain = (s: Sender, taken: ReadonlySet<string>) =>
      Effect.gen(function* () {
        const [live, latest, chainNext, estimate] = yield* Effect.all(
          [
            store.pending(s),
            chain.getTransactionCount(address, "latest"),
            chain.getTransactionCount(address, "pending"),
            chain.estimateFeesPerGas
          ],
          { concurrency: "unbounded" }
        )
        const head = BigInt(latest)
        for (const tx of live) if (taken.has(tx.id) && tx.nonce < head) yield* renonce(s, tx, estimate)
        const unmined = live.filter((tx) => tx.nonce >= head)
        const highest = unmined.reduce((top, tx) => maxBig(top, tx.nonce), -1n)
        const underpriced = yield* healGap(s, BigInt(chainNext), highest + 1n, estimate)
        for (const tx of unmined) {
          const due = lastAttempt(tx).ageMs >= replaceAfterMs || underpriced.has(tx.id)
          if (due) yield* replace(s, tx, tx.nonce === head, estimate)
        }
      })

    /** What the monitor's last round read of the hot key on the chain. */
    let observed: { readonly balance: bigint; readonly chainNext: bigint } | undefined

    const tick = Effect.gen(function* () {
      const s = yield* sender
      // First, so a transaction a reorg took out is among the pending ones below.
      yield* watchMined(s)
      const [latest, chainNext, balance, live] = yield* Effect.all(
        [
          chain.getTransactionCount(address, "latest"),
          chain.getTransactionCount(address, "pending"),
          chain.getBalance(address),
          store.pending(s)
        ],
        { concurrency: "unbounded" }
      )
      yield* Metric.set(hotKeyBalance, balance)
      observed = { balance, chainNext: BigInt(chainNext) }
      const head = BigInt(latest)
      const taken = new Set<string>()
      const nextSuspects = new Set<string>()
      let stillPending = 0
      for (const tx of live) {
        if (tx.nonce >= head) {
          stillPending++
          continue
        }
        const found = yield* findMined(tx).pipe(Effect.option)
        if (Option.isNone(found)) {
          stillPending++
          continue
        }
        if (Option.isSome(found.value)) {
          yield* settle(tx, found.value.value)
          continue
        }
        stillPending++
        // Seen twice, so not a node that updated its nonce before its receipts.
        if (suspects.has(tx.id)) taken.add(tx.id)
        else nextSuspects.add(tx.id)
      }
      suspects = nextSuspects
      yield* Metric.set(pendingTransactions, stillPending)
      const unmined = live.filter((tx) => tx.nonce >= head)
      const needsWork =
        taken.size > 0 ||
        unmined.some((tx) => tx.nonce >= BigInt(chainNext) || lastAttempt(tx).ageMs >= replaceAfterMs)
      if (needsWork) yield* withLock(maintain(s, taken))
    })

    // -------------------------------------------------------------------------------------------
    // Fibers

    const queue = yield* Queue.unbounded<Job>()
    const inFlight = new Set<Job>()
    let stopping = false

    // Added before the fibers are forked, so it runs after they are interrupted.
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        stopping = true
        return Effect.forEach(inFlight, (job) => refuse(job, new SendUnavailable({ reason: "stopping" })), {
          discard: true
        })
      })
    )

    // The indexers' supervision: jittered exponential delays that start over once a run lasted a
    // minute. The failure is logged by its description: a cause may quote a node's URL.
    const supervise = (name: "sender" | "monitor", loop: Effect.Effect<never>) =>
      superviseForever(loop, {
        baseDelayMs: 200,
        maxDelayMs: 30_000,
        onRestart: (cause, delayMs) =>
          Effect.logError(`tx sender: the ${name} fiber failed; restarting`).pipe(
            Effect.annotateLogs({ failure: describeFailure(cause), retry_in_ms: Math.round(delayMs) }),
            Effect.zipRight(recordRestart(name))
          )
      }).pipe(Effect.forkScoped)

    // The tag, and the operation or failure class where there is one: never a node's own text,
    // which may quote the hot key's address.
    const describe = (error: ChainRequestError | TxStoreError | LockTimeout | SqlError) => ({
      error: error._tag,
      ...(error._tag === "TxStoreError" ? { operation: error.operation, cause: error.cause.message } : {}),
      ...(error._tag === "ChainUnavailable" ? { operation: error.operation } : {}),
      ...(error._tag === "RpcRejected" ? { operation: error.operation, class: error.kind } : {})
    })

    let failing = false

    yield* initialiseMetrics
    yield* supervise(
      "sender",
      Queue.takeBetween(queue, 1, MAX_BATCH).pipe(
        Effect.flatMap((jobs) => submitBatch([...jobs])),
        Effect.forever
      )
    )
    yield* supervise(
      "monitor",
      tick.pipe(
        // Logged when reconciliation starts failing and when it recovers, not on every round of
        // an outage.
        Effect.tap(() =>
          Effect.suspend(() => {
            if (!failing) return Effect.void
            failing = false
            return Effect.logInfo("tx sender: reconciliation with the chain recovered")
          })
        ),
        Effect.catchAll((error) =>
          Effect.suspend(() => {
            if (failing) return Effect.logDebug("tx sender: reconciliation still failing")
            failing = true
            return Effect.logWarning("tx sender: reconciliation with the chain failed").pipe(
              Effect.annotateLogs(describe(error))
            )
          })
        ),
        Effect.zipRight(Effect.sleep(options.pollInterval)),
        Effect.forever
      )
    )

    const submit = (request: TxRequest): Effect.Effect<Hex, TxSubmitError> =>
      Effect.suspend(() => {
        if (stopping) return Effect.fail(new SendUnavailable({ reason: "stopping" }))
        return Effect.flatMap(Deferred.make<Hex, TxSubmitError>(), (done) => {
          const job: Job = { request, done }
          inFlight.add(job)
          return Queue.offer(queue, job).pipe(
            Effect.zipRight(Deferred.await(done)),
            Effect.ensuring(Effect.sync(() => inFlight.delete(job)))
          )
        })
      })

    const status = (hash: Hex): Effect.Effect<TxStatus, Unavailable> =>
      Effect.gen(function* () {
        const txHash = asBytes32(hash)
        const found = yield* store.byHash(hash)
        if (Option.isNone(found)) return { txHash, status: "unknown" } as const
        const tx = found.value
        switch (tx.state) {
          case "dropped":
            return { txHash, status: "unknown" } as const
          case "mined":
            return {
              txHash,
              // A cancelled transaction did not happen: its no-op did, in `blockNumber`.
              status: tx.outcome === "success" ? "success" : "reverted",
              blockNumber: Number(tx.blockNumber ?? 0n)
            } as const
          case "pending": {
            // The monitor records outcomes on its next round; the chain may already know.
            const mined = yield* findMined(tx)
            return Option.match(mined, {
              onNone: () => ({ txHash, status: "pending" }) as const,
              onSome: ({ outcome, blockNumber }) =>
                ({
                  txHash,
                  status: outcome === "success" ? "success" : "reverted",
                  blockNumber: Number(blockNumber)
                }) as const
            })
          }
        }
      }).pipe(Effect.mapError(storeOrChainUnavailable))

    // From the store and the monitor's last round: a health poll costs no RPC call once the
    // monitor has run.
    const state: Effect.Effect<SenderState, Unavailable> = Effect.gen(function* () {
      const s = yield* sender
      const summary = yield* store.summary(s)
      const onChain =
        observed ??
        (yield* Effect.all({
          balance: chain.getBalance(address),
          chainNext: Effect.map(chain.getTransactionCount(address, "pending"), BigInt)
        }))
      return {
        address,
        pending: summary.pending,
        nextNonce: maxBig(summary.nextNonce, onChain.chainNext),
        balance: onChain.balance
      }
    }).pipe(Effect.mapError(storeOrChainUnavailable))

    return { sender: { address, submit, status } satisfies TxSenderShape, state }
  })

/** What a client is told when the sender cannot answer for its store or the chain. */
const storeOrChainUnavailable = (error: { readonly _tag: string }) =>
  new Unavailable({
    message:
      error._tag === "TxStoreError"
        ? "the transaction store is not answering"
        : "the chain RPC is not answering"
  })

export const makeTxSender = (
  options: TxSenderOptions
): Effect.Effect<TxSenderShape, never, ChainClient | SqlClient | Scope.Scope> =>
  Effect.map(makeTxSenderWithState(options), (made) => made.sender)

const txSenderContext = (options: TxSenderOptions) =>
  Effect.map(makeTxSenderWithState(options), ({ sender, state }) =>
    Context.make(TxSender, sender).pipe(Context.add(HotKeyState, { state }))
  )

/** Options of the sender of `privateKey` from a service's `TX_*` settings. */
export const txSenderOptions = (
  privateKey: Redacted.Redacted<Hex>,
  settings: TxSenderSettings & { readonly chainId: Option.Option<number> }
): TxSenderOptions => ({
  privateKey: Redacted.value(privateKey),
  chainId: settings.chainId,
  replaceAfter: Duration.seconds(settings.txReplaceAfterSeconds),
  maxReplacements: settings.txMaxReplacements,
  maxFeePerGas: settings.txMaxFeePerGas,
  pollInterval: Duration.millis(settings.txPollIntervalMs),
  confirmations: settings.txConfirmations
})

/** The sender of the relayer's hot key; its fibers stop when the layer's scope closes. */
export const txSenderLayer: Layer.Layer<
  TxSender | HotKeyState,
  never,
  ChainClient | SqlClient | RelayerSettings
> = Layer.scopedContext(
  Effect.flatMap(RelayerSettings, (settings) => txSenderContext(txSenderOptions(settings.hotKey, settings)))
)

/** The sender with explicit options, for tests that tune its timing. */
export const txSenderLayerWith = (
  options: TxSenderOptions
): Layer.Layer<TxSender | HotKeyState, never, ChainClient | SqlClient> =>
  Layer.scopedContext(txSenderContext(options))

const notStubbed = (operation: string) => Effect.dieMessage(`TxSender.${operation} not stubbed`)

/**
 * A `TxSender` for unit tests of the pipeline: stub what a test expects; any other operation
 * dies with "TxSender.<op> not stubbed".
 */
export const txSenderTest = (stubs: Partial<TxSenderShape>): Layer.Layer<TxSender> =>
  Layer.succeed(TxSender, {
    address: stubs.address ?? "0x0000000000000000000000000000000000000000",
    submit: stubs.submit ?? (() => notStubbed("submit")),
    status: stubs.status ?? (() => notStubbed("status"))
  })
