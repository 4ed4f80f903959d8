/**
 * GET /v1/accounts after a scripted mix of every vault event type over 24 accounts: every field of
 * every account equals the vault's views at the served block, a rebuild from the store equals the
 * live projection, and the route's caching (ETag, 304, gzip, Cache-Control) and refusals hold.
 * Runs on PGlite, and on PostgreSQL too when DATABASE_URL is set.
 */

import { request } from "node:http"
import { gunzipSync } from "node:zlib"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { accountRecord } from "../../src/store/projections/accounts.js"
import {
  coversHead,
  databaseKinds,
  eventually,
  expectMatchesChain,
  makeStorage,
  type RunningRelayer,
  rebuild,
  relayerEnv,
  startRelayer
} from "./support/harness.js"
import { branchActivity, type Ctx, scriptedMix, startVault } from "./support/vault.js"

let ctx: Ctx

beforeAll(async () => {
  ctx = await startVault()
  await scriptedMix(ctx)
})
afterAll(async () => {
  await ctx?.anvil.stop()
})

/** A GET with full control over the headers (fetch would add and decode Accept-Encoding itself). */
const rawGet = (url: string, headers: Record<string, string>) =>
  new Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Buffer }>(
    (resolve, reject) => {
      const req = request(url, { headers }, (res) => {
        const chunks: Buffer[] = []
        res.on("data", (c: Buffer) => chunks.push(c))
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) })
        )
      })
      req.on("error", reject)
      req.end()
    }
  )

for (const kind of databaseKinds()) {
  describe(`${kind}`, () => {
    let relayer: RunningRelayer
    let drop: () => Promise<void>

    beforeAll(async () => {
      const db = await makeStorage(kind)
      drop = db.drop
      relayer = await startRelayer(relayerEnv(ctx, db.storage, { INDEXER_MAX_BLOCK_RANGE: "50" }))
    })
    afterAll(async () => {
      await relayer?.stop()
      await drop?.()
    })

    it("serves every account with the vault's views at the served block", async () => {
      const served = await coversHead(ctx, relayer)
      expect(served.accounts.length).toBeGreaterThanOrEqual(24)
      await expectMatchesChain(ctx, served)
      // A projection rebuilt from scratch from the store equals the live one.
      const rebuilt = await relayer.withDatabase(rebuild(ctx))
      expect(rebuilt.block).toBe(served.block)
      expect(rebuilt.accounts.map(accountRecord)).toEqual(served.accounts)
    })

    it("follows new blocks and keeps matching the chain", async () => {
      await branchActivity(ctx, 1, 6)
      const served = await coversHead(ctx, relayer)
      await expectMatchesChain(ctx, served)
    })

    it("answers with an ETag, Cache-Control, 304 on a match, and gzip when accepted", async () => {
      const served = await coversHead(ctx, relayer)
      const plain = await rawGet(`${relayer.url}/v1/accounts`, {})
      expect(plain.status).toBe(200)
      expect(plain.headers["cache-control"]).toBe("public, max-age=15")
      expect(plain.headers["content-type"]).toMatch(/^application\/json/)
      expect(plain.headers["content-encoding"]).toBeUndefined()
      const etag = plain.headers.etag as string
      expect(etag).toMatch(/^"[A-Za-z0-9_-]+"$/)
      expect(JSON.parse(plain.body.toString("utf8")).block).toBe(served.block)

      // Same content, same tag.
      const again = await rawGet(`${relayer.url}/v1/accounts`, {})
      expect(again.headers.etag).toBe(etag)
      expect(again.body.equals(plain.body)).toBe(true)

      const notModified = await rawGet(`${relayer.url}/v1/accounts`, { "if-none-match": etag })
      expect(notModified.status).toBe(304)
      expect(notModified.body.length).toBe(0)
      expect(notModified.headers.etag).toBe(etag)
      expect(notModified.headers["cache-control"]).toBe("public, max-age=15")

      const zipped = await rawGet(`${relayer.url}/v1/accounts`, { "accept-encoding": "gzip, deflate" })
      expect(zipped.status).toBe(200)
      expect(zipped.headers["content-encoding"]).toBe("gzip")
      expect(zipped.headers.vary).toMatch(/accept-encoding/i)
      expect(gunzipSync(zipped.body).equals(plain.body)).toBe(true)
      expect(zipped.body.length).toBeLessThan(plain.body.length)
      // Either representation's tag revalidates.
      const zippedTag = zipped.headers.etag as string
      expect(zippedTag).not.toBe(etag)
      expect((await rawGet(`${relayer.url}/v1/accounts`, { "if-none-match": zippedTag })).status).toBe(304)
      expect(
        (await rawGet(`${relayer.url}/v1/accounts`, { "accept-encoding": "gzip;q=0" })).headers[
          "content-encoding"
        ]
      ).toBeUndefined()

      // New content (a new block), new tag; the old one no longer matches.
      await ctx.testClient.mine({ blocks: 1 })
      await coversHead(ctx, relayer)
      const changed = await rawGet(`${relayer.url}/v1/accounts`, { "if-none-match": etag })
      expect(changed.status).toBe(200)
      expect(changed.headers.etag).not.toBe(etag)
    })

    it("reports the indexer in health and metrics", async () => {
      const served = await coversHead(ctx, relayer)
      const health = await eventually(
        "health to show the indexer following",
        async () =>
          (await fetch(`${relayer.url}/v1/health`)).json() as Promise<{
            indexer?: { state: string; block?: number }
          }>,
        (h) => h.indexer?.state === "following" && h.indexer.block === served.block
      )
      expect(health).toMatchObject({
        ok: true,
        chainId: ctx.chainId,
        indexer: { state: "following", lag: 0 }
      })
      const metrics = await (
        await fetch(`${relayer.url}/v1/metrics`, { headers: { authorization: "Bearer metrics-token" } })
      ).text()
      expect(metrics).toMatch(/^indexer_block \d+$/m)
      expect(metrics).toMatch(/^indexer_state\{state="following"\} 1$/m)
      expect(metrics).toMatch(/^indexer_events_total \d+$/m)
      // Nothing account-specific in a label.
      expect(metrics).not.toMatch(/0x[0-9a-fA-F]{40}/)
    })
  })
}

describe("with INDEXER_ENABLED=false", () => {
  it("refuses /v1/accounts with 400 unsupported and shows the indexer disabled", async () => {
    const relayer = await startRelayer(
      relayerEnv(ctx, { kind: "pglite", dataDir: "memory://" }, { INDEXER_ENABLED: "false" })
    )
    try {
      const res = await fetch(`${relayer.url}/v1/accounts`)
      expect(res.status).toBe(400)
      expect(await res.json()).toEqual({ error: expect.any(String), code: "unsupported" })
      const health = (await (await fetch(`${relayer.url}/v1/health`)).json()) as {
        indexer?: { state: string }
      }
      expect(health.indexer).toEqual({ state: "disabled" })
    } finally {
      await relayer.stop()
    }
  })
})
