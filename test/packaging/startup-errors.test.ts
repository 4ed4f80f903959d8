/**
 * What an operator sees when a bundled service cannot start (docs/operations.md "Start-up
 * errors"): with nothing set, one line naming every missing setting; with a database it cannot
 * open, one line naming DATABASE_URL and the cause (refused, unknown database, authentication, not
 * a URL), never the password. The authentication and unknown-database answers come from a
 * loopback server speaking PostgreSQL's protocol, so no server's configuration is assumed.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createServer, type Server } from "node:net"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { bundle, SERVICE_ENTRY_POINTS } from "../../scripts/bundle.js"
import { repoRoot, startService } from "../support/process.js"

const outdir = mkdtempSync(join(repoRoot, "node_modules", ".startup-errors-test-"))
const PASSWORD = "hunter2-never-logged"
const servers: Array<Server> = []

beforeAll(async () => {
  await bundle(SERVICE_ENTRY_POINTS, outdir)
}, 180_000)

afterAll(async () => {
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))))
  rmSync(outdir, { recursive: true, force: true })
})

/** A PostgreSQL ErrorResponse message: FATAL with `code` and `message`. */
const errorResponse = (code: string, message: string): Buffer => {
  const fields = Buffer.concat([
    ...[
      ["S", "FATAL"],
      ["V", "FATAL"],
      ["C", code],
      ["M", message]
    ].map(([type, value]) => Buffer.from(`${type}${value}\0`, "utf8")),
    Buffer.from([0])
  ])
  const length = Buffer.alloc(4)
  length.writeInt32BE(fields.length + 4)
  return Buffer.concat([Buffer.from("E"), length, fields])
}

/** A loopback server that answers every connection's start-up message with this error. */
const refusingPostgres = (code: string, message: string) =>
  new Promise<number>((resolve) => {
    const server = createServer((socket) => {
      socket.once("data", () => socket.end(errorResponse(code, message)))
      socket.on("error", () => {})
    })
    servers.push(server)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      resolve(typeof address === "object" && address !== null ? address.port : 0)
    })
  })

/** A port nothing listens on. */
const closedPort = () =>
  new Promise<number>((resolve) => {
    const server = createServer()
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
    })
  })

/** The bundled service's one line on stderr, once it has exited 1. */
const startUpLine = async (name: "relayer" | "attestor", env: Record<string, string>) => {
  const service = startService(name, env, { bundle: join(outdir, `${name}.js`) })
  const code = await service.exited
  const lines = service.stderr().trim().split("\n")
  expect(code, service.stderr()).toBe(1)
  expect(lines).toHaveLength(1)
  return lines[0] ?? ""
}

const relayerSettings = {
  FEE_VAULT: "0x0000000000000000000000000000000000000001",
  SETTLEMENT_ASSET: "0x0000000000000000000000000000000000000002",
  SHIELD_ADAPTER: "0x0000000000000000000000000000000000000003",
  RPC_URL: "http://127.0.0.1:9/",
  RELAYER_PRIVATE_KEY: `0x${"11".repeat(32)}`,
  PORT: "0"
}

describe("start-up errors of the bundled services", () => {
  it("the relayer with nothing set names every missing setting in one line", {
    timeout: 60_000
  }, async () => {
    const line = await startUpLine("relayer", {})
    expect(line).toMatch(/^relayer: invalid settings: /)
    for (const name of ["FEE_VAULT", "SETTLEMENT_ASSET", "SHIELD_ADAPTER", "RPC_URL", "RELAYER_PRIVATE_KEY"])
      expect(line).toContain(name)
  })

  it("a bad LOG_LEVEL is named with every missing setting in the same line", {
    timeout: 60_000
  }, async () => {
    const line = await startUpLine("relayer", { LOG_LEVEL: "loud" })
    expect(line).toMatch(/^relayer: invalid settings: LOG_LEVEL: expected one of .*warn.* \(got "loud"\)/)
    for (const name of ["FEE_VAULT", "SETTLEMENT_ASSET", "SHIELD_ADAPTER", "RPC_URL", "RELAYER_PRIVATE_KEY"])
      expect(line).toContain(name)
    // Everything else set: LOG_LEVEL alone.
    expect(await startUpLine("relayer", { ...relayerSettings, LOG_LEVEL: "loud" })).toBe(
      `relayer: invalid settings: LOG_LEVEL: expected one of all, trace, debug, info, warn, error, fatal, off (got "loud")`
    )
  })

  it("the attestor with nothing set names every missing setting in one line", {
    timeout: 60_000
  }, async () => {
    const line = await startUpLine("attestor", {})
    expect(line).toMatch(/^attestor: invalid settings: /)
    for (const name of [
      "FEE_VAULT",
      "SETTLEMENT_ASSET",
      "RPC_URL",
      "ATTESTOR_PRIVATE_KEY",
      "HINT_PRIVATE_KEY",
      "PEPPER"
    ])
      expect(line).toContain(name)
  })

  it("a refused connection names DATABASE_URL and the refusal, not the password", {
    timeout: 60_000
  }, async () => {
    const port = await closedPort()
    const line = await startUpLine("relayer", {
      ...relayerSettings,
      DATABASE_URL: `postgres://operator:${PASSWORD}@127.0.0.1:${port}/relayer`
    })
    expect(line).toContain("DATABASE_URL")
    expect(line).toContain("connection refused")
    expect(line).not.toContain(PASSWORD)
  })

  it("an unknown database names DATABASE_URL and the database, not the password", {
    timeout: 60_000
  }, async () => {
    const port = await refusingPostgres("3D000", 'database "nowhere" does not exist')
    const line = await startUpLine("relayer", {
      ...relayerSettings,
      DATABASE_URL: `postgres://operator:${PASSWORD}@127.0.0.1:${port}/nowhere`
    })
    expect(line).toContain("DATABASE_URL")
    expect(line).toContain("unknown database")
    expect(line).toContain('"nowhere"')
    expect(line).not.toContain(PASSWORD)
  })

  it("a refused login names DATABASE_URL and authentication, not the password", {
    timeout: 60_000
  }, async () => {
    const port = await refusingPostgres("28P01", 'password authentication failed for user "operator"')
    const line = await startUpLine("attestor", {
      ...relayerSettings,
      ATTESTOR_PRIVATE_KEY: `0x${"22".repeat(32)}`,
      HINT_PRIVATE_KEY: `0x${"33".repeat(32)}`,
      PEPPER: "44".repeat(16),
      DATABASE_URL: `postgres://operator:${PASSWORD}@127.0.0.1:${port}/attestor`
    })
    expect(line).toContain("DATABASE_URL")
    expect(line).toContain("authentication failed")
    expect(line).not.toContain(PASSWORD)
  })

  it("a DATABASE_URL that is not a URL is refused by name, without its value", {
    timeout: 60_000
  }, async () => {
    const line = await startUpLine("relayer", {
      ...relayerSettings,
      DATABASE_URL: `host=127.0.0.1 user=operator password=${PASSWORD}`
    })
    expect(line).toMatch(/^relayer: invalid settings: DATABASE_URL: not a URL/)
    expect(line).not.toContain(PASSWORD)
  })

  it("a secret set both as NAME and NAME_FILE is refused naming both, with the other bad settings, never the value", {
    timeout: 60_000
  }, async () => {
    const keyFile = join(outdir, "relayer-key")
    writeFileSync(keyFile, `${relayerSettings.RELAYER_PRIVATE_KEY}\n`, { mode: 0o600 })
    const passwordFile = join(outdir, "database-url")
    writeFileSync(passwordFile, `postgres://operator:${PASSWORD}@127.0.0.1:1/relayer\n`, { mode: 0o600 })
    const line = await startUpLine("relayer", {
      ...relayerSettings,
      RELAYER_PRIVATE_KEY_FILE: keyFile,
      DATABASE_URL: `postgres://operator:${PASSWORD}@127.0.0.1:1/relayer`,
      DATABASE_URL_FILE: passwordFile,
      RPC_URL: "not a url"
    })
    expect(line).toMatch(/^relayer: invalid settings: /)
    expect(line).toContain(
      "RELAYER_PRIVATE_KEY: set either RELAYER_PRIVATE_KEY or RELAYER_PRIVATE_KEY_FILE, not both"
    )
    expect(line).toContain("DATABASE_URL: set either DATABASE_URL or DATABASE_URL_FILE, not both")
    expect(line).toContain("RPC_URL")
    expect(line).not.toContain(PASSWORD)
    expect(line).not.toContain("11".repeat(32))
  })
})
