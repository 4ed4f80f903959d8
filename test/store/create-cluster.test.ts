/**
 * A service's first start creates its embedded database's cluster in a child process
 * (src/store/createCluster.ts), so the service itself never holds the memory initdb grows.
 */
import { mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { PGlite } from "@electric-sql/pglite"
import { describe, expect, it } from "vitest"
import { EMBEDDED_POSTGRESQL_CONF } from "../../src/store/embeddedCluster.js"
import { createClusterInChild } from "../../src/store/sql.js"

const TIMEOUT = 120_000

describe("embedded cluster creation", () => {
  it("a child with the service's loader creates a cluster the service then opens", {
    timeout: TIMEOUT
  }, async () => {
    const dataDir = join(mkdtempSync(join(tmpdir(), "cluster-")), "data")
    expect(await createClusterInChild(dataDir, ["--import", "tsx"])).toBe(true)
    expect(readFileSync(join(dataDir, "PG_VERSION"), "utf8").trim()).toMatch(/^\d+$/)
    // Created with the embedded settings, and opened by a second instance as the service opens it.
    const conf = readFileSync(join(dataDir, "postgresql.conf"), "utf8")
    for (const line of EMBEDDED_POSTGRESQL_CONF) expect(conf).toContain(line)
    const db = await PGlite.create(dataDir)
    try {
      const rows = await db.query<{ shared_buffers: string }>("SHOW shared_buffers")
      expect(rows.rows[0]?.shared_buffers).toBe("16MB")
    } finally {
      await db.close()
    }
  })

  it("reports false, leaving the directory uncreated, when the child cannot run", {
    timeout: TIMEOUT
  }, async () => {
    const dataDir = join(mkdtempSync(join(tmpdir(), "cluster-")), "data")
    // Plain node cannot load the TypeScript source: the caller falls back to creating in-process.
    expect(await createClusterInChild(dataDir, [])).toBe(false)
    expect(() => readFileSync(join(dataDir, "PG_VERSION"))).toThrow()
  })
})
