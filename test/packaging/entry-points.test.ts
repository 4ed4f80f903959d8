/**
 * What each of the package's entry points brings in (docs/architecture.md "Entry points"), read
 * from esbuild's import graph: the services as scripts/bundle.ts bundles them load none of the
 * modules only `fee-vault-services/testing` brings in, and `fee-vault-services/client` loads no
 * server code, so a wallet that imports it carries no database, server or hot key.
 */
import { join } from "node:path"
import { build } from "esbuild"
import { describe, expect, it } from "vitest"
import { SERVICE_ENTRY_POINTS } from "../../scripts/bundle.js"
import { repoRoot } from "../support/process.js"

/** Every module (repository files, and packages by name) an entry's imports reach. */
const importGraph = async (entryPoints: ReadonlyArray<string>) => {
  const { metafile } = await build({
    absWorkingDir: repoRoot,
    entryPoints: entryPoints.map((entry) => join(repoRoot, entry)),
    bundle: true,
    write: false,
    metafile: true,
    platform: "node",
    format: "esm",
    outdir: join(repoRoot, "node_modules", ".entry-points-test"),
    // As scripts/bundle.ts leaves them out: packages that load files from beside themselves.
    external: [
      "@electric-sql/pglite",
      "@electric-sql/pglite-socket",
      "pg",
      "pg-cursor",
      "tiny-secp256k1",
      "ws"
    ],
    logLevel: "silent"
  })
  const files = new Set<string>()
  const packages = new Set<string>()
  for (const [input, { imports }] of Object.entries(metafile.inputs)) {
    const inPackage = input.split("node_modules/").at(-1)
    if (inPackage !== undefined && inPackage !== input) packages.add(packageName(inPackage))
    else files.add(input)
    for (const imported of imports) if (imported.external) packages.add(packageName(imported.path))
  }
  return { files, packages }
}

const packageName = (path: string): string => {
  const parts = path.split("/")
  return (path.startsWith("@") ? parts.slice(0, 2) : parts.slice(0, 1)).join("/")
}

describe("the package's entry points", () => {
  it("the bundled services load nothing that only ./testing brings in", { timeout: 120_000 }, async () => {
    const [services, testing, relayer, attestor] = await Promise.all([
      importGraph(Object.values(SERVICE_ENTRY_POINTS)),
      importGraph(["src/exports/testing.ts"]),
      importGraph(["src/exports/relayer.ts"]),
      importGraph(["src/exports/attestor.ts"])
    ])
    // The doubles, by name, wherever they are imported from; and whatever else only ./testing
    // reaches. `stubLayer` (src/stubLayer.ts) is shared: the services build their disabled
    // layers with it.
    const isDouble = (file: string) =>
      /^(src\/exports\/testing\.ts|src\/testing\/|src\/devnet\/|src\/chain\/(MockChainClient|anvil)\.ts|layers\/devnet\.ts|contracts\/(deploy|build)\.ts)/.test(
        file
      )
    const testingOnly = [...testing.files].filter(
      (file) => isDouble(file) || (!relayer.files.has(file) && !attestor.files.has(file))
    )
    // The doubles are there, so the check below checks something.
    expect(testingOnly).toEqual(
      expect.arrayContaining([
        "src/exports/testing.ts",
        "src/chain/MockChainClient.ts",
        "src/testing/embeddedDatabase.ts",
        "src/chain/anvil.ts",
        "layers/devnet.ts",
        "contracts/deploy.ts"
      ])
    )
    expect(testingOnly.filter((file) => services.files.has(file))).toEqual([])
    expect(services.packages.has("@foundry-rs/anvil")).toBe(false)
  })

  it("./client loads no server code", { timeout: 120_000 }, async () => {
    const client = await importGraph(["src/client.ts"])
    const server = [...client.files].filter((file) =>
      /^(layers|src\/(bin|config|store|txsender|indexer|background|testing|devnet|exports)|src\/http\/server)/.test(
        file
      )
    )
    expect(server).toEqual([])
    const serverPackages = [
      "@effect/platform-node",
      "@effect/sql",
      "@effect/sql-pg",
      "@electric-sql/pglite",
      "@electric-sql/pglite-socket",
      "pg",
      "arctic",
      "@x402/core",
      "@x402/evm"
    ]
    expect(serverPackages.filter((name) => client.packages.has(name))).toEqual([])
    // What it does load: the wire schemas, the API declarations and the wallet's helpers.
    expect([...client.files]).toEqual(
      expect.arrayContaining([
        "schema/index.ts",
        "src/relayer/api/index.ts",
        "src/attestor/hints/hintEnvelopes.ts"
      ])
    )
  })
})
