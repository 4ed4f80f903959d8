/**
 * Block headers while following the head on anvil: with a small retention and prune interval
 * (the indexer's layer options; production defaults are far larger), the stored headers stay
 * within a bounded window below the tip however many blocks are followed, vault events are all
 * kept, and a reorg within the confirmation depth after many prunings is still found and replaced
 * exactly.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect, Layer, Logger, LogLevel, ManagedRuntime, Option, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ChainClient } from "../../src/chain/ChainClient.js"
import { Indexer } from "../../src/indexer/Indexer.js"
import { EventStore } from "../../src/store/EventStore.js"
import { accountRecord } from "../../src/store/projections/accounts.js"
import { storageLayer } from "../../src/store/sql.js"
import {
  type Accounts,
  chainLogKeys,
  databaseKinds,
  eventually,
  expectMatchesChain,
  latestBlock,
  makeStorage,
  rebuild,
  storedLogKeys
} from "./support/harness.js"
import { branchActivity, type Ctx, startVault } from "./support/vault.js"

const DEPTH = 8
const RETENTION = 16
const INTERVAL = 10
/** Blocks mined at a time: fewer than the depth, so the indexer follows them header by header. */
const CHUNK = 4

let ctx: Ctx

beforeAll(async () => {
  ctx = await startVault()
  await branchActivity(ctx, 0, 6)
})
afterAll(async () => {
  await ctx?.anvil.stop()
})

for (const kind of databaseKinds()) {
  describe(`${kind}`, () => {
    let runtime: ManagedRuntime.ManagedRuntime<Indexer | SqlClient, unknown>
    let drop: () => Promise<void>

    const headers = () =>
      runtime.runPromise(
        Effect.flatMap(
          SqlClient,
          (sql) =>
            sql<{ n: string; low: string | null }>`
            SELECT count(*) AS n, min(number) AS low FROM block_headers WHERE chain_id = ${ctx.chainId}`
        ).pipe(Effect.map(([row]) => ({ count: Number(row?.n ?? 0), lowest: Number(row?.low ?? 0) })))
      )
    const orphanMarkers = () =>
      runtime.runPromise(
        Effect.flatMap(
          SqlClient,
          (sql) =>
            sql<{ n: string }>`SELECT count(*) AS n FROM orphaned_blocks WHERE chain_id = ${ctx.chainId}`
        ).pipe(Effect.map(([row]) => Number(row?.n ?? 0)))
      )
    const served = () =>
      runtime.runPromise(
        Effect.flatMap(Indexer, (i) =>
          i.read((s) =>
            s === undefined
              ? undefined
              : {
                  block: s.block,
                  hash: s.hash,
                  accounts: [...s.accounts.values()]
                    .map(accountRecord)
                    .filter((a) => a !== undefined)
                    .sort((a, b) => (a.id < b.id ? -1 : 1))
                }
          )
        )
      )
    /** Waits until the projection covers the chain's head, number and hash. */
    const coversHead = async (timeoutMs?: number) => {
      const { covered } = await eventually(
        "the projection to cover the head",
        async () => ({ head: await latestBlock(ctx), covered: await served() }),
        ({ head, covered }) => covered?.block === Number(head.number) && covered.hash === head.hash,
        timeoutMs
      )
      return covered as NonNullable<typeof covered>
    }
    /** What is served agrees with the chain, the store's logs with the chain's, a rebuild with both. */
    const expectConsistent = async () => {
      const covered = await coversHead()
      const response: Accounts = {
        chainId: ctx.chainId,
        vault: ctx.vault as Accounts["vault"],
        block: covered.block,
        accounts: covered.accounts
      }
      await expectMatchesChain(ctx, response)
      expect(await runtime.runPromise(storedLogKeys(ctx, covered.block))).toEqual(
        await chainLogKeys(ctx, covered.block)
      )
      const rebuilt = await runtime.runPromise(rebuild(ctx, DEPTH))
      expect(rebuilt.block).toBe(covered.block)
      expect(rebuilt.accounts.map(accountRecord)).toEqual(covered.accounts)
      return covered
    }

    beforeAll(async () => {
      const db = await makeStorage(kind)
      drop = db.drop
      const storage = storageLayer(
        db.storage.kind === "postgresql"
          ? { databaseUrl: Option.some(Redacted.make(db.storage.url)), dataDir: "", applicationName: "test" }
          : { databaseUrl: Option.none(), dataDir: db.storage.dataDir, applicationName: "test" }
      )
      const indexer = Indexer.layer({
        chainId: Option.some(ctx.chainId),
        vault: ctx.vault,
        startBlock: ctx.deployment.startBlock,
        settlementAsset: ctx.usdt,
        pollIntervalMs: 50,
        confirmationDepth: DEPTH,
        maxBlockRange: 2_000,
        headerRetentionBlocks: RETENTION,
        headerPruneIntervalBlocks: INTERVAL
      }).pipe(
        Layer.provide(EventStore.layer),
        Layer.provide(ChainClient.layer({ rpcUrl: ctx.anvil.rpcUrl, timeoutMs: 10_000 }))
      )
      runtime = ManagedRuntime.make(
        indexer.pipe(
          Layer.provideMerge(storage),
          Layer.provide(
            Logger.minimumLogLevel(process.env.TEST_LOG === "debug" ? LogLevel.Debug : LogLevel.Error)
          )
        )
      )
      // The first wait includes start-up (a fresh database, migrations, the backfill): the hook's
      // budget, which on a busy machine it needs.
      await coversHead(100_000)
    })
    afterAll(async () => {
      await runtime?.dispose()
      await drop?.()
    })

    /**
     * Once the prune after the commit that reached the tip has run (it follows that commit's
     * sync): every header lies within retention plus interval below the tip.
     */
    const withinWindow = async (tip: number) =>
      eventually(
        "the headers to lie within the window below the tip",
        headers,
        ({ lowest }) => lowest > tip - RETENTION - INTERVAL
      )

    it("keeps headers within a window below the tip while following", { timeout: 120_000 }, async () => {
      const from = Number((await latestBlock(ctx)).number)
      let most = 0
      for (let round = 0; round < 40; round++) {
        // Vault events now and then (a few blocks per activity), empty blocks otherwise.
        if (round % 8 === 3) await branchActivity(ctx, 10 + round, 2)
        else await ctx.testClient.mine({ blocks: CHUNK })
        const covered = await coversHead()
        const stored = await withinWindow(covered.block)
        most = Math.max(most, stored.count)
      }
      const to = Number((await latestBlock(ctx)).number)
      expect(to - from).toBeGreaterThan(4 * (RETENTION + INTERVAL))
      // One header per block of the window, however long the indexer follows.
      expect(most).toBeLessThanOrEqual(RETENTION + INTERVAL)
      // Every vault log is still stored and the projection still equals a rebuild and the chain.
      await expectConsistent()
    })

    it("still replaces a branch within the confirmation depth after pruning", async () => {
      const markers = await orphanMarkers()
      const snapshot = await ctx.testClient.snapshot()
      await branchActivity(ctx, 1, 3)
      const a = await coversHead()
      const heightA = (await latestBlock(ctx)).number

      await ctx.testClient.revert({ id: snapshot })
      await branchActivity(ctx, 2, 2)
      const head = (await latestBlock(ctx)).number
      if (head < heightA) await ctx.testClient.mine({ blocks: Number(heightA - head) })
      const b = await expectConsistent()
      expect(b.block).toBe(a.block)
      expect(b.hash).not.toBe(a.hash)
      expect(b.accounts).not.toEqual(a.accounts)
      // The walk back found the abandoned blocks among the stored headers.
      expect(await orphanMarkers()).toBeGreaterThanOrEqual(markers + 3)

      // Following goes on, and pruning with it.
      await ctx.testClient.mine({ blocks: INTERVAL + CHUNK })
      await withinWindow((await coversHead()).block)
      await expectConsistent()
    })
  })
}
