/**
 * A service key's transaction sender, used by the relayer for its requests (the hot key) and by
 * the attestor for vetoes (its signing key): the `TxSender` service, its layer, and the shell that
 * runs it. Nothing here knows which service runs it but the name it is given. It is the only owner of
 * the key's nonce. Submissions queue up for one fiber that, holding the key's lock (`lock.ts`),
 * allocates the next nonce, signs, stores the signed transaction and only then broadcasts it
 * (`submit.ts`). A second fiber, the monitor (`monitor.ts`), reconciles with the chain at start
 * and every `TX_POLL_INTERVAL_MS`: it settles receipts, re-broadcasts what a node lost, fills
 * nonce gaps with no-op self-transfers, re-signs transactions whose nonce someone else used, and
 * replaces stuck ones at the same nonce with higher fees (or with a no-op when they would now
 * revert). What to do in each case is decided by pure functions (`decisions.ts`). Everything
 * lives in the store (`store.ts`), so a restart, or another replica, picks up where this one left
 * off.
 *
 * A transaction is pending until one of its signed attempts is mined (`success`, `reverted`, or
 * `cancelled` when the no-op replacing it was mined) or it is dropped (no node ever held it).
 * Any hash it was signed under reports that one outcome (relayer.md §3).
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Deferred, Duration, Effect, Layer, Option, Queue, type Scope } from "effect"
import type { Hex } from "viem"
import { Unavailable } from "../../schema/errors.js"
import type { Bytes32 } from "../../schema/primitives.js"
import type { TxStatus } from "../../schema/relayer.js"
import { supervised } from "../background/supervised.js"
import type { ChainClient, ChainRequestError } from "../chain/ChainClient.js"
import type { TxSenderSettings } from "../config/settings.js"
import type { Signer } from "../keys/Signer.js"
import { stubLayer } from "../stubLayer.js"
import { makeSenderCore } from "./core.js"
import { maxBig } from "./decisions.js"
import {
  advisoryKey,
  type HoldExpired,
  type KeyLock,
  type LockLost,
  type LockTimeout,
  makeKeyLock
} from "./lock.js"
import type { SenderService } from "./metrics.js"
import { makeMonitor } from "./monitor.js"
import type { TxStoreError } from "./store.js"
import { type Job, MAX_BATCH, makeSubmitBatch, refuse } from "./submit.js"
import {
  type SenderState,
  SendUnavailable,
  type SettledObserver,
  type TxRequest,
  type TxSenderShape,
  type TxSubmitError
} from "./TxSenderShape.js"

// ---------------------------------------------------------------------------------------------
// Interface

export {
  HotKeyUnderfunded,
  type SenderState,
  SendUnavailable,
  type SettledObserver,
  type SettledTx,
  TxRejected,
  type TxRequest,
  type TxSenderShape,
  type TxSubmitError,
  txSubmitErrorToApi
} from "./TxSenderShape.js"

import { CHAIN_UNAVAILABLE } from "../chain/errors.js"

/** What a service gives its sender: who it is, the key, and its `TX_*` settings. */
export interface TxSenderConfig {
  /** The `service` label of the sender's metrics, and the name of its key's lock (`lockNameOf`). */
  readonly service: SenderService
  readonly key: Signer
  readonly settings: TxSenderSettings & { readonly chainId: Option.Option<number> }
  /** Told of the requests each monitor round finds mined (the relayer's revert cooldowns). */
  readonly onSettled?: SettledObserver | undefined
}

export class TxSender extends Context.Tag("TxSender")<TxSender, TxSenderShape>() {
  /**
   * The sender of `config.key` and its health view (`HotKeyState`); its fibers stop when the
   * layer's scope closes. Tests that tune its timing give the options themselves.
   */
  static layer(
    config: TxSenderConfig | TxSenderOptions
  ): Layer.Layer<TxSender | HotKeyState, never, ChainClient | SqlClient> {
    return Layer.scopedContext(
      txSenderContext(
        "settings" in config
          ? { ...txSenderOptions(config.service, config.key, config.settings), onSettled: config.onSettled }
          : config
      )
    )
  }

  /**
   * For unit tests of the pipeline: stub what a test expects; any other operation dies with
   * "TxSender.<op> not stubbed".
   */
  static test(stubs: Partial<TxSenderShape>): Layer.Layer<TxSender> {
    return stubLayer(TxSender, { address: "data", submit: "function", status: "function" })({
      address: "0x0000000000000000000000000000000000000000",
      ...stubs
    })
  }
}

export class SettledTxObserver extends Context.Tag("SettledTxObserver")<
  SettledTxObserver,
  SettledObserver
>() {}

/** The sending key's state for health, from the same sender: nothing about any other account. */
export class HotKeyState extends Context.Tag("HotKeyState")<
  HotKeyState,
  { readonly state: Effect.Effect<SenderState, Unavailable> }
>() {}

export interface TxSenderOptions {
  /** Signs the key's transactions (src/keys/Signer.ts). */
  readonly signer: Signer
  /** Known up front (settings or deployment file); otherwise asked of the chain on first use. */
  readonly chainId: Option.Option<number>
  readonly replaceAfter: Duration.DurationInput
  readonly maxReplacements: number
  /** Ceiling of `maxFeePerGas`, in wei. */
  readonly maxFeePerGas: bigint
  readonly pollInterval: Duration.DurationInput
  /** How long a submission waits for the key's lock (`TX_LOCK_WAIT_MS`). Default 5 s. */
  readonly lockTimeout?: Duration.DurationInput
  /** How long an RPC made holding the key's lock may go unanswered (`TX_RPC_TIMEOUT_MS`). Default 5 s. */
  readonly rpcDeadline?: Duration.DurationInput
  /** Excludes other senders of this process; by default the process-wide one of the key. */
  readonly semaphore?: Effect.Semaphore
  /**
   * How deep (the including block counts as 1) a mined transaction must be before the sender
   * stops watching it for reorgs. Default `DEFAULT_TX_CONFIRMATIONS`.
   */
  readonly confirmations?: number
  /**
   * Which service runs the sender: the `service` label of its metrics and the name of its key's
   * lock (`lockNameOf`). Default `relayer`.
   */
  readonly service?: SenderService
  /** Told of the requests each monitor round finds mined, before it records them. */
  readonly onSettled?: SettledObserver | undefined
}

export const DEFAULT_TX_CONFIRMATIONS = 12

// ---------------------------------------------------------------------------------------------
// Implementation

const asBytes32 = (hash: Hex): Bytes32 => hash.toLowerCase() as Bytes32

/**
 * The name the key's advisory lock is derived from: one per service, so the replicas of one
 * service exclude each other. The relayer's is the name it has always had.
 */
const lockNameOf = (service: SenderService, address: Hex): string =>
  `${service}-tx-sender:${address.toLowerCase()}`

/** The sender and its health view; the sender's fibers stop when the scope closes. */
export const makeTxSenderWithState = (
  options: TxSenderOptions
): Effect.Effect<
  { readonly sender: TxSenderShape; readonly state: Effect.Effect<SenderState, Unavailable> },
  never,
  ChainClient | SqlClient | Scope.Scope
> =>
  Effect.gen(function* () {
    const service = options.service ?? "relayer"
    const core = yield* makeSenderCore({
      ...options,
      service,
      // A round's reading stands in for the chain until two rounds were missed.
      freshForMs: 3 * Duration.toMillis(options.pollInterval)
    })
    const { chain, store, address } = core
    const lockWait = options.lockTimeout ?? Duration.seconds(5)
    const withLock: KeyLock = yield* makeKeyLock({
      key: advisoryKey(lockNameOf(service, address)),
      timeout: lockWait,
      embedded: core.embedded,
      onLost: core.metrics.recordLockLost,
      onExpired: core.metrics.recordHoldExpired,
      onTimeout: core.metrics.recordLockWaitRefused,
      ...(options.rpcDeadline === undefined ? {} : { rpcDeadline: options.rpcDeadline }),
      ...(options.semaphore === undefined ? {} : { semaphore: options.semaphore })
    })
    const submitBatch = makeSubmitBatch(core, withLock, Duration.toMillis(Duration.decode(lockWait)))
    const monitor = makeMonitor(core, withLock, {
      replaceAfterMs: Duration.toMillis(options.replaceAfter),
      maxReplacements: options.maxReplacements,
      confirmations: Math.max(1, options.confirmations ?? DEFAULT_TX_CONFIRMATIONS)
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
      supervised(`tx sender's ${name} fiber`, loop, {
        baseDelayMs: 200,
        maxDelayMs: 30_000,
        onRestart: () => core.metrics.recordRestart(name)
      }).pipe(Effect.forkScoped)

    // The tag, and the operation or failure class where there is one: never a node's own text,
    // which may quote the hot key's address.
    const describe = (
      error: ChainRequestError | TxStoreError | LockTimeout | LockLost | HoldExpired | SqlError
    ) => ({
      error: error._tag,
      ...(error._tag === "TxStoreError" ? { operation: error.operation, cause: error.cause.message } : {}),
      ...(error._tag === "ChainUnavailable" || error._tag === "HoldExpired"
        ? { operation: error.operation }
        : {}),
      ...(error._tag === "RpcRejected" ? { operation: error.operation, class: error.kind } : {})
    })

    let failing = false

    yield* core.metrics.initialise
    yield* supervise(
      "sender",
      Queue.takeBetween(queue, 1, MAX_BATCH).pipe(
        Effect.flatMap((jobs) => submitBatch([...jobs])),
        Effect.forever
      )
    )
    yield* supervise(
      "monitor",
      monitor.tick.pipe(
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
          const job: Job = { request, done, queuedAtMs: Date.now() }
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
            const mined = yield* core.findMined(tx)
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
      const s = yield* core.sender
      const summary = yield* store.summary(s)
      const onChain =
        core.recent() ??
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
    message: error._tag === "TxStoreError" ? "the transaction store is not answering" : CHAIN_UNAVAILABLE
  })

const txSenderContext = (options: TxSenderOptions) =>
  Effect.map(makeTxSenderWithState(options), ({ sender, state }) =>
    Context.make(TxSender, sender).pipe(Context.add(HotKeyState, { state }))
  )

/** Options of the sender of `signer`'s key from `service`'s `TX_*` settings. */
export const txSenderOptions = (
  service: SenderService,
  signer: Signer,
  settings: TxSenderSettings & { readonly chainId: Option.Option<number> }
): TxSenderOptions => ({
  service,
  signer,
  chainId: settings.chainId,
  replaceAfter: Duration.seconds(settings.txReplaceAfterSeconds),
  maxReplacements: settings.txMaxReplacements,
  maxFeePerGas: settings.txMaxFeePerGas,
  pollInterval: Duration.millis(settings.txPollIntervalMs),
  confirmations: settings.txConfirmations,
  lockTimeout: Duration.millis(settings.txLockWaitMs),
  rpcDeadline: Duration.millis(settings.txRpcTimeoutMs)
})
