/**
 * Revert cooldowns (src/relayer/RevertCooldowns.ts) on the real databases, with the chain stubbed
 * and the clock a test clock: a relayed claim mined reverted puts its account and its ERC-1271
 * owner's code hash (as it was before the block) on a cooldown that ends on time, doubles on each
 * repeat up to the maximum, counts one revert once however often it is told, and starts over after
 * a quiet spell. The code hash refuses only requests that register a new account. A revert counts
 * nothing when another transaction executed a step of the same request first (the same signed
 * step at the nonce, the registration, a bind change earlier in the block); a nonce the owner used
 * for a different step counts. Cooldowns started and refusals are counted by key (id, code_hash).
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Either, Layer, Metric, Option, TestClock } from "effect"
import { type Address, encodeFunctionData, type Hex, keccak256, toHex, zeroAddress } from "viem"
import { feeVaultAbi } from "../../contracts/abi.js"
import { mockChainClient } from "../../src/chain/MockChainClient.js"
import { RelayerSettings, type RelayerSettingsShape } from "../../src/config/relayer.js"
import {
  type CooldownKey,
  claimsFrontrun,
  cooldownRefusals,
  onchainReverts,
  revertCooldowns
} from "../../src/relayer/metrics.js"
import { batchCalls, claimCall, registerCall } from "../../src/relayer/multicall.js"
import { RevertCooldowns, registersAccount, relayedTxOf } from "../../src/relayer/RevertCooldowns.js"
import { migrate } from "../../src/store/migrations.js"
import type { SettledTx } from "../../src/txsender/TxSenderShape.js"
import { testDatabases } from "../support/database.js"

const VAULT: Address = "0x00000000000000000000000000000000000000E1"
const WALLET: Address = "0x00000000000000000000000000000000000000C1"
/** Another deployment of the wallet's code under another address. */
const TWIN: Address = "0x00000000000000000000000000000000000000C2"
const OTHER_CODE_OWNER: Address = "0x00000000000000000000000000000000000000C3"
/** Two accounts' owners sharing one code (two proxies of one implementation). */
const PROXY_A: Address = "0x00000000000000000000000000000000000000D1"
const PROXY_B: Address = "0x00000000000000000000000000000000000000D2"
/** An EIP-7702 account whose delegation changes in the revert's block, and one delegating to each code. */
const REDELEGATED: Address = "0x00000000000000000000000000000000000000C4"
const DELEGATED_BEFORE: Address = "0x00000000000000000000000000000000000000C5"
const DELEGATED_AFTER: Address = "0x00000000000000000000000000000000000000C6"
/** Owners sharing one code, registered by the registration test's batches. */
const REGISTERING: Address = "0x00000000000000000000000000000000000000f1"
const REGISTERING_TWIN: Address = "0x00000000000000000000000000000000000000f2"
const RELAYER: Address = "0x00000000000000000000000000000000000000B1"
const WALLET_CODE: Hex = "0x6080604052348015600e575f5ffd5b50"
/** Owner code by address; `REDELEGATED`'s changes in the revert's block. */
const codes = new Map<Address, Hex>([
  [WALLET, WALLET_CODE],
  [TWIN, WALLET_CODE],
  [OTHER_CODE_OWNER, "0x00"],
  [PROXY_A, "0x01"],
  [PROXY_B, "0x01"],
  [DELEGATED_BEFORE, "0xef0100aa"],
  [DELEGATED_AFTER, "0xef0100bb"],
  [REGISTERING, "0x02"],
  [REGISTERING_TWIN, "0x02"]
])
/** Accounts' owners by id, `WALLET` unless set. */
const ownerOf = new Map<string, Address>()
const HOUR = 3_600
/** The block every reverted transaction here is mined in, and its position there. */
const BLOCK = 10n
const OUR_INDEX = 5

const idOf = (label: string): Hex => keccak256(toHex(label))

/** `nonces(id)` as the stubbed chain answers it: from which block on each value holds, by id. */
const nonceChanges = new Map<string, ReadonlyArray<{ readonly from: bigint; readonly nonce: bigint }>>()
/** Vault events the stubbed chain's `eth_getLogs` returns. */
const vaultLogs: Array<{
  readonly blockNumber: bigint
  readonly transactionIndex: number
  readonly eventName: string
  readonly args: Readonly<Record<string, unknown>>
}> = []
/** Accounts unregistered before this block (`accountOf` kind 0); every other one is registered. */
const registeredFrom = new Map<string, bigint>()

/** The mined block's timestamp: before every deadline the tests sign but `LATE`'s. */
const BLOCK_TIME = 1_900_000_000n
const LATE = BLOCK_TIME - 1n

const chain = mockChainClient({
  getBlock: () =>
    Effect.succeed({
      number: BLOCK,
      hash: keccak256(toHex("block")),
      parentHash: keccak256(toHex("parent")),
      timestamp: BLOCK_TIME
    }),
  getCode: (address, blockNumber) =>
    Effect.succeed(
      address.toLowerCase() === REDELEGATED.toLowerCase()
        ? blockNumber !== undefined && blockNumber < BLOCK
          ? "0xef0100aa"
          : "0xef0100bb"
        : ([...codes].find(([owner]) => owner.toLowerCase() === address.toLowerCase())?.[1] ?? "0x")
    ),
  readContract: ((request: {
    readonly functionName: string
    readonly args: ReadonlyArray<unknown>
    readonly blockNumber?: bigint
  }) => {
    const id = String(request.args[0])
    const block = request.blockNumber ?? BLOCK
    if (request.functionName === "nonces")
      return Effect.succeed(
        (nonceChanges.get(id) ?? []).filter((change) => change.from <= block).at(-1)?.nonce ?? 0n
      )
    const registered = block >= (registeredFrom.get(id) ?? 0n)
    return Effect.succeed([
      registered ? 1 : 0,
      registered ? (ownerOf.get(id) ?? WALLET) : zeroAddress,
      zeroAddress,
      0n,
      0n,
      zeroAddress,
      0n,
      0n
    ])
  }) as never,
  getTransactionReceipt: () => Effect.succeed(Option.some({ transactionIndex: OUR_INDEX } as never)),
  getLogs: ((request: {
    readonly fromBlock: bigint
    readonly toBlock: bigint
    readonly events: ReadonlyArray<{ readonly name: string }>
  }) =>
    Effect.succeed(
      vaultLogs.filter(
        (log) =>
          log.blockNumber >= request.fromBlock &&
          log.blockNumber <= request.toBlock &&
          request.events.some((event) => event.name === log.eventName)
      )
    )) as never
})

/** `MIN_DEADLINE_SECONDS`, changed by the deadline test. */
let minDeadlineSeconds = 120

const settings = (base: number, max: number) =>
  Layer.succeed(RelayerSettings, {
    vault: VAULT,
    revertCooldownSeconds: base,
    revertCooldownMaxSeconds: max,
    txReplaceAfterSeconds: 60,
    get minDeadlineSeconds() {
      return minDeadlineSeconds
    }
  } as RelayerSettingsShape)

const ASSET: Address = "0x00000000000000000000000000000000000000A1"

/** The claim `revertedClaim` sends. */
const claimOf = (id: Hex, options: { nonce?: bigint; relayer?: Address; deadline?: bigint } = {}) => ({
  beneficiaryId: id as never,
  asset: ASSET,
  amount: 10n,
  adapter: zeroAddress,
  dataHash: keccak256("0x") as never,
  relayer: options.relayer ?? RELAYER,
  relayerFee: 1n,
  nonce: options.nonce ?? 0n,
  deadline: options.deadline ?? 2_000_000_000n
})

/** The `Claimed` event of `claimOf(id, options)` executed by `sender`. */
const claimedEvent = (id: Hex, nonce: bigint, sender: Address) => ({
  eventName: "Claimed",
  args: { id, asset: ASSET, adapter: zeroAddress, relayer: sender, amount: 10n, relayerFee: 1n, nonce }
})

/** A claim for `id` at `nonce`, as the relayer sends it, mined reverted under `hash`. */
const revertedClaim = (
  id: Hex,
  hash: string,
  options: { nonce?: bigint; relayer?: Address; deadline?: bigint; register?: Address } = {}
): SettledTx => {
  const claim = claimCall(claimOf(id, options) as never, "0x", "0x1234")
  return reverted(
    options.register === undefined
      ? claim
      : batchCalls([
          registerCall({
            kind: 1,
            owner: options.register,
            salt: keccak256(toHex(id)),
            fallbackRecipient: zeroAddress,
            fallbackDelay: 0n
          } as never),
          claim
        ]),
    hash
  )
}

const reverted = (data: Hex, hash: string): SettledTx => ({
  to: VAULT,
  data,
  outcome: "reverted",
  hash: keccak256(toHex(hash)),
  blockNumber: BLOCK
})

/** Real time between polls: the examination runs in the background against a real database. */
const pause = Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 10)))

const refusalOf = (id: Hex, owners: ReadonlyArray<Address> = [], registers = false) =>
  Effect.flatMap(RevertCooldowns, (c) => Effect.either(c.check(id, owners, registers)))

/** Retry-After of the refusal of `id`, or undefined when it is not refused. */
const retryAfter = (id: Hex, owners: ReadonlyArray<Address> = [], registers = false) =>
  Effect.map(refusalOf(id, owners, registers), (result) =>
    Either.isLeft(result) && result.left._tag === "RateLimited" ? result.left.retryAfterSeconds : undefined
  )

const CAUSES = [
  "cooldown",
  "nonce_taken",
  "registered_first",
  "bind_changed",
  "deadline_passed",
  "unexamined"
]

/** Relayed transactions examined so far, by cause (claims and finalize-bind calls). */
const examinedAs = (cause: string) =>
  Effect.map(
    Effect.forEach(["claim", "finalize-bind"], (action) =>
      Metric.value(Metric.tagged(Metric.tagged(onchainReverts, "action", action), "cause", cause))
    ),
    (states) => states.reduce((sum, state) => sum + state.count, 0)
  )

/** Relayed transactions examined so far (every cause). */
const examined = Effect.map(Effect.forEach(CAUSES, examinedAs), (counts) => counts.reduce((a, b) => a + b, 0))

/** Tells the cooldowns of `tx` and waits until it was examined. */
const tell = (tx: SettledTx) =>
  Effect.gen(function* () {
    const cooldowns = yield* RevertCooldowns
    const before = yield* examined
    yield* cooldowns.settled([tx])
    for (let i = 0; i < 300; i++) {
      if ((yield* examined) !== before) return
      yield* pause
    }
    throw new Error("the revert was not examined")
  })

/** Cooldowns started or lengthened so far under `key` (`relayer_revert_cooldowns_total{key}`). */
const strikesOf = (key: CooldownKey) =>
  Effect.map(Metric.value(Metric.tagged(revertCooldowns, "key", key)), (state) => state.count)

/** Cooldowns started or lengthened on accounts so far (the `key="id"` series). */
const idStrikes = strikesOf("id")

/** Requests refused so far for a cooldown under `key` (`relayer_revert_cooldown_refusals_total{key}`). */
const refusalsOf = (key: CooldownKey) =>
  Effect.map(Metric.value(Metric.tagged(cooldownRefusals, "key", key)), (state) => state.count)

/** Both counters, each by key. */
const counts = Effect.all({
  strikes: Effect.all({ id: strikesOf("id"), code_hash: strikesOf("code_hash") }),
  refusals: Effect.all({ id: refusalsOf("id"), code_hash: refusalsOf("code_hash") })
})

/** `effect`'s result, and how much each key's series of both counters grew while it ran. */
const counted = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const before = yield* counts
    const result = yield* effect
    const after = yield* counts
    return {
      result,
      strikes: {
        id: after.strikes.id - before.strikes.id,
        code_hash: after.strikes.code_hash - before.strikes.code_hash
      },
      refusals: {
        id: after.refusals.id - before.refusals.id,
        code_hash: after.refusals.code_hash - before.refusals.code_hash
      }
    }
  })

describe("relayedTxOf", () => {
  it("reads the account, signed nonce and open-claim flag of a claim, and whether it registers", () => {
    const id = idOf("a")
    expect(relayedTxOf(revertedClaim(id, "h", { nonce: 4n, relayer: zeroAddress }).data)).toMatchObject({
      action: "claim",
      id,
      signedNonce: 4n,
      openClaim: true,
      ownerSigned: true,
      registers: false
    })
    expect(relayedTxOf(revertedClaim(id, "h", { register: WALLET }).data)).toMatchObject({
      registers: true,
      registeredOwner: WALLET
    })
    expect(registersAccount([claimCall(claimOf(id) as never, "0x", "0x1234")])).toBe(false)
    expect(relayedTxOf("0x12345678")).toBeUndefined()
  })
})

for (const database of testDatabases()) {
  const services = RevertCooldowns.layer.pipe(
    Layer.provideMerge(Layer.mergeAll(chain, settings(HOUR, 4 * HOUR))),
    Layer.provideMerge(Layer.effectDiscard(migrate).pipe(Layer.provideMerge(database.layer)))
  )

  layer(services, { timeout: 60_000 })(`revert cooldowns on ${database.name}`, (it) => {
    it.effect("the account and the owner's code are refused for an hour, then served again", () =>
      Effect.gen(function* () {
        const id = idOf(`${database.name} ends`)
        const twin = idOf(`${database.name} twin`)
        expect(yield* counted(retryAfter(id))).toEqual({
          result: undefined,
          strikes: { id: 0, code_hash: 0 },
          refusals: { id: 0, code_hash: 0 }
        })
        // The account and its ERC-1271 owner's code go on a cooldown: one of each counted.
        const struck = yield* counted(tell(revertedClaim(id, `${database.name} ends 1`)))
        expect(struck.strikes).toEqual({ id: 1, code_hash: 1 })
        // Each refusal is counted under the key that refused it.
        expect(yield* counted(retryAfter(id))).toEqual({
          result: HOUR,
          strikes: { id: 0, code_hash: 0 },
          refusals: { id: 1, code_hash: 0 }
        })
        // A new account signing through the same code is refused too; other code is not.
        expect(yield* counted(retryAfter(twin, [TWIN], true))).toEqual({
          result: HOUR,
          strikes: { id: 0, code_hash: 0 },
          refusals: { id: 0, code_hash: 1 }
        })
        expect(yield* counted(retryAfter(twin, [OTHER_CODE_OWNER], true))).toMatchObject({
          result: undefined,
          refusals: { id: 0, code_hash: 0 }
        })
        expect(yield* retryAfter(twin)).toBeUndefined()
        const refused = yield* refusalOf(id)
        expect(Either.isLeft(refused) && refused.left.message).toMatch(/reverted on chain/)
        yield* TestClock.adjust(`${HOUR - 1} seconds`)
        expect(yield* retryAfter(id)).toBe(1)
        yield* TestClock.adjust("1 second")
        expect(yield* retryAfter(id)).toBeUndefined()
        expect(yield* retryAfter(twin, [TWIN], true)).toBeUndefined()
      })
    )

    it.effect("an established account sharing the code is not refused: only a new account is", () =>
      Effect.gen(function* () {
        const id = idOf(`${database.name} shared`)
        const established = idOf(`${database.name} shared established`)
        ownerOf.set(id, PROXY_A)
        yield* tell(revertedClaim(id, `${database.name} shared 1`))
        expect(yield* retryAfter(id)).toBe(HOUR)
        // Every proxy of one implementation shares its code: the others go on being served.
        expect(yield* retryAfter(established, [PROXY_B])).toBeUndefined()
        expect(yield* retryAfter(established, [PROXY_B], true)).toBe(HOUR)
      })
    )

    it.effect("the owner's code is the one it had before the block, not the one the block left", () =>
      Effect.gen(function* () {
        const id = idOf(`${database.name} redelegated`)
        registeredFrom.set(id, BLOCK + 1n)
        // Redelegated in the revert's block to another code: that code is not struck, the earlier one is.
        yield* tell(revertedClaim(id, `${database.name} redelegated 1`, { register: REDELEGATED }))
        expect(yield* retryAfter(id)).toBe(HOUR)
        const fresh = idOf(`${database.name} redelegated new`)
        expect(yield* retryAfter(fresh, [DELEGATED_AFTER], true)).toBeUndefined()
        expect(yield* retryAfter(fresh, [REDELEGATED], true)).toBeUndefined()
        expect(yield* retryAfter(fresh, [DELEGATED_BEFORE], true)).toBe(HOUR)
      })
    )

    it.effect("each repeat doubles the cooldown up to the maximum; one revert counts once", () =>
      Effect.gen(function* () {
        const id = idOf(`${database.name} doubles`)
        yield* tell(revertedClaim(id, `${database.name} doubles 1`))
        expect(yield* retryAfter(id)).toBe(HOUR)
        yield* tell(revertedClaim(id, `${database.name} doubles 2`))
        expect(yield* retryAfter(id)).toBe(2 * HOUR)
        // The same mined transaction told again (another replica's monitor, say): no change.
        const strikes = yield* idStrikes
        yield* tell(revertedClaim(id, `${database.name} doubles 2`))
        expect(yield* idStrikes).toBe(strikes)
        expect(yield* retryAfter(id)).toBe(2 * HOUR)
        yield* tell(revertedClaim(id, `${database.name} doubles 3`))
        expect(yield* retryAfter(id)).toBe(4 * HOUR)
        yield* tell(revertedClaim(id, `${database.name} doubles 4`))
        expect(yield* retryAfter(id)).toBe(4 * HOUR)
        // Quiet for a whole maximum cooldown after the last one ended: it starts over.
        yield* TestClock.adjust(`${8 * HOUR + 1} seconds`)
        expect(yield* retryAfter(id)).toBeUndefined()
        yield* tell(revertedClaim(id, `${database.name} doubles 5`))
        expect(yield* retryAfter(id)).toBe(HOUR)
      })
    )

    it.effect(
      "an open claim copied and mined first counts nothing and counts as front-run; the next nonce reverting counts",
      () =>
        Effect.gen(function* () {
          const id = idOf(`${database.name} front-run`)
          nonceChanges.set(id, [{ from: BLOCK, nonce: 1n }])
          vaultLogs.push({
            blockNumber: BLOCK,
            transactionIndex: 2,
            ...claimedEvent(id, 0n, OTHER_CODE_OWNER)
          })
          const frontrunBefore = (yield* Metric.value(claimsFrontrun)).count
          yield* tell(revertedClaim(id, `${database.name} front-run 1`, { relayer: zeroAddress }))
          expect(yield* retryAfter(id)).toBeUndefined()
          expect((yield* Metric.value(claimsFrontrun)).count).toBe(frontrunBefore + 1)
          // The account's next nonce, unused by anyone else, reverting: that counts.
          yield* tell(revertedClaim(id, `${database.name} front-run 2`, { nonce: 1n, relayer: zeroAddress }))
          expect(yield* retryAfter(id)).toBe(HOUR)
          expect((yield* Metric.value(claimsFrontrun)).count).toBe(frontrunBefore + 1)
        })
    )

    it.effect("the same claim executed by another transaction blocks earlier counts nothing", () =>
      Effect.gen(function* () {
        const id = idOf(`${database.name} earlier`)
        nonceChanges.set(id, [{ from: 7n, nonce: 1n }])
        vaultLogs.push({ blockNumber: 7n, transactionIndex: 9, ...claimedEvent(id, 0n, OTHER_CODE_OWNER) })
        yield* tell(revertedClaim(id, `${database.name} earlier 1`, { relayer: zeroAddress }))
        expect(yield* retryAfter(id)).toBeUndefined()
      })
    )

    it.effect("a nonce the owner used for a different step counts, as does a copy mined after ours", () =>
      Effect.gen(function* () {
        // The owner pings at the claim's nonce ahead of it: the claim reverts at the relayer's cost.
        const pinged = idOf(`${database.name} own ping`)
        nonceChanges.set(pinged, [{ from: BLOCK, nonce: 1n }])
        vaultLogs.push({
          blockNumber: BLOCK,
          transactionIndex: 1,
          eventName: "Pinged",
          args: { id: pinged, nonce: 0n }
        })
        yield* tell(revertedClaim(pinged, `${database.name} own ping 1`))
        expect(yield* retryAfter(pinged)).toBe(HOUR)
        // Another claim at the nonce, for another amount: a different step.
        const other = idOf(`${database.name} other claim`)
        nonceChanges.set(other, [{ from: BLOCK, nonce: 1n }])
        const event = claimedEvent(other, 0n, RELAYER)
        vaultLogs.push({
          blockNumber: BLOCK,
          transactionIndex: 1,
          ...event,
          args: { ...event.args, amount: 9n }
        })
        yield* tell(revertedClaim(other, `${database.name} other claim 1`))
        expect(yield* retryAfter(other)).toBe(HOUR)
        // The same claim, but mined after ours in the block: ours reverted for another reason.
        const after = idOf(`${database.name} after`)
        nonceChanges.set(after, [{ from: BLOCK, nonce: 1n }])
        vaultLogs.push({
          blockNumber: BLOCK,
          transactionIndex: OUR_INDEX + 1,
          ...claimedEvent(after, 0n, RELAYER)
        })
        yield* tell(revertedClaim(after, `${database.name} after 1`, { relayer: zeroAddress }))
        expect(yield* retryAfter(after)).toBe(HOUR)
      })
    )

    it.effect(
      "a registration executed first by another transaction counts nothing; a revert after it does",
      () =>
        Effect.gen(function* () {
          // Registered in the same block, ahead of the relayer's batch (which reverts AlreadyRegistered).
          const raced = idOf(`${database.name} registered`)
          registeredFrom.set(raced, BLOCK)
          vaultLogs.push({
            blockNumber: BLOCK,
            transactionIndex: 3,
            eventName: "Registered",
            args: { id: raced }
          })
          yield* tell(revertedClaim(raced, `${database.name} registered 1`, { register: REGISTERING }))
          expect(yield* retryAfter(raced)).toBeUndefined()
          expect(
            yield* retryAfter(idOf(`${database.name} registered new`), [REGISTERING_TWIN], true)
          ).toBeUndefined()
          // Registered in an earlier block, after the relayer simulated it.
          const earlier = idOf(`${database.name} registered earlier`)
          registeredFrom.set(earlier, BLOCK - 2n)
          yield* tell(
            revertedClaim(earlier, `${database.name} registered earlier 1`, { register: REGISTERING })
          )
          expect(yield* retryAfter(earlier)).toBeUndefined()
          // Not registered by anyone before it: the batch reverted for its own reasons.
          const own = idOf(`${database.name} registered own`)
          registeredFrom.set(own, BLOCK + 1n)
          yield* tell(revertedClaim(own, `${database.name} registered own 1`, { register: REGISTERING }))
          expect(yield* retryAfter(own)).toBe(HOUR)
          expect(yield* retryAfter(idOf(`${database.name} registered new`), [REGISTERING_TWIN], true)).toBe(
            HOUR
          )
        })
    )

    it.effect(
      "an unpaid bind call that reverts puts the account on a cooldown, unless a bind change raced it",
      () =>
        Effect.gen(function* () {
          const finalize = (id: Hex, hash: string) =>
            reverted(encodeFunctionData({ abi: feeVaultAbi, functionName: "finalizeBind", args: [id] }), hash)
          const id = idOf(`${database.name} bind`)
          // No owner signed it, so no owner code is struck: the account alone.
          const struck = yield* counted(tell(finalize(id, `${database.name} bind 1`)))
          expect(struck.strikes).toEqual({ id: 1, code_hash: 0 })
          expect(yield* retryAfter(id)).toBe(HOUR)
          // Another transaction finalized (or cancelled) the bind earlier in the block.
          const raced = idOf(`${database.name} bind raced`)
          vaultLogs.push({
            blockNumber: BLOCK,
            transactionIndex: 0,
            eventName: "BindFinalized",
            args: { id: raced }
          })
          yield* tell(finalize(raced, `${database.name} bind raced 1`))
          expect(yield* retryAfter(raced)).toBeUndefined()
        })
    )

    it.effect("a claim mined after its deadline counts nothing, unless the deadline headroom was short", () =>
      Effect.gen(function* () {
        const id = idOf(`${database.name} late`)
        yield* tell(revertedClaim(id, `${database.name} late 1`, { deadline: LATE }))
        expect(yield* retryAfter(id)).toBeUndefined()
        // The same claim mined in time and reverting: that counts.
        yield* tell(revertedClaim(id, `${database.name} late 2`))
        expect(yield* retryAfter(id)).toBe(HOUR)
        // MIN_DEADLINE_SECONDS below one replacement interval: the signer's deadline made it late.
        const short = idOf(`${database.name} late short`)
        minDeadlineSeconds = 0
        try {
          yield* tell(revertedClaim(short, `${database.name} late short 1`, { deadline: LATE }))
        } finally {
          minDeadlineSeconds = 120
        }
        expect(yield* retryAfter(short)).toBe(HOUR)
      })
    )
  })
}
