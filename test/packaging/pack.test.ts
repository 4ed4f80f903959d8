/**
 * The package as another project gets it (docs/getting-started.md "The client in your own
 * project"): built as `npm run build` builds what the package holds (tsc over
 * tsconfig.build.json and the contracts' artifacts; the services' bundles are not in it, and types
 * are checked by `npm run typecheck`), packed by `npm pack`, and installed into a scratch project.
 * There, examples/compose-layers.test.ts passes under vitest, it and a wallet's script type-check
 * against the package's declarations, and the script fetches a quote from a relayer on a devnet.
 *
 * Nothing here reaches a registry: the scratch project's dependencies are this checkout's
 * node_modules (the versions package-lock.json pins), linked one by one, and the tarball is
 * unpacked as node_modules/fee-vault-services. So that nothing is found only because it is linked,
 * every import in the tarball is checked to resolve inside it or to a declared dependency.
 */
import { spawn } from "node:child_process"
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync
} from "node:fs"
import { builtinModules } from "node:module"
import { tmpdir } from "node:os"
import { dirname, join, relative, resolve } from "node:path"
import { Effect, Exit, Layer, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  devnetChain,
  freeLoopbackPort,
  relayerEnv,
  withSettings,
  writeDevnetFile
} from "../../layers/devnet.js"
import { Relayer } from "../../layers/relayer.js"
import { repoRoot } from "../support/process.js"

// tsc over the package's sources and npm pack: a minute or two on a busy machine.
const SETUP_TIMEOUT = 300_000
const TEST_TIMEOUT = 180_000

const scratch = mkdtempSync(join(tmpdir(), "fee-vault-pack-"))
const staging = join(scratch, "package")
const project = join(scratch, "project")
const installed = join(project, "node_modules", "fee-vault-services")
const manifest = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as {
  readonly name: string
  readonly version: string
  readonly exports: Record<string, { readonly types: string; readonly import: string } | string>
  readonly dependencies: Record<string, string>
  readonly peerDependencies: Record<string, string>
}

/** Runs a command to its end; its exit code and output, stdout and stderr together. */
const run = (
  command: string,
  args: ReadonlyArray<string>,
  cwd: string,
  env: Record<string, string> = {}
): Promise<{ code: number | null; output: string }> =>
  new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, {
      cwd,
      // Nothing of the test runner's settings; npm told never to reach a registry.
      env: {
        PATH: process.env.PATH ?? "",
        HOME: process.env.HOME ?? scratch,
        TMPDIR: process.env.TMPDIR ?? "/tmp",
        npm_config_offline: "true",
        npm_config_update_notifier: "false",
        ...env
      },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    const collect = (chunk: string) => {
      output += chunk
    }
    child.stdout.setEncoding("utf8").on("data", collect)
    child.stderr.setEncoding("utf8").on("data", collect)
    child.once("error", reject)
    child.once("close", (code) => resolvePromise({ code, output }))
  })

const node = process.execPath
const bin = (path: string) => join(repoRoot, "node_modules", path)

const filesUnder = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name))

beforeAll(async () => {
  mkdirSync(staging)
  const compiled = await run(
    node,
    [bin("typescript/bin/tsc"), "-p", "tsconfig.build.json", "--noCheck", "--outDir", join(staging, "dist")],
    repoRoot
  )
  expect(compiled.code, compiled.output).toBe(0)
  const artifacts = await run(
    node,
    ["--import", "tsx", "scripts/package-artifacts.ts", join(staging, "dist", "contracts", "artifacts.json")],
    repoRoot
  )
  expect(artifacts.code, artifacts.output).toBe(0)
  for (const file of ["package.json", "README.md", "LICENSE"])
    copyFileSync(join(repoRoot, file), join(staging, file))
  const packed = await run("npm", ["pack", "--ignore-scripts", "--pack-destination", scratch], staging)
  expect(packed.code, packed.output).toBe(0)

  // The scratch project: the checkout's dependencies, and the tarball as the package.
  mkdirSync(join(project, "node_modules"), { recursive: true })
  for (const name of readdirSync(join(repoRoot, "node_modules"))) {
    if (name.startsWith(".") || name === manifest.name) continue
    symlinkSync(join(repoRoot, "node_modules", name), join(project, "node_modules", name))
  }
  mkdirSync(installed)
  const tarball = join(scratch, `${manifest.name}-${manifest.version}.tgz`)
  const unpacked = await run("tar", ["-xzf", tarball, "-C", installed, "--strip-components=1"], scratch)
  expect(unpacked.code, unpacked.output).toBe(0)
  writeFileSync(
    join(project, "package.json"),
    `${JSON.stringify({ name: "wallet", private: true, type: "module" }, null, 2)}\n`
  )
  writeFileSync(
    join(project, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        target: "ES2022",
        module: "NodeNext",
        moduleResolution: "NodeNext",
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        types: ["node"]
      },
      include: ["*.ts"]
    })
  )
  copyFileSync(join(repoRoot, "examples", "compose-layers.test.ts"), join(project, "compose-layers.test.ts"))
  // A wallet's script, as docs/architecture.md "Typed client" writes one.
  writeFileSync(
    join(project, "quote.ts"),
    `import { Effect, Schema } from "effect"
import { QuoteQuery, relayerFetchClient } from "fee-vault-services/client"

const quote = Effect.gen(function* () {
  const relayer = yield* relayerFetchClient(process.argv[2] ?? "http://127.0.0.1:8080")
  const config = yield* relayer.quote.config()
  const urlParams = Schema.decodeUnknownSync(QuoteQuery)({
    asset: config.settlementAsset,
    adapter: config.adapters.direct
  })
  return yield* relayer.quote.quote({ urlParams })
})

const { asset, relayerFee } = await Effect.runPromise(quote)
console.log(JSON.stringify({ asset, relayerFee: relayerFee.toString() }))
`
  )
}, SETUP_TIMEOUT)

afterAll(() => {
  rmSync(scratch, { recursive: true, force: true })
})

describe("the packed package, installed in a scratch project", () => {
  it("holds every module its entry points and declarations import", () => {
    for (const [entry, target] of Object.entries(manifest.exports)) {
      const paths = typeof target === "string" ? [target] : [target.types, target.import]
      for (const path of paths) expect(() => readFileSync(join(installed, path)), entry).not.toThrow()
    }
    const declared = new Set([
      ...Object.keys(manifest.dependencies),
      ...Object.keys(manifest.peerDependencies),
      ...builtinModules
    ])
    const files = filesUnder(installed)
    const present = new Set(files)
    const missing: Array<string> = []
    for (const file of files.filter((f) => f.endsWith(".js") || f.endsWith(".d.ts"))) {
      const source = readFileSync(file, "utf8")
      const specifiers = [
        ...source.matchAll(/^\s*(?:import|export)\b[^"]*?\bfrom\s+"([^"]+)"/gm),
        ...source.matchAll(/^\s*import\s+"([^"]+)"/gm),
        ...source.matchAll(/\bimport\(\s*"([^"]+)"\s*\)/g)
      ].map((match) => match[1])
      for (const specifier of specifiers) {
        if (specifier === undefined) continue
        const where = relative(installed, file)
        if (specifier.startsWith(".")) {
          const target = resolve(dirname(file), specifier)
          const candidates = file.endsWith(".d.ts") ? [target.replace(/\.js$/, ".d.ts")] : [target]
          if (!candidates.some((candidate) => present.has(candidate))) missing.push(`${where}: ${specifier}`)
          continue
        }
        const name = specifier.replace(/^node:/, "").split("/")
        const packageName = specifier.startsWith("@") ? name.slice(0, 2).join("/") : (name[0] ?? "")
        // The compiler is loaded only with contract sources beside contracts/build.js, which the
        // package does not hold: it reads the packaged artifacts instead.
        if (specifier === "solc" && where === join("dist", "contracts", "build.js")) continue
        if (!declared.has(packageName)) missing.push(`${where}: ${specifier}`)
      }
    }
    expect(missing).toEqual([])
    // The devnet of ./testing deploys from the packaged artifacts; no source maps of absent sources.
    expect(present.has(join(installed, "dist", "contracts", "artifacts.json"))).toBe(true)
    expect(files.filter((file) => file.endsWith(".map") || file.includes("/services/"))).toEqual([])
  })

  it("type-checks examples/compose-layers.test.ts and a wallet's script against its declarations", {
    timeout: TEST_TIMEOUT
  }, async () => {
    const checked = await run(node, [bin("typescript/bin/tsc"), "-p", "tsconfig.json"], project)
    expect(checked.code, checked.output).toBe(0)
  })

  it("passes examples/compose-layers.test.ts under vitest", { timeout: TEST_TIMEOUT }, async () => {
    const tested = await run(
      node,
      [
        bin("vitest/vitest.mjs"),
        "run",
        "--testTimeout=120000",
        "--hookTimeout=120000",
        "compose-layers.test.ts"
      ],
      project
    )
    expect(tested.code, tested.output).toBe(0)
    expect(tested.output).toMatch(/Tests\s+2 passed/)
  })

  it("fetches a quote from a devnet relayer with the installed client", {
    timeout: TEST_TIMEOUT
  }, async () => {
    const scope = Effect.runSync(Scope.make())
    try {
      const chain = await Effect.runPromise(
        Scope.extend(devnetChain({ dir: join(scratch, "devnet") }), scope)
      )
      const port = await Effect.runPromise(freeLoopbackPort)
      await Effect.runPromise(
        writeDevnetFile(chain, { relayerUrl: `http://127.0.0.1:${port}`, attestorUrl: "http://127.0.0.1:1" })
      )
      await Effect.runPromise(
        Layer.buildWithScope(
          withSettings(Relayer.layer, {
            ...relayerEnv(chain, port),
            DATA_DIR: join(scratch, "relayer-data")
          }),
          scope
        )
      )
      const quoted = await run(node, ["--import", "tsx", "quote.ts", `http://127.0.0.1:${port}`], project)
      expect(quoted.code, quoted.output).toBe(0)
      const quote = JSON.parse(quoted.output.trim().split("\n").at(-1) ?? "{}") as {
        asset?: string
        relayerFee?: string
      }
      expect(quote.asset?.toLowerCase()).toBe(chain.deployment.settlementAsset.toLowerCase())
      expect(BigInt(quote.relayerFee ?? "0")).toBeGreaterThan(0n)
    } finally {
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  })
})
