/**
 * RPC faults: the relayer indexes through a proxy that fails a share of calls, delays others
 * (some past the client's timeout) and refuses wide `eth_getLogs` ranges with "too many results".
 * The indexer converges anyway, to the same projection a rebuild gives and the chain shows, both
 * while backfilling and while following the head.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type FaultyRpc, startFaultyRpc } from "./support/faultyRpc.js"
import {
  coversHead,
  databaseKinds,
  expectConsistent,
  makeStorage,
  type RunningRelayer,
  relayerEnv,
  startRelayer
} from "./support/harness.js"
import { branchActivity, type Ctx, startVault } from "./support/vault.js"

let ctx: Ctx

beforeAll(async () => {
  ctx = await startVault()
  await branchActivity(ctx, 0, 16)
})
afterAll(async () => {
  await ctx?.anvil.stop()
})

for (const [i, kind] of databaseKinds().entries()) {
  describe(`${kind}`, () => {
    let proxy: FaultyRpc
    let relayer: RunningRelayer
    let drop: () => Promise<void>

    beforeAll(async () => {
      proxy = await startFaultyRpc(ctx.anvil.rpcUrl, {
        failShare: 0.2,
        delayShare: 0.3,
        maxDelayMs: 40,
        stallShare: 0.02,
        stallMs: 1_500,
        maxLogRange: 5,
        seed: 7 + i
      })
      const db = await makeStorage(kind)
      drop = db.drop
      relayer = await startRelayer({
        ...relayerEnv(ctx, db.storage, { INDEXER_CONFIRMATION_DEPTH: "8", INDEXER_MAX_BLOCK_RANGE: "10000" }),
        RPC_URL: proxy.url,
        RPC_TIMEOUT_MS: "1000"
      })
    })
    afterAll(async () => {
      await relayer?.stop()
      await proxy?.close()
      await drop?.()
    })

    it("converges while backfilling", { timeout: 120_000 }, async () => {
      const served = await coversHead(ctx, relayer, 90_000, { faultyRpc: true })
      expect(proxy.stats.tooLarge).toBeGreaterThan(0)
      expect(proxy.stats.failed).toBeGreaterThan(0)
      await expectConsistent(ctx, relayer, served)
    })

    it("converges while following the head", { timeout: 120_000 }, async () => {
      await branchActivity(ctx, 5 + i, 6)
      const served = await coversHead(ctx, relayer, 90_000, { faultyRpc: true })
      await expectConsistent(ctx, relayer, served)
    })
  })
}
