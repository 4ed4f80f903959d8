/**
 * Revert cooldowns (src/relayer/RevertCooldowns.ts) on the real databases, with the chain stubbed
 * and the clock a test clock: a relayed claim mined reverted puts its account and its ERC-1271
 * owner's code hash on a cooldown that ends on time, doubles on each repeat up to the maximum,
 * counts one revert once however often it is told, starts over after a quiet spell, and never
 * counts a revert whose signed nonce another transaction used first.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Either, Layer, Metric, TestClock } from "effect"
import { type Address, type Hex, keccak256, toHex, zeroAddress } from "viem"
import { mockChainClient } from "../../src/chain/MockChainClient.js"
import { RelayerSettings, type RelayerSettingsShape } from "../../src/config/relayer.js"
import { claimsFrontrun, revertCooldowns } from "../../src/relayer/metrics.js"
import { claimCall } from "../../src/relayer/multicall.js"
import { RevertCooldowns, relayedTxOf } from "../../src/relayer/RevertCooldowns.js"
import { migrate } from "../../src/store/migrations.js"
import type { SettledTx } from "../../src/txsender/api.js"
import { testDatabases } from "../support/database.js"

const VAULT: Address = "0x00000000000000000000000000000000000000E1"
const WALLET: Address = "0x00000000000000000000000000000000000000C1"
/** Another deployment of the wallet's code under another address. */
const TWIN: Address = "0x00000000000000000000000000000000000000C2"
const OTHER_CODE_OWNER: Address = "0x00000000000000000000000000000000000000C3"
const WALLET_CODE: Hex = "0x6080604052348015600e575f5ffd5b50"
const HOUR = 3_600

const idOf = (label: string): Hex => keccak256(toHex(label))

/** `nonces(id)` after the block, as the stubbed chain answers it, by id. */
const noncesAfter = new Map<string, bigint>()

/** The mined block's timestamp: before every deadline the tests sign but `LATE`'s. */
const BLOCK_TIME = 1_900_000_000n
const LATE = BLOCK_TIME - 1n

const chain = mockChainClient({
  getBlock: () =>
    Effect.succeed({
      number: 10n,
      hash: keccak256(toHex("block")),
      parentHash: keccak256(toHex("parent")),
      timestamp: BLOCK_TIME
    }),
  getCode: (address) =>
    Effect.succeed(
      address === WALLET || address === TWIN ? WALLET_CODE : address === OTHER_CODE_OWNER ? "0x00" : "0x"
    ),
  readContract: ((request: { readonly functionName: string; readonly args: ReadonlyArray<unknown> }) =>
    Effect.succeed(
      request.functionName === "nonces"
        ? (noncesAfter.get(String(request.args[0])) ?? 0n)
        : [1, WALLET, zeroAddress, 0n, 0n, zeroAddress, 0n, 0n]
    )) as never
})

const settings = (base: number, max: number) =>
  Layer.succeed(RelayerSettings, {
    vault: VAULT,
    revertCooldownSeconds: base,
    revertCooldownMaxSeconds: max
  } as RelayerSettingsShape)

/** A claim for `id` at `nonce`, as the relayer sends it, mined reverted under `hash`. */
const revertedClaim = (
  id: Hex,
  hash: string,
  options: { nonce?: bigint; relayer?: Address; deadline?: bigint } = {}
): SettledTx => ({
  to: VAULT,
  data: claimCall(
    {
      beneficiaryId: id as never,
      asset: "0x00000000000000000000000000000000000000A1",
      amount: 10n,
      adapter: zeroAddress,
      dataHash: keccak256("0x") as never,
      relayer: options.relayer ?? "0x00000000000000000000000000000000000000B1",
      relayerFee: 1n,
      nonce: options.nonce ?? 0n,
      deadline: options.deadline ?? 2_000_000_000n
    } as never,
    "0x",
    "0x1234"
  ),
  outcome: "reverted",
  hash: keccak256(toHex(hash)),
  blockNumber: 10n
})

/** Real time between polls: the examination runs in the background against a real database. */
const pause = Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 10)))

const refusalOf = (id: Hex, owners: ReadonlyArray<Address> = []) =>
  Effect.flatMap(RevertCooldowns, (c) => Effect.either(c.check(id, owners)))

/** Retry-After of the refusal of `id`, or undefined when it is not refused. */
const retryAfter = (id: Hex, owners: ReadonlyArray<Address> = []) =>
  Effect.map(refusalOf(id, owners), (result) =>
    Either.isLeft(result) && result.left._tag === "RateLimited" ? result.left.retryAfterSeconds : undefined
  )

/** Cooldowns started or lengthened on accounts so far (the `key="id"` series). */
const idStrikes = Effect.map(
  Metric.value(Metric.tagged(revertCooldowns, "key", "id")),
  (state) => state.count
)

/** Tells the cooldowns of `tx` and waits until the strike count moved (or, `counts: false`, a while). */
const tell = (tx: SettledTx, counts = true) =>
  Effect.gen(function* () {
    const cooldowns = yield* RevertCooldowns
    const before = yield* idStrikes
    yield* cooldowns.settled([tx])
    for (let i = 0; i < 300; i++) {
      yield* pause
      if ((yield* idStrikes) !== before) return
    }
    if (counts) throw new Error("the revert was not recorded")
  })

describe("relayedTxOf", () => {
  it("reads the account, signed nonce and open-claim flag of a claim", () => {
    const id = idOf("a")
    expect(relayedTxOf(revertedClaim(id, "h", { nonce: 4n, relayer: zeroAddress }).data)).toMatchObject({
      action: "claim",
      id,
      signedNonce: 4n,
      openClaim: true,
      ownerSigned: true
    })
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
        expect(yield* retryAfter(id)).toBeUndefined()
        yield* tell(revertedClaim(id, `${database.name} ends 1`))
        expect(yield* retryAfter(id)).toBe(HOUR)
        // Another account signing through the same code is refused too; other code is not.
        expect(yield* retryAfter(idOf(`${database.name} twin`), [TWIN])).toBe(HOUR)
        expect(yield* retryAfter(idOf(`${database.name} twin`), [OTHER_CODE_OWNER])).toBeUndefined()
        expect(yield* retryAfter(idOf(`${database.name} twin`))).toBeUndefined()
        const refused = yield* refusalOf(id)
        expect(Either.isLeft(refused) && refused.left.message).toMatch(/reverted on chain/)
        yield* TestClock.adjust(`${HOUR - 1} seconds`)
        expect(yield* retryAfter(id)).toBe(1)
        yield* TestClock.adjust("1 second")
        expect(yield* retryAfter(id)).toBeUndefined()
        expect(yield* retryAfter(idOf(`${database.name} twin`), [TWIN])).toBeUndefined()
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
        yield* tell(revertedClaim(id, `${database.name} doubles 2`), false)
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
      "a revert whose signed nonce another transaction used counts nothing; an open claim counts as front-run",
      () =>
        Effect.gen(function* () {
          const id = idOf(`${database.name} front-run`)
          noncesAfter.set(id, 1n)
          const frontrunBefore = (yield* Metric.value(claimsFrontrun)).count
          yield* tell(revertedClaim(id, `${database.name} front-run 1`, { relayer: zeroAddress }), false)
          expect(yield* retryAfter(id)).toBeUndefined()
          expect((yield* Metric.value(claimsFrontrun)).count).toBe(frontrunBefore + 1)
          // The account's next nonce, unused by anyone else, reverting: that counts.
          yield* tell(revertedClaim(id, `${database.name} front-run 2`, { nonce: 1n, relayer: zeroAddress }))
          expect(yield* retryAfter(id)).toBe(HOUR)
          expect((yield* Metric.value(claimsFrontrun)).count).toBe(frontrunBefore + 1)
        })
    )

    it.effect("a claim mined after its deadline counts nothing", () =>
      Effect.gen(function* () {
        const id = idOf(`${database.name} late`)
        yield* tell(revertedClaim(id, `${database.name} late 1`, { deadline: LATE }), false)
        expect(yield* retryAfter(id)).toBeUndefined()
        // The same claim mined in time and reverting: that counts.
        yield* tell(revertedClaim(id, `${database.name} late 2`))
        expect(yield* retryAfter(id)).toBe(HOUR)
      })
    )
  })
}
