/**
 * Reorgs on anvil: index a branch, revert to a snapshot and mine a different branch (other
 * events, same heights; then a shorter one that grows past the old head). The projection must
 * equal a fresh rebuild and the chain's state, and the store must hold exactly the new branch's
 * logs as canonical.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  coversHead,
  databaseKinds,
  expectConsistent,
  latestBlock,
  makeStorage,
  type RunningRelayer,
  relayerEnv,
  startRelayer
} from "./support/harness.js"
import { branchActivity, type Ctx, startVault } from "./support/vault.js"

let ctx: Ctx

beforeAll(async () => {
  ctx = await startVault()
  await branchActivity(ctx, 0, 8)
})
afterAll(async () => {
  await ctx?.anvil.stop()
})

/** Mines empty blocks until the head is `height`. */
async function mineTo(height: bigint) {
  const head = (await latestBlock(ctx)).number
  if (head < height) await ctx.testClient.mine({ blocks: Number(height - head) })
  expect((await latestBlock(ctx)).number).toBe(height)
}

for (const kind of databaseKinds()) {
  describe(`${kind}`, () => {
    let relayer: RunningRelayer
    let drop: () => Promise<void>

    beforeAll(async () => {
      const db = await makeStorage(kind)
      drop = db.drop
      relayer = await startRelayer(relayerEnv(ctx, db.storage, { INDEXER_CONFIRMATION_DEPTH: "64" }))
      await coversHead(ctx, relayer)
    })
    afterAll(async () => {
      await relayer?.stop()
      await drop?.()
    })

    it("replaces a branch by another of the same height", async () => {
      const snapshot = await ctx.testClient.snapshot()
      await branchActivity(ctx, 1, 5)
      const a = await coversHead(ctx, relayer)
      const heightA = (await latestBlock(ctx)).number

      await ctx.testClient.revert({ id: snapshot })
      await branchActivity(ctx, 2, 2)
      await mineTo(heightA)
      const b = await coversHead(ctx, relayer)
      expect(b.block).toBe(a.block)
      expect(b.accounts).not.toEqual(a.accounts)
      await expectConsistent(ctx, relayer, b)
    })

    it("replaces a branch by a shorter one that then grows past it", async () => {
      const snapshot = await ctx.testClient.snapshot()
      await branchActivity(ctx, 3, 4)
      await coversHead(ctx, relayer)
      const heightA = (await latestBlock(ctx)).number

      await ctx.testClient.revert({ id: snapshot })
      await ctx.testClient.mine({ blocks: 1 })
      // The chain is now shorter than what was indexed.
      expect((await latestBlock(ctx)).number).toBeLessThan(heightA)
      const short = await coversHead(ctx, relayer)
      await expectConsistent(ctx, relayer, short)

      await branchActivity(ctx, 4, 4)
      await mineTo(heightA + 3n)
      const long = await coversHead(ctx, relayer)
      await expectConsistent(ctx, relayer, long)
    })
  })
}
