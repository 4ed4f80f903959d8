// Compiles the reference contracts with the solc npm package and caches the artifacts.
// `tsx contracts/build.ts` (npm run contracts) also regenerates contracts/abi.ts.
import { spawn } from "node:child_process"
import { createHash } from "node:crypto"
import { readFileSync } from "node:fs"
import { mkdir, readdir, readFile, rename, writeFile } from "node:fs/promises"
import { createRequire } from "node:module"
import path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import type { Abi, Hex } from "viem"

const require = createRequire(import.meta.url)

export const contractsDir = path.dirname(fileURLToPath(import.meta.url))
const repoRoot = path.dirname(contractsDir)
const cacheDir = path.join(contractsDir, ".cache")
export const abiModulePath = path.join(contractsDir, "abi.ts")

/** Contract name, its source unit and the name of its exported ABI constant in abi.ts. */
export const contracts = {
  FeeVault: { source: "FeeVault.sol", abiName: "feeVaultAbi" },
  ShieldAdapter: { source: "ShieldAdapter.sol", abiName: "shieldAdapterAbi" },
  MockSwapRouter: { source: "mocks/MockSwapRouter.sol", abiName: "mockSwapRouterAbi" },
  MockAggregatorV3: { source: "mocks/MockAggregatorV3.sol", abiName: "mockAggregatorV3Abi" },
  TestToken: { source: "mocks/TestToken.sol", abiName: "testTokenAbi" },
  SmartWallet: { source: "mocks/SmartWallet.sol", abiName: "smartWalletAbi" },
  GasBurningWallet: { source: "mocks/GasBurningWallet.sol", abiName: "gasBurningWalletAbi" },
  IdRegistryStandIn: { source: "mocks/FarcasterRegistries.sol", abiName: "idRegistryStandInAbi" },
  KeyRegistryStandIn: { source: "mocks/FarcasterRegistries.sol", abiName: "keyRegistryStandInAbi" },
  X402ExactPermit2Proxy: { source: "mocks/X402ExactPermit2Proxy.sol", abiName: "x402ExactPermit2ProxyAbi" }
} as const

export type ContractName = keyof typeof contracts

export interface Artifact {
  readonly abi: Abi
  readonly bytecode: Hex
}

export type Artifacts = { readonly [K in ContractName]: Artifact }

const contractNames = Object.keys(contracts) as ContractName[]

const settings = {
  evmVersion: "cancun",
  optimizer: { enabled: true, runs: 200 },
  outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } }
} as const

interface SolcOutput {
  readonly errors?: ReadonlyArray<{
    readonly severity: string
    readonly formattedMessage: string
    readonly sourceLocation?: { readonly file: string }
  }>
  readonly contracts?: Record<string, Record<string, { abi: Abi; evm: { bytecode: { object: string } } }>>
}

async function listSources(dir: string, prefix = ""): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true })
  const found: string[] = []
  for (const entry of entries) {
    if (entry.name.startsWith(".") || entry.name === "node_modules") continue
    const unit = prefix === "" ? entry.name : `${prefix}/${entry.name}`
    if (entry.isDirectory()) found.push(...(await listSources(path.join(dir, entry.name), unit)))
    else if (entry.name.endsWith(".sol")) found.push(unit)
  }
  return found.sort()
}

async function readSources(): Promise<Record<string, { content: string }>> {
  const units = await listSources(contractsDir)
  const sources: Record<string, { content: string }> = {}
  for (const unit of units) {
    sources[unit] = { content: await readFile(path.join(contractsDir, unit), "utf8") }
  }
  return sources
}

function packageVersion(name: string): string {
  return (require(`${name}/package.json`) as { version: string }).version
}

function cacheKey(sources: Record<string, { content: string }>): string {
  // OpenZeppelin sources are imported from node_modules, so its pinned version stands in for them.
  const material = JSON.stringify({
    solc: packageVersion("solc"),
    openzeppelin: packageVersion("@openzeppelin/contracts"),
    settings,
    sources
  })
  return createHash("sha256").update(material).digest("hex")
}

function resolveImport(importPath: string): { contents: string } | { error: string } {
  if (!importPath.startsWith("@openzeppelin/contracts/")) return { error: `import not found: ${importPath}` }
  const packageDir = path.dirname(require.resolve("@openzeppelin/contracts/package.json"))
  try {
    return {
      contents: readFileSync(
        path.join(packageDir, importPath.slice("@openzeppelin/contracts/".length)),
        "utf8"
      )
    }
  } catch {
    return { error: `import not found: ${importPath}` }
  }
}

async function compile(sources: Record<string, { content: string }>): Promise<Artifacts> {
  // Loaded lazily: the compiler is a 10 MB module that a warm cache never needs.
  const solc = (await import("solc")).default
  const input = { language: "Solidity", sources, settings }
  const output = JSON.parse(solc.compile(JSON.stringify(input), { import: resolveImport })) as SolcOutput
  const errors = (output.errors ?? []).filter((e) => e.severity === "error")
  if (errors.length > 0) {
    throw new Error(`solc failed:\n${errors.map((e) => e.formattedMessage).join("\n")}`)
  }
  // Warnings about our own sources only; OpenZeppelin's (transient storage) are known and accepted.
  for (const warning of output.errors ?? []) {
    if (warning.severity === "error" || warning.sourceLocation?.file.startsWith("@openzeppelin/")) continue
    console.warn(warning.formattedMessage)
  }
  const result: Partial<Record<ContractName, Artifact>> = {}
  for (const name of contractNames) {
    const compiled = output.contracts?.[contracts[name].source]?.[name]
    if (compiled === undefined) throw new Error(`solc produced no artifact for ${name}`)
    result[name] = { abi: compiled.abi, bytecode: `0x${compiled.evm.bytecode.object}` }
  }
  return result as Artifacts
}

/**
 * Where `npm pack` (its `prepack` script) leaves the artifacts beside the compiled module (scripts/package-artifacts.ts):
 * an installed package has no sources to compile, and needs no compiler.
 */
export const packagedArtifactsPath = path.join(contractsDir, "artifacts.json")

/**
 * Compiles the contracts, or reads the artifacts cached for exactly these sources and settings;
 * with no sources beside this module (the installed package), the packaged artifacts.
 */
export async function loadArtifacts(): Promise<Artifacts> {
  const sources = await readSources()
  if (Object.keys(sources).length === 0)
    return JSON.parse(await readFile(packagedArtifactsPath, "utf8")) as Artifacts
  const file = path.join(cacheDir, `${cacheKey(sources)}.json`)
  try {
    return JSON.parse(await readFile(file, "utf8")) as Artifacts
  } catch {
    // Cache miss (or a torn file from an interrupted run): compile.
  }
  const artifacts = await compile(sources)
  await mkdir(cacheDir, { recursive: true })
  // Write then rename, so concurrent readers never see a partial file.
  const temp = `${file}.${process.pid}.tmp`
  await writeFile(temp, JSON.stringify(artifacts))
  await rename(temp, file)
  return artifacts
}

function formatWithBiome(source: string, filePath: string): Promise<string> {
  const biome = path.join(repoRoot, "node_modules", ".bin", "biome")
  return new Promise((resolve, reject) => {
    const child = spawn(biome, ["format", `--stdin-file-path=${filePath}`], {
      cwd: repoRoot,
      stdio: ["pipe", "pipe", "pipe"]
    })
    let out = ""
    let err = ""
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      out += chunk
    })
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      err += chunk
    })
    child.on("error", reject)
    child.on("close", (code) => {
      if (code === 0) resolve(out)
      else reject(new Error(`biome format failed (${code}): ${err}`))
    })
    child.stdin.end(source)
  })
}

/** The text of contracts/abi.ts for these artifacts, formatted the way the repository lints it. */
export async function renderAbiModule(artifacts: Artifacts): Promise<string> {
  const parts = [
    "// Generated by contracts/build.ts from the Solidity sources in contracts/. Do not edit by hand;",
    "// run `npm run contracts` after changing a contract.",
    ""
  ]
  for (const name of contractNames) {
    parts.push(
      `export const ${contracts[name].abiName} = ${JSON.stringify(artifacts[name].abi)} as const`,
      ""
    )
  }
  return formatWithBiome(parts.join("\n"), "contracts/abi.ts")
}

async function main(): Promise<void> {
  const started = performance.now()
  const artifacts = await loadArtifacts()
  const compiledIn = performance.now() - started
  await writeFile(abiModulePath, await renderAbiModule(artifacts))
  for (const name of contractNames) {
    const size = (artifacts[name].bytecode.length - 2) / 2
    console.log(`${name.padEnd(18)} ${String(size).padStart(6)} bytes`)
  }
  console.log(`artifacts ready in ${(compiledIn / 1000).toFixed(1)} s; wrote contracts/abi.ts`)
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: unknown) => {
    console.error(error instanceof Error ? error.message : error)
    process.exitCode = 1
  })
}
