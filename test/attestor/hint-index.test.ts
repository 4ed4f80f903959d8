/**
 * The hint index on anvil, over the vault indexer's event store (PGlite, and PostgreSQL when
 * DATABASE_URL is set): launches by the launcher role with hints for this attestor, for another
 * one only, for the wrong id, garbage, two envelopes, two launches to one id and a fallback. The
 * live index must find exactly the escrows this attestor can attest, count what it set aside,
 * equal a rebuild from scratch, and drop a launch whose block a reorg abandoned.
 */
import { randomBytes } from "node:crypto"
import { Effect, Layer, Logger, LogLevel, ManagedRuntime, Metric, Option } from "effect"
import { type Address, getAddress, type Hex, keccak256, numberToHex } from "viem"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { computeId } from "../../schema/ids.js"
import {
  HintDecryptor,
  hintsRejected,
  TEST_HINT_PRIVATE_KEY
} from "../../src/attestor/hints/HintDecryptor.js"
import { HintIndex, rebuildHintIndex } from "../../src/attestor/hints/HintIndex.js"
import {
  encodeBeneficiaryHint,
  type HintPlaintext,
  hintBeneficiaryId,
  hintPublicKeyOf,
  makeHint,
  sealHint
} from "../../src/attestor/hints/hintEnvelopes.js"
import { ChainClient } from "../../src/chain/ChainClient.js"
import { Indexer } from "../../src/indexer/Indexer.js"
import { EventStore } from "../../src/store/EventStore.js"
import { migrate } from "../../src/store/migrations.js"
import type { Escrow } from "../../src/store/projections/hints.js"
import { vaultSend } from "../contracts/fixture.js"
import { eventually } from "../indexer/support/harness.js"
import { type Ctx, startVault } from "../indexer/support/vault.js"
import { testDatabases } from "../support/database.js"

const OUR_PUBLIC = hintPublicKeyOf(TEST_HINT_PRIVATE_KEY)
const OTHER_PUBLIC = hintPublicKeyOf(keccak256(numberToHex(0xbad)))
const PEPPER = Uint8Array.from(randomBytes(32))
const FALLBACK = getAddress(numberToHex(0xfa11, { size: 20 }))

let tokenSeq = 0
const nextToken = (): Address => getAddress(numberToHex(0x70_0000 + ++tokenSeq, { size: 20 }))
const hint = (userId: string, n: number, fallback?: { recipient: Address; delay: bigint }): HintPlaintext =>
  makeHint(PEPPER, 1, userId, keccak256(numberToHex(n)), fallback)

/** `launch(token, beneficiaryId, beneficiaryHint)` from the launcher (mnemonic #0). */
async function launch(ctx: Ctx, beneficiaryId: Hex, beneficiaryHint: Hex): Promise<Address> {
  const token = nextToken()
  await vaultSend(ctx, ctx.admin, "launch", [token, beneficiaryId, beneficiaryHint])
  return token
}

const sealed = (h: HintPlaintext, ...keys: Hex[]) => encodeBeneficiaryHint(keys.map((k) => sealHint(k, h)))

const rejectedCount = (reason: string) =>
  Metric.value(Metric.tagged(hintsRejected, "reason", reason)).pipe(Effect.map((s) => s.count))

let ctx: Ctx

beforeAll(async () => {
  ctx = await startVault()
})
afterAll(async () => {
  await ctx?.anvil.stop()
})

for (const database of testDatabases()) {
  describe(`${database.name}`, () => {
    const makeRuntime = () =>
      ManagedRuntime.make(
        HintIndex.layer({ startBlock: ctx.deployment.startBlock, pollIntervalMs: 50 }).pipe(
          Layer.provideMerge(
            Indexer.layer({
              chainId: Option.some(ctx.chainId),
              vault: ctx.vault,
              startBlock: ctx.deployment.startBlock,
              settlementAsset: ctx.usdt,
              pollIntervalMs: 50,
              confirmationDepth: 64,
              maxBlockRange: 2_000
            })
          ),
          Layer.provideMerge(EventStore.layer),
          Layer.provideMerge(HintDecryptor.fromKey(TEST_HINT_PRIVATE_KEY)),
          Layer.provideMerge(ChainClient.layer({ rpcUrl: ctx.anvil.rpcUrl, timeoutMs: 10_000 })),
          Layer.provideMerge(Layer.effectDiscard(migrate).pipe(Layer.provideMerge(database.layer))),
          Layer.provide(Logger.minimumLogLevel(LogLevel.Error))
        )
      )
    let runtime: ReturnType<typeof makeRuntime>

    beforeAll(async () => {
      runtime = makeRuntime()
      // Start-up (a fresh database, migrations, the first range) belongs to the hook, whose budget
      // is larger: on a busy machine it alone can take most of one wait below.
      await eventually(
        "the hint index to start",
        () => runtime.runPromise(Effect.flatMap(HintIndex, (i) => i.status)),
        (status) => status.state === "ready",
        100_000
      )
    })
    afterAll(async () => {
      await runtime?.dispose()
    })

    const escrowsOf = (userId: string) =>
      runtime.runPromise(
        Effect.flatMap(HintIndex, (index) => index.escrowsOf(1, userId)).pipe(
          Effect.map((found) => (found._tag === "Some" ? found.value.escrows : undefined))
        )
      )

    /** Waits until the index covers the chain's head, block and hash. */
    const coversHead = async () => {
      await eventually(
        "the hint index to cover the head",
        async () => ({
          head: await ctx.publicClient.getBlock(),
          status: await runtime.runPromise(Effect.flatMap(HintIndex, (i) => i.status))
        }),
        ({ head, status }) => status.block === Number(head.number) && status.hash === head.hash
      )
    }

    /** The live index and a rebuild from scratch of the same store, at the same block. */
    const expectEqualsRebuild = async () => {
      const { live, rebuilt } = await runtime.runPromise(
        Effect.gen(function* () {
          const index = yield* HintIndex
          const decryptor = yield* HintDecryptor
          const store = yield* EventStore
          const live = yield* index.read(
            (s) => s && { block: s.block, hash: s.hash, escrows: s.projection.escrows() }
          )
          const follower = yield* rebuildHintIndex(
            store,
            { ref: { chainId: ctx.chainId, vault: ctx.vault }, startBlock: ctx.deployment.startBlock },
            decryptor.opener
          )
          return {
            live,
            rebuilt: { ...follower.coverage, escrows: follower.projection.escrows() }
          }
        })
      )
      expect(live).toBeDefined()
      expect(rebuilt).toEqual(live)
      return live?.escrows as ReadonlyArray<Escrow>
    }

    it("finds the escrows whose hints it can open, and only those", async () => {
      // Launches of an earlier run on this chain are counted as this index folds them in first.
      await coversHead()
      const before = await runtime.runPromise(
        Effect.all({ mismatch: rejectedCount("mismatch"), encoding: rejectedCount("encoding") })
      )
      // Each user id is unique to its database run, so both runs share one chain.
      const user = (n: number) => String((database.name === "pglite" ? 2_000_000 : 3_000_000) + n)
      const ours = hint(user(1), 1)
      const oursToken = await launch(ctx, hintBeneficiaryId(ours), sealed(ours, OUR_PUBLIC))
      const theirs = hint(user(2), 2)
      await launch(ctx, hintBeneficiaryId(theirs), sealed(theirs, OTHER_PUBLIC))
      const wrong = hint(user(3), 3)
      await launch(ctx, hintBeneficiaryId(hint(user(3), 4)), sealed(wrong, OUR_PUBLIC))
      await launch(ctx, keccak256(numberToHex(5)), "0xdeadbeef")
      const shared = hint(user(4), 5)
      const sharedToken = await launch(
        ctx,
        hintBeneficiaryId(shared),
        sealed(shared, OTHER_PUBLIC, OUR_PUBLIC)
      )
      const twice = hint(user(5), 6)
      const first = await launch(ctx, hintBeneficiaryId(twice), sealed(twice, OUR_PUBLIC))
      const second = await launch(ctx, hintBeneficiaryId(twice), sealed(twice, OUR_PUBLIC, OTHER_PUBLIC))
      const withFallback = hint(user(6), 7, { recipient: FALLBACK, delay: 86_400n })
      const fallbackId = hintBeneficiaryId(withFallback)
      await launch(ctx, fallbackId, sealed(withFallback, OUR_PUBLIC))
      await coversHead()

      const found = await escrowsOf(user(1))
      expect(found?.map((e) => [e.beneficiaryId, e.launches.map((l) => l.token)])).toEqual([
        [hintBeneficiaryId(ours), [oursToken]]
      ])
      expect(found?.[0]?.hint).toMatchObject({ platformId: 1, userId: user(1), nonce: ours.nonce })
      expect(await escrowsOf(user(2))).toEqual([])
      expect(await escrowsOf(user(3))).toEqual([])
      expect((await escrowsOf(user(4)))?.map((e) => e.launches.map((l) => l.token))).toEqual([[sharedToken]])
      const both = await escrowsOf(user(5))
      expect(both?.map((e) => e.launches.map((l) => l.token))).toEqual([[first, second]])
      const fb = await escrowsOf(user(6))
      expect(fb?.[0]?.beneficiaryId).toBe(fallbackId)
      expect(fb?.[0]?.hint.fallback).toEqual({ recipient: FALLBACK, delay: 86_400n })
      expect(computeId(2, fb?.[0]?.hint.handleCommitment as Hex, FALLBACK, 86_400n)).toBe(fallbackId)

      const after = await runtime.runPromise(
        Effect.all({ mismatch: rejectedCount("mismatch"), encoding: rejectedCount("encoding") })
      )
      expect(after.mismatch - before.mismatch).toBe(1)
      expect(after.encoding - before.encoding).toBe(1)

      const escrows = await expectEqualsRebuild()
      expect(escrows.length).toBeGreaterThanOrEqual(4)
    })

    it("drops a launch whose block a reorg abandoned", async () => {
      const user = (n: number) => String((database.name === "pglite" ? 2_100_000 : 3_100_000) + n)
      const kept = hint(user(1), 11)
      await launch(ctx, hintBeneficiaryId(kept), sealed(kept, OUR_PUBLIC))
      await coversHead()
      const snapshot = await ctx.testClient.snapshot()
      const abandoned = hint(user(2), 12)
      await launch(ctx, hintBeneficiaryId(abandoned), sealed(abandoned, OUR_PUBLIC))
      const keptAgain = await launch(ctx, hintBeneficiaryId(kept), sealed(kept, OUR_PUBLIC))
      await coversHead()
      expect(await escrowsOf(user(2))).toHaveLength(1)
      expect((await escrowsOf(user(1)))?.[0]?.launches.map((l) => l.token)).toContain(keptAgain)
      const height = (await ctx.publicClient.getBlock()).number

      await ctx.testClient.revert({ id: snapshot })
      const replacement = hint(user(3), 13)
      await launch(ctx, hintBeneficiaryId(replacement), sealed(replacement, OUR_PUBLIC))
      const head = (await ctx.publicClient.getBlock()).number
      if (head <= height) await ctx.testClient.mine({ blocks: Number(height - head) + 1 })
      await coversHead()

      expect(await escrowsOf(user(2))).toEqual([])
      expect((await escrowsOf(user(1)))?.[0]?.launches).toHaveLength(1)
      expect(await escrowsOf(user(3))).toHaveLength(1)
      await expectEqualsRebuild()
    })
  })
}
