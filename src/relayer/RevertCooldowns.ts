/**
 * Revert cooldowns (docs/relayer.md §8 "Revert cooldowns"; migration 0013). A relayed transaction
 * that passed simulation and then reverted on chain cost the hot key its gas and its sender
 * nothing. When the sender records one mined reverted, the account it was for and, where the
 * vault asked an owner contract (ERC-1271), that contract's code hash are refused with 429
 * `rate_limited` for `REVERT_COOLDOWN_SECONDS`, doubled on each further revert up to
 * `REVERT_COOLDOWN_MAX_SECONDS`. The count starts again once a key has been quiet for a whole
 * maximum cooldown after its last one ended. Keyed by code hash, an attacker cannot escape by
 * deploying the same contract again under a fresh id.
 *
 * A revert some other transaction caused by executing a step of the same request first counts
 * nothing (docs/relayer.md §8 "Revert cooldowns"): the same signed step (an open claim copied from
 * the mempool, the owner's request sent through another relayer) mined earlier, told by the vault's
 * event for the signed nonce carrying the same fields; the account registered by an earlier
 * transaction when ours carried the registration; a bind call after another transaction changed
 * that account's bind earlier in the block. A nonce used by a different step (the owner's own
 * ping, say) does count: the account's owner did that. Nor does one mined after a deadline it
 * signed had passed, provided `MIN_DEADLINE_SECONDS` gave the sender at least one replacement
 * interval (`TX_REPLACE_AFTER_SECONDS`): with less, the signer's deadline, not the chain, made it
 * late. Owner actions sent without a fee claim (REQUIRE_ACTION_FEE=false) count like the rest.
 *
 * The code-hash key refuses only requests that register a new account: an established account is
 * keyed by its id, so an account sharing its code with another (every proxy of one implementation,
 * every EIP-7702 delegation to one contract) is not refused for what another one did. The code is
 * read at the block before the revert, as it was when the transaction was sent.
 *
 * The rows live in the database, so every replica refuses what any of them saw revert, and a
 * revert two replicas both record counts once (`last_tx`).
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Clock, Context, Duration, Effect, Layer, Schedule } from "effect"
import {
  type Address,
  decodeFunctionData,
  getAbiItem,
  type Hex,
  keccak256,
  maxUint256,
  zeroAddress
} from "viem"
import { feeVaultAbi } from "../../contracts/abi.js"
import { RateLimited, Unavailable } from "../../schema/errors.js"
import { ChainClient } from "../chain/ChainClient.js"
import { chainUnavailable } from "../chain/errors.js"
import { RelayerSettings } from "../config/relayer.js"
import { describeFailure } from "../logging.js"
import { SettledTxObserver } from "../txsender/TxSender.js"
import type { SettledTx } from "../txsender/TxSenderShape.js"
import {
  type CooldownKey,
  recordClaimFrontrun,
  recordCooldownRefusal,
  recordOnchainRevert,
  recordRevertCooldown
} from "./metrics.js"

// ---------------------------------------------------------------------------------------------
// Pure parts: what a relayed transaction was, from its calldata

/** What the revert of a relayed transaction is charged to, read from its vault calldata. */
export interface RelayedTx {
  /** The endpoint's name of its first step after any registration: `claim`, `ping`, `cancel-bind`, … */
  readonly action: string
  readonly id: Hex
  /**
   * The account nonce its first owner-signed step signed, when a claim says it (claims and fee
   * claims: the claim's nonce less the signed steps before it, each of which consumes one).
   */
  readonly signedNonce: bigint | undefined
  /** Whether it carries an open claim (`claim.relayer` the zero address). */
  readonly openClaim: boolean
  /** Whether the account's owner signed a step of it (everything but propose and finalize bind). */
  readonly ownerSigned: boolean
  /** The owner a kind-1 registration in the same transaction sets. */
  readonly registeredOwner: Address | undefined
  /** Other signers the vault asks: rotate-owner's new owner, who signs the fee claim. */
  readonly otherSigners: ReadonlyArray<Address>
  /** Every deadline a step of it carries (Unix seconds); the vault refuses a block past one. */
  readonly deadlines: ReadonlyArray<bigint>
  /** Its first step that consumes the account nonce `signedNonce`. */
  readonly firstSignedStep: Step | undefined
  /** Whether it registers the account (a `registerOwner` or `registerHandle` step). */
  readonly registers: boolean
}

const actionNames: Readonly<Record<string, string>> = {
  claim: "claim",
  consolidate: "consolidate",
  registerShieldTemplates: "shield-templates",
  rotateOwner: "rotate-owner",
  ping: "ping",
  proposeBind: "propose-bind",
  cancelBind: "cancel-bind",
  finalizeBind: "finalize-bind"
}

/** Owner-signed steps that consume an account nonce before a claim batched after them. */
const nonceSteps = new Set(["consolidate", "registerShieldTemplates", "rotateOwner", "ping"])

/** The vault's events of the steps that consume an account nonce (`nonce` among their fields). */
const nonceEvents = ["Claimed", "Consolidated", "ShieldTemplatesRegistered", "OwnerRotated", "Pinged"]

type Step = ReturnType<typeof decodeFunctionData<typeof feeVaultAbi>>

const decodeStep = (data: Hex): Step | undefined => {
  try {
    return decodeFunctionData({ abi: feeVaultAbi, data })
  } catch {
    return undefined
  }
}

/** The relayed transaction `data` stands for; none for calldata the relayer never builds. */
export const relayedTxOf = (data: Hex): RelayedTx | undefined => {
  const outer = decodeStep(data)
  if (outer === undefined) return undefined
  const steps: Array<Step> = []
  if (outer.functionName === "multicall") {
    for (const inner of outer.args[0]) {
      const step = decodeStep(inner)
      if (step === undefined) return undefined
      steps.push(step)
    }
  } else steps.push(outer)
  let id: Hex | undefined
  let action: string | undefined
  let signedNonce: bigint | undefined
  let openClaim = false
  let ownerSigned = false
  let registeredOwner: Address | undefined
  const otherSigners: Array<Address> = []
  const deadlines: Array<bigint> = []
  let signedBefore = 0n
  let firstSignedStep: Step | undefined
  let registers = false
  for (const step of steps) {
    switch (step.functionName) {
      case "registerOwner":
        registeredOwner = step.args[0]
        registers = true
        continue
      case "registerHandle":
        registers = true
        continue
      case "claim": {
        const claim = step.args[0]
        firstSignedStep ??= step
        id ??= claim.beneficiaryId
        signedNonce = claim.nonce - signedBefore
        openClaim ||= claim.relayer === zeroAddress
        ownerSigned = true
        deadlines.push(claim.deadline)
        break
      }
      case "consolidate":
      case "registerShieldTemplates":
      case "rotateOwner":
      case "ping":
      case "cancelBind":
      case "proposeBind":
      case "finalizeBind":
        id ??= step.args[0]
        if (nonceSteps.has(step.functionName)) {
          firstSignedStep ??= step
          signedBefore++
        }
        if (step.functionName === "rotateOwner") otherSigners.push(step.args[1])
        if (step.functionName === "consolidate") deadlines.push(step.args[4])
        if (step.functionName === "registerShieldTemplates" || step.functionName === "rotateOwner")
          deadlines.push(step.args[2])
        if (step.functionName === "ping" || step.functionName === "cancelBind") deadlines.push(step.args[1])
        if (step.functionName === "proposeBind") deadlines.push(step.args[2])
        if (step.functionName !== "proposeBind" && step.functionName !== "finalizeBind") ownerSigned = true
        break
      default:
        return undefined
    }
    action ??= actionNames[step.functionName]
  }
  if (id === undefined || action === undefined) return undefined
  return {
    action,
    id,
    signedNonce,
    openClaim,
    ownerSigned,
    registeredOwner,
    otherSigners,
    deadlines,
    firstSignedStep,
    registers
  }
}

/** Whether relayed `calls` register a new account: only those are refused for their owner's code. */
export const registersAccount = (calls: ReadonlyArray<Hex>): boolean =>
  calls.some((call) => {
    const step = decodeStep(call)
    return step?.functionName === "registerOwner" || step?.functionName === "registerHandle"
  })

/** A vault event that consumed an account nonce, decoded. */
export interface NonceEvent {
  readonly eventName: string
  readonly args: Readonly<Record<string, unknown>>
}

const same = (a: unknown, b: unknown) =>
  typeof a === "string" && typeof b === "string" ? a.toLowerCase() === b.toLowerCase() : a === b

/**
 * Whether `event`, which consumed the nonce `step` signed, is that same step executed (by whoever
 * sent it): the event its function emits, with the fields the owner signed. A claim's `relayer`
 * is whoever sent it, which an open claim leaves to anyone; `FULL` claims whatever the balance is.
 */
const isSameSignedStep = (step: Step, event: NonceEvent): boolean => {
  const e = event.args
  switch (step.functionName) {
    case "claim": {
      const c = step.args[0]
      return (
        event.eventName === "Claimed" &&
        same(e.asset, c.asset) &&
        same(e.adapter, c.adapter) &&
        same(e.relayerFee, c.relayerFee) &&
        (c.amount === maxUint256 || same(e.amount, c.amount)) &&
        (c.relayer === zeroAddress || same(e.relayer, c.relayer))
      )
    }
    case "consolidate":
      return (
        event.eventName === "Consolidated" && same(e.assetIn, step.args[1]) && same(e.amountIn, step.args[2])
      )
    case "registerShieldTemplates":
      return event.eventName === "ShieldTemplatesRegistered" && same(e.count, BigInt(step.args[1].length))
    case "rotateOwner":
      return event.eventName === "OwnerRotated" && same(e.newOwner, step.args[1])
    case "ping":
      // A ping signs nothing but the account, its nonce and a deadline: any ping at it is the same.
      return event.eventName === "Pinged"
    default:
      return false
  }
}

/** The cooldown a key gets on its `strikes`-th revert: doubled each time, within the maximum. */
export const cooldownSecondsOf = (strikes: number, baseSeconds: number, maxSeconds: number): number =>
  Math.min(maxSeconds, baseSeconds * 2 ** Math.min(Math.max(strikes, 1) - 1, 40))

// ---------------------------------------------------------------------------------------------
// The service

export interface RevertCooldownsShape {
  /**
   * Refuses with 429 `rate_limited` (and `Retry-After`) while `id` is on a cooldown or, for a
   * request that `registers` the account, the code of one of `erc1271Owners` is; 503 when the
   * database or the chain does not answer.
   */
  readonly check: (
    id: Hex,
    erc1271Owners: ReadonlyArray<Address>,
    registers: boolean
  ) => Effect.Effect<void, RateLimited | Unavailable>
  /**
   * Examines the requests the sender found mined and starts the cooldowns their reverts call for,
   * before the sender records them, so their nonce reservations (which free with that record)
   * cannot let a next request through ahead of the cooldown.
   */
  readonly settled: (settled: ReadonlyArray<SettledTx>) => Effect.Effect<void>
}

interface CooldownRow {
  readonly kind: string
  readonly until_ms: string | number | bigint
}

const refusalMessage = (kind: string) =>
  kind === "id"
    ? "a transaction relayed for this account passed simulation and then reverted on chain: the relayer relays nothing for it until the cooldown ends"
    : "a transaction signed through this owner contract's code passed simulation and then reverted on chain: the relayer relays nothing it signs until the cooldown ends"

const databaseUnavailable = () => new Unavailable({ message: "the relayer's database is not answering" })

/**
 * Chain reads of an examination, tried again this often (about 1.4 s in all) before it is given up
 * and counted: the sender's monitor waits for it.
 */
const EXAMINE_RETRIES = Schedule.exponential(Duration.millis(200)).pipe(
  Schedule.intersect(Schedule.recurs(3))
)

export const makeRevertCooldowns: Effect.Effect<
  RevertCooldownsShape,
  never,
  SqlClient | ChainClient | RelayerSettings
> = Effect.gen(function* () {
  const sql = yield* SqlClient
  const chain = yield* ChainClient
  const settings = yield* RelayerSettings
  const vault = settings.vault.toLowerCase()
  const vaultAddress = settings.vault
  const enabled = settings.revertCooldownSeconds > 0
  const baseMs = settings.revertCooldownSeconds * 1000
  const maxMs = settings.revertCooldownMaxSeconds * 1000

  const codeHashOf = (owner: Address, blockNumber?: bigint) =>
    Effect.map(chain.getCode(owner, blockNumber), (code) => (code === "0x" ? undefined : keccak256(code)))

  const check: RevertCooldownsShape["check"] = (id, erc1271Owners, registers) =>
    Effect.gen(function* () {
      if (!enabled) return
      const codeHashes: Array<string> = []
      for (const owner of registers ? erc1271Owners : []) {
        const hash = yield* codeHashOf(owner).pipe(Effect.mapError(chainUnavailable))
        if (hash !== undefined) codeHashes.push(hash)
      }
      const now = yield* Clock.currentTimeMillis
      const rows = yield* sql<CooldownRow>`
        SELECT kind, until_ms FROM relayer_revert_cooldowns
        WHERE vault = ${vault} AND until_ms > ${now}
          AND ((kind = 'id' AND value = ${id.toLowerCase()})
               ${codeHashes.length === 0 ? sql.literal("") : sql`OR (kind = 'code' AND value IN ${sql.in(codeHashes)})`})
        ORDER BY until_ms DESC
        LIMIT 1`.pipe(Effect.mapError(databaseUnavailable))
      const row = rows[0]
      if (row === undefined) return
      const key: CooldownKey = row.kind === "id" ? "id" : "code_hash"
      yield* recordCooldownRefusal(key)
      return yield* new RateLimited({
        message: refusalMessage(row.kind),
        retryAfterSeconds: Math.max(1, Math.ceil((Number(row.until_ms) - now) / 1000))
      })
    })

  /**
   * One statement per revert: every key's row started or lengthened, unless this mined hash
   * already struck it. The doubling is `cooldownSecondsOf`, written in SQL so concurrent strikes
   * of one key serialize on its row.
   */
  const strike = (hash: Hex, keys: ReadonlyArray<{ readonly kind: "id" | "code"; readonly value: string }>) =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const tx = hash.toLowerCase()
      const first =
        cooldownSecondsOf(1, settings.revertCooldownSeconds, settings.revertCooldownMaxSeconds) * 1000
      const strikes = sql.literal(`CASE WHEN c.until_ms + ${maxMs} < ${now} THEN 1 ELSE c.strikes + 1 END`)
      const rows = yield* sql<{ readonly kind: string }>`
        INSERT INTO relayer_revert_cooldowns AS c (vault, kind, value, strikes, until_ms, last_tx)
        VALUES ${sql.csv(keys.map((k) => sql`(${vault}, ${k.kind}, ${k.value}, 1, ${now + first}, ${tx})`))}
        ON CONFLICT (vault, kind, value) DO UPDATE
          SET strikes = ${strikes},
              until_ms = ${now} + LEAST(${maxMs}::bigint, ${baseMs}::bigint * (1::bigint << LEAST(${strikes} - 1, 40))),
              last_tx = excluded.last_tx
          WHERE c.last_tx <> excluded.last_tx
        RETURNING kind`
      yield* Effect.forEach(rows, (row) => recordRevertCooldown(row.kind === "id" ? "id" : "code_hash"), {
        discard: true
      })
    })

  /** The vault's account nonce of `id` after `blockNumber`. */
  const nonceAt = (id: Hex, blockNumber: bigint) =>
    chain.readContract({
      address: vaultAddress,
      abi: feeVaultAbi,
      functionName: "nonces",
      args: [id],
      blockNumber
    })

  /**
   * The block in which the account's nonce `nonce` was consumed, at or before `blockNumber`; none
   * when it was still unused after it. Searched back from the block, doubling the step, then
   * halving: a handful of reads for the usual case of the same or the previous block.
   */
  const consumedIn = (id: Hex, nonce: bigint, blockNumber: bigint) =>
    Effect.gen(function* () {
      if ((yield* nonceAt(id, blockNumber)) <= nonce) return undefined
      let used = blockNumber
      let unused = -1n
      for (let step = 1n; used > 0n; step *= 2n) {
        const probe = blockNumber - step < 0n ? 0n : blockNumber - step
        if ((yield* nonceAt(id, probe)) <= nonce) {
          unused = probe
          break
        }
        used = probe
      }
      while (used - unused > 1n) {
        const middle = (used + unused) / 2n
        if ((yield* nonceAt(id, middle)) > nonce) used = middle
        else unused = middle
      }
      return used
    })

  /** `tx`'s position in its block. */
  const indexOf = (tx: SettledTx) =>
    Effect.flatMap(chain.getTransactionReceipt(tx.hash), (receipt) =>
      receipt._tag === "Some"
        ? Effect.succeed(receipt.value.transactionIndex)
        : Effect.fail(new Error("no receipt for a settled transaction"))
    )

  /** The vault's `events` about `id` in `blockNumber`, from transactions before position `before`. */
  const eventsBefore = (
    id: Hex,
    names: ReadonlyArray<string>,
    blockNumber: bigint,
    before: number | undefined
  ) =>
    Effect.map(
      chain.getLogs({
        address: vaultAddress,
        fromBlock: blockNumber,
        toBlock: blockNumber,
        events: names.map((name) => getAbiItem({ abi: feeVaultAbi, name: name as "Claimed" }))
      }),
      (logs) =>
        (logs as ReadonlyArray<NonceEvent & { readonly transactionIndex: number | null }>).filter(
          (log) =>
            names.includes(log.eventName) &&
            same(log.args.id, id) &&
            (before === undefined || (log.transactionIndex !== null && log.transactionIndex < before))
        )
    )

  const exempt = (
    relayed: RelayedTx,
    cause: "deadline_passed" | "nonce_taken" | "registered_first" | "bind_changed",
    message: string
  ) =>
    Effect.zipRight(
      recordOnchainRevert(relayed.action, cause),
      Effect.logInfo(message).pipe(Effect.annotateLogs({ action: relayed.action }))
    )

  /**
   * Why another transaction, not the account, made `tx` revert, if one did: it executed a step of
   * the same request first (docs/relayer.md §8 "Revert cooldowns").
   */
  const causedByAnother = (tx: SettledTx, relayed: RelayedTx) =>
    Effect.gen(function* () {
      // The vault refuses the whole batch at its registration once the account exists.
      if (relayed.registers) {
        const before = yield* chain.readContract({
          address: vaultAddress,
          abi: feeVaultAbi,
          functionName: "accountOf",
          args: [relayed.id],
          blockNumber: tx.blockNumber - 1n
        })
        const registeredFirst =
          before[0] !== 0 ||
          (yield* eventsBefore(relayed.id, ["Registered"], tx.blockNumber, yield* indexOf(tx))).length > 0
        if (registeredFirst) return "registered_first" as const
      }
      if (
        relayed.action === "propose-bind" ||
        relayed.action === "finalize-bind" ||
        relayed.action === "cancel-bind"
      ) {
        const changed = yield* eventsBefore(
          relayed.id,
          ["BindProposed", "BindFinalized", "BindCancelled"],
          tx.blockNumber,
          yield* indexOf(tx)
        )
        if (changed.length > 0) return "bind_changed" as const
      }
      const step = relayed.firstSignedStep
      if (relayed.signedNonce !== undefined && step !== undefined) {
        const block = yield* consumedIn(relayed.id, relayed.signedNonce, tx.blockNumber)
        if (block !== undefined) {
          const events = yield* eventsBefore(
            relayed.id,
            nonceEvents,
            block,
            block === tx.blockNumber ? yield* indexOf(tx) : undefined
          )
          const taken = events.find((event) => same(event.args.nonce, relayed.signedNonce))
          if (taken !== undefined && isSameSignedStep(step, taken)) return "nonce_taken" as const
        }
      }
      return undefined
    })

  /** What a reverted relayed transaction is charged to, read from the chain at its block. */
  const examine = (tx: SettledTx, relayed: RelayedTx) =>
    Effect.gen(function* () {
      // Late by the chain's doing only when the sender had a whole replacement interval.
      if (relayed.deadlines.length > 0 && settings.minDeadlineSeconds >= settings.txReplaceAfterSeconds) {
        const block = yield* chain.getBlock({ blockNumber: tx.blockNumber })
        if (relayed.deadlines.some((deadline) => block.timestamp > deadline))
          return yield* exempt(
            relayed,
            "deadline_passed",
            "a relayed transaction was mined after its deadline; it does not count against the account"
          )
      }
      const cause = yield* causedByAnother(tx, relayed)
      if (cause === "nonce_taken") {
        if (relayed.openClaim) yield* recordClaimFrontrun
        return yield* exempt(
          relayed,
          cause,
          relayed.openClaim
            ? "a relayed open claim was executed first by another sender; it does not count against the account"
            : "a relayed transaction's signed step was executed first by another transaction; it does not count against the account"
        )
      }
      if (cause !== undefined)
        return yield* exempt(
          relayed,
          cause,
          cause === "registered_first"
            ? "a relayed registration was executed first by another transaction; it does not count against the account"
            : "another transaction changed the account's bind first; the relayed bind call does not count against the account"
        )
      const signers: Array<Address> = [...relayed.otherSigners]
      if (relayed.ownerSigned) {
        if (relayed.registeredOwner !== undefined) signers.push(relayed.registeredOwner)
        else {
          const account = yield* chain.readContract({
            address: vaultAddress,
            abi: feeVaultAbi,
            functionName: "accountOf",
            args: [relayed.id],
            blockNumber: tx.blockNumber
          })
          if (account[1] !== zeroAddress) signers.push(account[1])
        }
      }
      // The code as it was when the transaction was sent, not as the block left it.
      const codeHashes = new Set<string>()
      for (const signer of signers) {
        const hash = yield* codeHashOf(signer, tx.blockNumber - 1n)
        if (hash !== undefined) codeHashes.add(hash)
      }
      yield* strike(tx.hash, [
        { kind: "id", value: relayed.id.toLowerCase() },
        ...[...codeHashes].map((value) => ({ kind: "code" as const, value }))
      ])
      yield* recordOnchainRevert(relayed.action, "cooldown")
      yield* Effect.logWarning(
        "a relayed transaction passed simulation and reverted on chain: its account and owner code are on a cooldown"
      ).pipe(Effect.annotateLogs({ action: relayed.action, ownerContract: codeHashes.size > 0 }))
    }).pipe(
      Effect.retry(EXAMINE_RETRIES),
      Effect.catchAllCause((cause) =>
        recordOnchainRevert(relayed.action, "unexamined").pipe(
          Effect.zipRight(
            Effect.logWarning("a relayed transaction reverted on chain and could not be examined").pipe(
              Effect.annotateLogs({ action: relayed.action, failure: describeFailure(cause) })
            )
          )
        )
      )
    )

  const settled: RevertCooldownsShape["settled"] = (txs) => {
    const reverted = txs.flatMap((tx) => {
      if (!enabled || tx.outcome !== "reverted" || tx.to.toLowerCase() !== vault) return []
      const relayed = relayedTxOf(tx.data)
      return relayed === undefined ? [] : [{ tx, relayed }]
    })
    return Effect.forEach(reverted, ({ tx, relayed }) => examine(tx, relayed), { discard: true })
  }

  return { check, settled }
})

export class RevertCooldowns extends Context.Tag("RevertCooldowns")<RevertCooldowns, RevertCooldownsShape>() {
  /** Cooldowns in the relayer's database, read from the chain. */
  static readonly layer: Layer.Layer<RevertCooldowns, never, SqlClient | ChainClient | RelayerSettings> =
    Layer.effect(RevertCooldowns, makeRevertCooldowns)

  /** The sender's observer that feeds the cooldowns. */
  static readonly observer: Layer.Layer<SettledTxObserver, never, RevertCooldowns> = Layer.effect(
    SettledTxObserver,
    Effect.map(RevertCooldowns, (cooldowns) => cooldowns.settled)
  )

  /** No cooldowns: for pipelines under test that have no database and send nothing. */
  static readonly test: Layer.Layer<RevertCooldowns> = Layer.succeed(RevertCooldowns, {
    check: () => Effect.void,
    settled: () => Effect.void
  })
}
