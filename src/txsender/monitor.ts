/**
 * The monitor: at start and every `TX_POLL_INTERVAL_MS` it reconciles the store with the chain.
 * It re-checks mined transactions until they are `TX_CONFIRMATIONS` deep (a reorg makes one
 * pending again), settles pending ones whose receipt is there, and, holding the key's lock when
 * there is work, re-signs those whose nonce another sender used, heals nonce gaps and replaces
 * stuck transactions at their nonce. Each round reads state, asks `decisions.ts`, and carries the
 * answer out; what it remembers between rounds is here. Spec: relayer.md §3. Every RPC made
 * holding the lock is `bounded` (src/txsender/lock.ts): one left unanswered ends the round's hold.
 */
import { Clock, Effect, Metric, Option } from "effect"
import type { Hex } from "viem"
import { type SenderCore, sendOutcome } from "./core.js"
import {
  blocksToVerify,
  dueForReplacement,
  type Mined,
  maxBig,
  passedByChain,
  planMaintenance,
  planMinedRound,
  planPendingRound,
  planRenonce,
  planReplacement,
  type ReceiptLookup,
  renonceNeedsSimulation,
  replacementNeedsSimulation,
  replacementsOf,
  stillWhereRecorded
} from "./decisions.js"
import { type Fees, initialFees } from "./fees.js"
import { bounded, type KeyLock } from "./lock.js"
import type { MinedRecord, Sender, StoredTx } from "./store.js"

/** Headers read at once when verifying where mined transactions are. */
const VERIFY_CONCURRENCY = 8

export interface MonitorSettings {
  readonly replaceAfterMs: number
  readonly maxReplacements: number
  /** How deep (the including block counts as 1) a mined transaction is watched for reorgs. */
  readonly confirmations: number
}

export const makeMonitor = (core: SenderCore, withLock: KeyLock, settings: MonitorSettings) => {
  const { chain, store, address, cap, metrics } = core

  /** Transactions whose nonce the chain has passed without any of their hashes being mined. */
  let suspects: ReadonlySet<string> = new Set()
  /** Mined, unconfirmed transactions whose receipt the node did not have on the last round. */
  let vanishing: ReadonlySet<string> = new Set()
  /** The head at which every mined, unconfirmed transaction was last found where it was stored. */
  let verifiedHead: Hex | undefined
  /** Transactions whose skipped replacement was already counted, so each is counted once. */
  const skipReported = new Set<string>()
  /** Replacements the node refused as underpriced: the next bump's floor (`replacementFloor`). */
  const underpricedRefusals = new Set<Hex>()

  const recordOf = (tx: StoredTx, found: Mined): MinedRecord => ({
    txId: tx.id,
    outcome: found.outcome,
    hash: found.attempt.hash,
    blockNumber: found.blockNumber,
    blockHash: found.blockHash
  })

  /** Records a round's mined transactions in one statement, the sender's observer told first. */
  const settle = (settled: ReadonlyArray<{ readonly tx: StoredTx; readonly mined: Mined }>) =>
    core
      .noteSettled(settled)
      .pipe(
        Effect.zipRight(store.markMined(settled.map(({ tx, mined }) => recordOf(tx, mined)))),
        Effect.zipRight(
          Effect.forEach(settled, ({ mined }) => metrics.recordSettled(mined.outcome), { discard: true })
        )
      )

  /** Someone else used the nonce of `tx`: sign it again at a free one, unless it need not happen. */
  const renonce = (s: Sender, tx: StoredTx, estimate: Fees) =>
    Effect.gen(function* () {
      // Looked up again under the lock: mined since the round judged it (by another replica's
      // attempt, or late), it is settled, never re-signed.
      const mined = yield* bounded("eth_getTransactionReceipt", core.findMined(tx))
      if (Option.isSome(mined)) return yield* settle([{ tx, mined: mined.value }])
      const simulation = renonceNeedsSimulation(tx)
        ? yield* bounded("eth_call", core.simulate(tx.payload))
        : undefined
      const plan = planRenonce(tx, simulation)
      switch (plan._tag) {
        case "Wait":
          return
        case "Drop":
          // A gap someone else filled, a transaction that was being cancelled anyway, or one
          // that would now revert.
          yield* store.markDropped(tx.id, "nonce_taken")
          if (plan.because === "reverts") {
            yield* Effect.logWarning(
              "tx sender: another sender used a nonce and the transaction would now revert"
            )
          }
          return yield* metrics.recordSettled("dropped")
        case "Resign": {
          const [chainNext, stored] = yield* Effect.all([
            bounded("eth_getTransactionCount", chain.getTransactionCount(address, "pending")),
            store.nextNonce(s)
          ])
          const attempt = yield* core.sign(
            s,
            tx.payload,
            maxBig(stored, BigInt(chainNext)),
            initialFees(estimate, cap),
            "renonce"
          )
          yield* store.addAttempt(tx.id, attempt)
          yield* core.broadcast(attempt.raw)
          yield* metrics.recordRenonce
          yield* Effect.logWarning("tx sender: another sender used a nonce; re-signed at a free one")
        }
      }
    })

  /** Replaces a stuck transaction at its nonce (`planReplacement`), counting a skip once. */
  const replace = (s: Sender, tx: StoredTx, isHead: boolean, estimate: Fees) =>
    Effect.gen(function* () {
      const context = {
        isHead,
        estimate,
        cap,
        maxReplacements: settings.maxReplacements,
        underpricedRefusals
      }
      // Not simulated when the limit or the cap forbids a replacement anyway.
      const simulation = replacementNeedsSimulation(tx, context)
        ? yield* bounded("eth_call", core.simulate(tx.payload))
        : undefined
      const plan = planReplacement(tx, context, simulation)
      switch (plan._tag) {
        case "Wait":
          return
        case "Skip": {
          if (skipReported.has(tx.id)) return
          skipReported.add(tx.id)
          yield* metrics.recordReplacementSkipped(plan.reason)
          return yield* Effect.logWarning(
            plan.reason === "max_replacements"
              ? "tx sender: a stuck transaction reached TX_MAX_REPLACEMENTS; waiting"
              : "tx sender: a stuck transaction cannot be bumped within TX_MAX_FEE_GWEI"
          )
        }
        case "Replace": {
          if (plan.kind === "cancel" && simulation === "reverts") {
            // It may revert because it was just mined itself (its account nonce used): then it
            // is settled, never cancelled, so a reorg cannot make the no-op replace it.
            const mined = yield* bounded("eth_getTransactionReceipt", core.findMined(tx))
            if (Option.isSome(mined)) return yield* settle([{ tx, mined: mined.value }])
          }
          const payload = plan.noop ? core.noop : tx.payload
          const attempt = yield* core.sign(s, payload, tx.nonce, plan.fees, plan.kind)
          yield* store.addAttempt(tx.id, attempt)
          const result = yield* core.broadcast(attempt.raw)
          if (result._tag === "Accepted") yield* metrics.recordReplacement(plan.kind)
          if (result._tag === "Refused") {
            // It reached no pool, so it does not count toward TX_MAX_REPLACEMENTS.
            yield* store.markRefused(tx.id, attempt.hash)
            // Kept for this process only: forgotten, the next bump is refused once more and relearns it.
            if (underpricedRefusals.size >= 4096) underpricedRefusals.clear()
            if (result.kind === "underpriced") underpricedRefusals.add(attempt.hash)
            return yield* Effect.logWarning(
              "tx sender: the node refused a replacement; it does not count toward TX_MAX_REPLACEMENTS"
            ).pipe(Effect.annotateLogs({ class: sendOutcome(result) }))
          }
          yield* Effect.logInfo(
            plan.kind === "cancel"
              ? "tx sender: replaced a transaction that would now revert with a no-op"
              : "tx sender: replaced a stuck transaction with higher fees"
          ).pipe(Effect.annotateLogs({ replacement: replacementsOf(tx) + 1, class: sendOutcome(result) }))
        }
      }
    })

  /**
   * Mined transactions stay watched until they are `confirmations` deep: whenever the head
   * changes, each is looked up again and `planMinedRound` says which a reorg moved or took out.
   */
  const watchMined = (s: Sender) =>
    Effect.gen(function* () {
      const mined = yield* store.unconfirmed(s)
      if (mined.length === 0) {
        vanishing = new Set()
        verifiedHead = undefined
        return
      }
      const head = yield* chain
        .getBlock()
        .pipe(Effect.catchTag("BlockNotFound", () => Effect.succeed(undefined)))
      // Nothing to look at again while the head is the one everything was verified at.
      if (head === undefined || head.hash === verifiedHead) return
      // One header per block instead of one receipt per transaction: a block whose hash is
      // unchanged holds what it held (`stillWhereRecorded`); only the others are looked up.
      const blockHashes = new Map<bigint, Hex>()
      yield* Effect.forEach(
        blocksToVerify(mined, head.number),
        (blockNumber) =>
          chain.getBlock({ blockNumber }).pipe(
            Effect.tap((block) => Effect.sync(() => blockHashes.set(blockNumber, block.hash))),
            Effect.catchTag("BlockNotFound", () => Effect.void)
          ),
        { concurrency: VERIFY_CONCURRENCY, discard: true }
      )
      const lookups = new Map<string, Mined | undefined>()
      for (const tx of mined) {
        const known = stillWhereRecorded(tx, blockHashes)
        lookups.set(tx.id, known ?? Option.getOrUndefined(yield* core.findMined(tx)))
      }
      const plan = planMinedRound({
        mined,
        head: { number: head.number, hash: head.hash },
        lookups,
        vanishing,
        confirmations: settings.confirmations
      })
      const confirmed: Array<string> = []
      for (const step of plan.steps) {
        switch (step._tag) {
          case "Unmined":
            yield* store.unmined(step.tx.id)
            yield* metrics.recordReorged
            yield* Effect.logWarning(
              "tx sender: a reorg took out a mined transaction before it was confirmed; it is pending again"
            )
            break
          case "Moved":
            yield* store.remined(recordOf(step.tx, step.mined))
            yield* Effect.logInfo("tx sender: a reorg moved a mined transaction to another block")
            break
          case "Confirmed":
            confirmed.push(step.tx.id)
            break
        }
      }
      yield* store.markConfirmed(confirmed)
      vanishing = plan.vanishing
      verifiedHead = plan.verifiedHead
    })

  /**
   * The work that allocates nonces or sends, done holding the key. The nonces are read again under
   * the lock; the fee estimate is the round's own, read moments before.
   */
  const maintain = (s: Sender, taken: ReadonlyMap<string, bigint>, estimate: Fees) =>
    Effect.gen(function* () {
      const [live, latest, chainNext] = yield* Effect.all(
        [
          store.pending(s),
          bounded("eth_getTransactionCount", chain.getTransactionCount(address, "latest")),
          bounded("eth_getTransactionCount", chain.getTransactionCount(address, "pending"))
        ],
        { concurrency: "unbounded" }
      )
      const latestNonce = BigInt(latest)
      const plan = planMaintenance({ live, latestNonce, pendingNonce: BigInt(chainNext), taken })
      for (const tx of plan.renonce) yield* renonce(s, tx, estimate)
      const underpriced = yield* core.healGap(s, plan.gap.from, plan.gap.to, estimate)
      for (const { tx, isHead } of dueForReplacement(
        plan.unmined,
        latestNonce,
        settings.replaceAfterMs,
        underpriced
      )) {
        yield* replace(s, tx, isHead, estimate)
      }
    })

  const tick = Effect.gen(function* () {
    const s = yield* core.sender
    // First, so a transaction a reorg took out is among the pending ones below.
    yield* watchMined(s)
    const [latest, chainNext, balance, fees, live] = yield* Effect.all(
      [
        chain.getTransactionCount(address, "latest"),
        chain.getTransactionCount(address, "pending"),
        chain.getBalance(address),
        chain.estimateFeesPerGas,
        store.pending(s)
      ],
      { concurrency: "unbounded" }
    )
    yield* Metric.set(metrics.hotKeyBalance, balance)
    core.noteRecent({ balance, chainNext: BigInt(chainNext), fees, atMs: yield* Clock.currentTimeMillis })
    const latestNonce = BigInt(latest)
    const lookups = new Map<string, ReceiptLookup>()
    for (const tx of passedByChain(live, latestNonce)) {
      const found = yield* core.findMined(tx).pipe(Effect.option)
      lookups.set(
        tx.id,
        Option.isNone(found)
          ? { _tag: "Unanswered" }
          : Option.isSome(found.value)
            ? { _tag: "Found", mined: found.value.value }
            : { _tag: "Missing" }
      )
    }
    const plan = planPendingRound({
      live,
      latestNonce,
      pendingNonce: BigInt(chainNext),
      lookups,
      suspects,
      replaceAfterMs: settings.replaceAfterMs
    })
    yield* settle(plan.settle)
    suspects = plan.suspects
    yield* Metric.set(metrics.pendingTransactions, plan.stillPending)
    if (plan.maintain) yield* withLock(maintain(s, plan.taken, fees))
  })

  return {
    /** One round of reconciliation. */
    tick
  }
}
