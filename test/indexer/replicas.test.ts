/**
 * Two relayers on one PostgreSQL database (only when DATABASE_URL is set): one indexes, the other
 * stands by and follows the store, both serve the same accounts byte for byte, and when the writer
 * stops the other takes over.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  coversHead,
  expectConsistent,
  postgresSchema,
  type RunningRelayer,
  relayerEnv,
  startRelayer
} from "./support/harness.js"
import { branchActivity, type Ctx, startVault } from "./support/vault.js"

const databaseUrl = process.env.DATABASE_URL

describe.skipIf(databaseUrl === undefined)("two relayers on one PostgreSQL database", () => {
  let ctx: Ctx
  let first: RunningRelayer
  let second: RunningRelayer
  let drop: () => Promise<void>

  beforeAll(async () => {
    ctx = await startVault()
    await branchActivity(ctx, 0, 10)
    const db = await postgresSchema(databaseUrl as string)
    drop = db.drop
    first = await startRelayer(relayerEnv(ctx, db.storage))
    await coversHead(ctx, first)
    second = await startRelayer(relayerEnv(ctx, db.storage))
  })
  afterAll(async () => {
    await first?.stop()
    await second?.stop()
    await drop?.()
    await ctx?.anvil.stop()
  })

  const body = async (r: RunningRelayer) => {
    const res = await fetch(`${r.url}/v1/accounts`)
    return { etag: res.headers.get("etag"), text: await res.text() }
  }

  it("has one writer while both serve the same accounts", async () => {
    await branchActivity(ctx, 1, 4)
    await coversHead(ctx, first)
    await coversHead(ctx, second)
    const [a, b] = [await first.status(), await second.status()]
    expect([a.leader, b.leader]).toEqual([true, false])
    expect(b.state).toBe("standby")
    expect(await body(second)).toEqual(await body(first))
  })

  it("lets the other take over when the writer stops", async () => {
    await first.stop()
    await branchActivity(ctx, 2, 4)
    const served = await coversHead(ctx, second, 60_000)
    expect((await second.status()).leader).toBe(true)
    await expectConsistent(ctx, second, served)
  })
})
