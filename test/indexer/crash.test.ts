/**
 * Crashes mid-backfill: the indexer fiber interrupted (the relayer shut down) and, separately, the
 * relayer process killed outright. After a restart on the same database the index holds every
 * vault log exactly once and serves the same accounts as a rebuild and as the chain.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startService } from "../support/process.js"
import {
  coversHead,
  databaseKinds,
  eventually,
  expectConsistent,
  makeStorage,
  relayerEnv,
  startRelayer
} from "./support/harness.js"
import { type Ctx, scriptedMix, startVault } from "./support/vault.js"

let ctx: Ctx

beforeAll(async () => {
  ctx = await startVault()
  await scriptedMix(ctx)
})
afterAll(async () => {
  await ctx?.anvil.stop()
})

/** One block per eth_getLogs: the backfill takes many commits, so a crash lands in the middle. */
const slowBackfill = { INDEXER_MAX_BLOCK_RANGE: "1", INDEXER_CONFIRMATION_DEPTH: "16" }

for (const kind of databaseKinds()) {
  describe(`${kind}`, () => {
    // Several relayer starts (and a process start) on a shared machine: generous time.
    it("resumes after the indexer fiber is interrupted mid-backfill", { timeout: 180_000 }, async () => {
      const db = await makeStorage(kind, { onDisk: true })
      try {
        const first = await startRelayer(relayerEnv(ctx, db.storage, slowBackfill))
        const start = ctx.deployment.startBlock
        const before = await eventually(
          "some of the backfill to be committed",
          () => first.status(),
          (s) => s.block !== undefined && s.block >= start + 10
        )
        await first.stop()
        expect(before.state).toBe("backfilling")

        const second = await startRelayer(relayerEnv(ctx, db.storage))
        try {
          await expectConsistent(ctx, second, await coversHead(ctx, second))
        } finally {
          await second.stop()
        }
      } finally {
        await db.drop()
      }
    })

    it("resumes after the relayer process is killed mid-backfill", { timeout: 180_000 }, async () => {
      const db = await makeStorage(kind, { onDisk: true })
      try {
        const child = startService("relayer", {
          ...relayerEnv(ctx, db.storage, slowBackfill),
          LOG_LEVEL: "info"
        })
        try {
          const url = await child.url()
          const start = ctx.deployment.startBlock
          const health = await eventually(
            "some of the backfill to be committed",
            async () =>
              (await (await fetch(`${url}/v1/health`)).json()) as {
                indexer?: { state: string; block?: number }
              },
            (h) => h.indexer?.block !== undefined && h.indexer.block >= start + 10
          )
          expect(health.indexer?.state).toBe("backfilling")
        } finally {
          child.child.kill("SIGKILL")
          await child.exited
        }

        const second = await startRelayer(relayerEnv(ctx, db.storage))
        try {
          await expectConsistent(ctx, second, await coversHead(ctx, second))
        } finally {
          await second.stop()
        }
      } finally {
        await db.drop()
      }
    })
  })
}
