/**
 * What submission (`submit.ts`) and the monitor (`monitor.ts`) share: the hot key and its store,
 * signing, broadcasting, receipt lookups, simulation, and the healing of nonce gaps both of them
 * need. The effects live here; what to do with their answers is `decisions.ts`.
 *
 * The monitor's rounds also leave here what they read of the hot key on the chain (its pending
 * nonce and balance) and the fee estimate (`recent`): while that is fresh, a submission takes its
 * nonce floor and fees from it instead of asking the chain, so a relayed request costs one RPC call
 * (the broadcast) in the sender. A stale floor is safe: the store holds every nonce this key used
 * through this sender, and a nonce someone else took is answered "nonce too low" and re-signed.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import { Clock, Effect, identity, Option } from "effect"
import { type Address, type Hex, serializeTransaction, type TransactionSerializableEIP1559 } from "viem"
import { keptOnceRead } from "../background/once.js"
import { ChainClient, type ChainClientShape, type ChainRequestError } from "../chain/ChainClient.js"
import { wasmKeccak256 } from "../chain/keccak.js"
import { checkedAgainstViem } from "../chain/secp256k1.js"
import type { Signer } from "../keys/Signer.js"
import {
  type Broadcast,
  lastAttempt,
  type Mined,
  minedOutcome,
  planGap,
  type Simulation
} from "./decisions.js"
import { type Fees, initialFees } from "./fees.js"
import {
  bounded,
  embeddedStatements,
  type HoldExpired,
  isEmbeddedDatabase,
  KeyHold,
  type LockLost
} from "./lock.js"
import { makeSenderMetrics, type SenderMetrics, type SenderService, type SendOutcome } from "./metrics.js"
import {
  type AttemptKind,
  makeTxStore,
  type Payload,
  type Sender,
  type SignedAttempt,
  type StoredTx,
  type TxStore,
  type TxStoreError
} from "./store.js"
import type { SettledObserver } from "./TxSenderShape.js"

const NOOP_GAS = 21_000n

/** The metric class of a broadcast's answer. */
export const sendOutcome = (result: Broadcast): SendOutcome => {
  switch (result._tag) {
    case "Accepted":
      return "accepted"
    case "Unavailable":
      return "unavailable"
    case "Refused":
      return result.kind === "range_too_large" || result.kind === "other" ? "rejected" : result.kind
  }
}

/** What a monitor round read of the hot key on the chain, and when. */
export interface RecentChain {
  readonly balance: bigint
  /** The node's pending nonce of the key. */
  readonly chainNext: bigint
  readonly fees: Fees
  readonly atMs: number
}

export interface SenderCore {
  readonly chain: ChainClientShape
  readonly store: TxStore
  /** Whether the database is the embedded one (one process, one session). */
  readonly embedded: boolean
  readonly address: Address
  /** Ceiling of `maxFeePerGas`, in wei. */
  readonly cap: bigint
  /** The no-op self-transfer that fills gaps and cancels transactions that would now revert. */
  readonly noop: Payload
  readonly metrics: SenderMetrics
  /** The key on its chain, as stored; the chain id is asked of the chain until it answers once. */
  readonly sender: Effect.Effect<Sender, ChainRequestError>
  /** The last round's reading, if one ran. */
  readonly recent: () => RecentChain | undefined
  readonly noteRecent: (reading: RecentChain) => void
  /** The last round's reading while it is at most `freshForMs` old (see the module header). */
  readonly freshReading: Effect.Effect<RecentChain | undefined>
  readonly sign: (
    s: Sender,
    payload: Payload,
    nonce: bigint,
    fees: Fees,
    kind: AttemptKind
  ) => Effect.Effect<SignedAttempt>
  /**
   * Offers a signed transaction to the node, under the key's lock: fails with `LockLost`, sending
   * nothing, when the lock was lost (src/txsender/lock.ts), and with `HoldExpired` when the node
   * did not answer within the hold's deadline (the transaction may have reached it); otherwise the
   * answer says how it went.
   */
  readonly broadcast: (raw: Hex) => Effect.Effect<Broadcast, LockLost | HoldExpired, KeyHold>
  /** Which attempt of `tx`, if any, is mined (newest first), and how it went. */
  readonly findMined: (tx: StoredTx) => Effect.Effect<Option.Option<Mined>, ChainRequestError>
  /** An `eth_call` of `payload` from the hot key. */
  readonly simulate: (payload: Payload) => Effect.Effect<Simulation>
  /**
   * Makes nonces `from..to-1` reach the node again (`planGap`): re-broadcasts the transaction
   * that holds a nonce, or fills a nonce nobody holds with a no-op. Returns the ids whose
   * re-broadcast was refused as underpriced, which want replacing now rather than after the
   * usual wait.
   */
  readonly healGap: (
    s: Sender,
    from: bigint,
    to: bigint,
    estimate: Fees
  ) => Effect.Effect<ReadonlySet<string>, TxStoreError | LockLost | HoldExpired, KeyHold>
  /** Tells the sender's observer of requests about to be recorded as mined (fillers are not told). */
  readonly noteSettled: (
    settled: ReadonlyArray<{ readonly tx: StoredTx; readonly mined: Mined }>
  ) => Effect.Effect<void>
}

export const makeSenderCore = (options: {
  /** The key's signer (src/keys/Signer.ts): the sender never holds the key itself. */
  readonly signer: Signer
  readonly chainId: Option.Option<number>
  readonly maxFeePerGas: bigint
  readonly service: SenderService
  /** How long a monitor round's reading stands in for the chain's answer; 0: never. */
  readonly freshForMs?: number
  readonly onSettled?: SettledObserver | undefined
}): Effect.Effect<SenderCore, never, ChainClient | SqlClient> =>
  Effect.gen(function* () {
    const chain = yield* ChainClient
    // Detected once: the database answered the migrations a moment ago.
    const embedded = yield* isEmbeddedDatabase.pipe(Effect.orElseSucceed(() => false))
    const store = yield* makeTxStore(
      embedded
        ? <A, E, R>(effect: Effect.Effect<A, E, R>) => embeddedStatements.withPermits(1)(effect)
        : identity
    )
    const signer = options.signer
    const address = signer.address
    const cap = options.maxFeePerGas
    const noop: Payload = { to: address, data: "0x", value: 0n, gas: NOOP_GAS }
    const metrics = makeSenderMetrics(options.service)

    const chainId = Option.match(options.chainId, {
      onSome: (configured) => Effect.succeed(configured),
      onNone: () => Effect.runSync(keptOnceRead(chain.chainId))
    })
    const sender: Effect.Effect<Sender, ChainRequestError> = Effect.map(chainId, (chainId) => ({
      chainId,
      address: address.toLowerCase() as Address
    }))

    let recent: RecentChain | undefined
    const freshForMs = options.freshForMs ?? 0
    const freshReading = Effect.map(Clock.currentTimeMillis, (now) =>
      recent !== undefined && now - recent.atMs <= freshForMs ? recent : undefined
    )

    // What `account.signTransaction` does, with the hashes in WebAssembly (src/chain/keccak.ts)
    // and the signature by the signer (libsecp256k1 for a key in memory, src/chain/secp256k1.ts).
    yield* checkedAgainstViem
    const keccak = yield* wasmKeccak256
    const hashOf = (serialized: Hex) => keccak(Buffer.from(serialized.slice(2), "hex"))
    const sign = (s: Sender, payload: Payload, nonce: bigint, fees: Fees, kind: AttemptKind) => {
      const transaction: TransactionSerializableEIP1559 = {
        type: "eip1559",
        chainId: s.chainId,
        nonce: Number(nonce),
        to: payload.to,
        data: payload.data,
        value: payload.value,
        gas: payload.gas,
        maxFeePerGas: fees.maxFeePerGas,
        maxPriorityFeePerGas: fees.maxPriorityFeePerGas
      }
      return Effect.map(
        signer.sign(hashOf(serializeTransaction(transaction))),
        (signature): SignedAttempt => {
          const raw = serializeTransaction(transaction, signature)
          return {
            hash: hashOf(raw),
            nonce,
            kind,
            maxFeePerGas: fees.maxFeePerGas,
            maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
            raw
          }
        }
      )
    }

    const broadcast = (raw: Hex): Effect.Effect<Broadcast, LockLost | HoldExpired, KeyHold> =>
      Effect.flatMap(KeyHold, (hold) => hold.check).pipe(
        Effect.zipRight(
          bounded(
            "eth_sendRawTransaction",
            chain.sendRawTransaction(raw).pipe(
              Effect.as<Broadcast>({ _tag: "Accepted" }),
              Effect.catchTags({
                ChainUnavailable: () => Effect.succeed<Broadcast>({ _tag: "Unavailable" }),
                RpcRejected: (e) => Effect.succeed<Broadcast>({ _tag: "Refused", kind: e.kind })
              })
            )
          ).pipe(
            Effect.tapBoth({
              onSuccess: (result) => metrics.recordSend(sendOutcome(result)),
              onFailure: (error) =>
                error._tag === "HoldExpired" ? metrics.recordSend("unavailable") : Effect.void
            })
          )
        )
      )

    const findMined = (tx: StoredTx) =>
      Effect.gen(function* () {
        for (const attempt of [...tx.attempts].reverse()) {
          const receipt = yield* chain.getTransactionReceipt(attempt.hash)
          if (Option.isSome(receipt)) {
            return Option.some<Mined>({
              attempt,
              outcome: minedOutcome(attempt, receipt.value.status),
              blockNumber: receipt.value.blockNumber,
              blockHash: receipt.value.blockHash
            })
          }
        }
        return Option.none<Mined>()
      })

    // Anything but a revert (an unanswered call, a refusal) proves nothing about the payload.
    const simulate = (payload: Payload): Effect.Effect<Simulation> =>
      chain
        .call({ from: address, to: payload.to, data: payload.data, value: payload.value, gas: payload.gas })
        .pipe(
          Effect.match({
            onFailure: (error): Simulation => (error._tag === "ChainReverted" ? "reverts" : "unanswered"),
            onSuccess: (): Simulation => "succeeds"
          })
        )

    const healGap = (s: Sender, from: bigint, to: bigint, estimate: Fees) =>
      Effect.gen(function* () {
        const underpriced = new Set<string>()
        if (to <= from) return underpriced
        for (const step of planGap(yield* store.pending(s), from, to)) {
          if (step._tag === "Rebroadcast") {
            const result = yield* broadcast(lastAttempt(step.tx).raw)
            if (result._tag === "Refused" && result.kind === "underpriced") underpriced.add(step.tx.id)
            continue
          }
          const attempt = yield* sign(s, noop, step.nonce, initialFees(estimate, cap), "original")
          yield* store.insert(s, [{ purpose: "filler", payload: noop, attempt }])
          yield* broadcast(attempt.raw)
          yield* metrics.recordGapFill
          yield* Effect.logWarning("tx sender: filled a nonce gap with a no-op")
        }
        return underpriced
      })

    const onSettled = options.onSettled
    const noteSettled: SenderCore["noteSettled"] = (settled) => {
      const requests = settled.filter(({ tx }) => tx.purpose === "request")
      return onSettled === undefined || requests.length === 0
        ? Effect.void
        : onSettled(
            requests.map(({ tx, mined }) => ({
              to: tx.payload.to,
              data: tx.payload.data,
              outcome: mined.outcome,
              hash: mined.attempt.hash,
              blockNumber: mined.blockNumber
            }))
          )
    }

    return {
      chain,
      store,
      embedded,
      address,
      cap,
      noop,
      metrics,
      sender,
      recent: () => recent,
      noteRecent: (reading) => {
        recent = reading
      },
      freshReading,
      sign,
      broadcast,
      findMined,
      simulate,
      healGap,
      noteSettled
    } satisfies SenderCore
  })
