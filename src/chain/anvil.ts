/**
 * A local anvil node from the `@foundry-rs/anvil` npm package, on a loopback port, for tests and the
 * devnet. Available as a plain async API (`spawnAnvil`) and as an Effect scoped resource
 * (`startAnvil`). The node never outlives the process that started it: `stop()`, the parent's exit
 * handler and a small watchdog beside anvil (for a parent killed outright) all end it.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { createRequire } from "node:module"
import net from "node:net"
import path from "node:path"
import { Data, Effect, type Scope } from "effect"
import { DEVNET_CHAIN_ID } from "./DevnetChainClock.js"

export const ANVIL_HOST = "127.0.0.1"
export const ANVIL_CHAIN_ID = DEVNET_CHAIN_ID
export const ANVIL_MNEMONIC = "test test test test test test test test test test test junk"

export interface AnvilOptions {
  /** Explicit port; if it is taken, starting fails with a clear error. Default: a free port. */
  readonly port?: number
  /** Default 31337. */
  readonly chainId?: number
  /** Default: anvil's test mnemonic. */
  readonly mnemonic?: string
  /** Number of mnemonic accounts, default 10. */
  readonly accounts?: number
  /** Ether per account, default anvil's 10000. */
  readonly balance?: number
  /** Interval mining every this many seconds (automine stays off). */
  readonly blockTime?: number
  /** No automine and no interval mining: blocks only on `evm_mine`. */
  readonly noMining?: boolean
  /** How long to wait for the node to answer `eth_chainId`, default 20 s. */
  readonly startTimeoutMs?: number
  /** Further command-line arguments, passed through. */
  readonly extraArgs?: readonly string[]
}

export interface AnvilInstance {
  readonly rpcUrl: string
  readonly port: number
  readonly chainId: number
  /** Ends the node; safe to call more than once. */
  readonly stop: () => Promise<void>
}

export class AnvilStartError extends Data.TaggedError("AnvilStartError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

/** The platform binary itself, not the `node_modules/.bin/anvil` node wrapper, so signals reach anvil. */
export const resolveAnvilBinary = (): string => {
  const fromProject = createRequire(import.meta.url)
  const wrapperPackage = fromProject.resolve("@foundry-rs/anvil/package.json")
  const fromWrapper = createRequire(wrapperPackage)
  const arch = process.arch === "x64" ? "amd64" : process.arch
  const exe = process.platform === "win32" ? "anvil.exe" : "anvil"
  const candidates: string[] = []
  try {
    candidates.push(fromWrapper.resolve(`@foundry-rs/anvil-${process.platform}-${arch}/bin/${exe}`))
  } catch {
    // Not installed for this platform; try the locations below.
  }
  candidates.push(path.join(path.dirname(wrapperPackage), "..", "dist", exe))
  const found = candidates.find((candidate) => existsSync(candidate))
  if (found === undefined) {
    throw new AnvilStartError({
      message: `no anvil binary for ${process.platform}-${process.arch} in @foundry-rs/anvil`
    })
  }
  return found
}

// Runs beside anvil in its own process group. It polls the parent so that anvil also goes away when
// the parent is killed with SIGKILL, which no exit handler can observe.
const WATCHDOG = `
const { spawn } = require("node:child_process")
const [bin, parentPid, ...args] = process.argv.slice(1)
const parent = Number(parentPid)
const child = spawn(bin, args, { stdio: "inherit" })
const forward = (signal) => { try { child.kill(signal) } catch {} }
for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"]) process.on(signal, () => forward(signal))
child.on("error", (error) => { console.error(String(error)); process.exit(127) })
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)))
setInterval(() => {
  let alive = process.ppid === parent
  if (alive) { try { process.kill(parent, 0) } catch (error) { alive = error.code === "EPERM" } }
  // Exit only once anvil is reaped (the exit handler above), so no zombie is left behind.
  if (!alive) { forward("SIGKILL"); setTimeout(() => process.exit(0), 2000).unref() }
}, 500)
`

const live = new Set<ChildProcess>()
let exitHookInstalled = false

const killTree = (child: ChildProcess, signal: NodeJS.Signals): void => {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return
  try {
    // The watchdog leads its own process group; signalling the group reaches anvil as well.
    if (process.platform === "win32") child.kill(signal)
    else process.kill(-child.pid, signal)
  } catch {
    // Already gone.
  }
}

const installExitHook = (): void => {
  if (exitHookInstalled) return
  exitHookInstalled = true
  process.once("exit", () => {
    for (const child of live) killTree(child, "SIGKILL")
  })
}

const portInUseMessage = (port: number): string =>
  `port ${port} on ${ANVIL_HOST} is already in use; choose another port or omit it to use a free one`

const probePort = (port: number): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.unref()
    server.once("error", reject)
    server.listen({ port, host: ANVIL_HOST, exclusive: true }, () => {
      const address = server.address()
      const bound = typeof address === "object" && address !== null ? address.port : port
      server.close(() => resolve(bound))
    })
  })

const isAddressInUse = (error: unknown): boolean =>
  typeof error === "object" && error !== null && "code" in error && error.code === "EADDRINUSE"

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

const queryChainId = async (rpcUrl: string): Promise<number | undefined> => {
  try {
    const response = await fetch(rpcUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }),
      signal: AbortSignal.timeout(1000)
    })
    if (!response.ok) return undefined
    const body = (await response.json()) as { result?: unknown }
    return typeof body.result === "string" ? Number.parseInt(body.result, 16) : undefined
  } catch {
    return undefined
  }
}

const buildArgs = (options: AnvilOptions, port: number, chainId: number): string[] => {
  const args = [
    "--host",
    ANVIL_HOST,
    "--port",
    String(port),
    "--chain-id",
    String(chainId),
    "--mnemonic",
    options.mnemonic ?? ANVIL_MNEMONIC,
    "--accounts",
    String(options.accounts ?? 10)
  ]
  if (options.balance !== undefined) args.push("--balance", String(options.balance))
  if (options.noMining === true) args.push("--no-mining")
  else if (options.blockTime !== undefined) args.push("--block-time", String(options.blockTime))
  if (options.extraArgs !== undefined) args.push(...options.extraArgs)
  return args
}

interface Attempt {
  readonly instance?: AnvilInstance
  readonly portTaken?: boolean
}

const attempt = async (
  binary: string,
  options: AnvilOptions,
  port: number,
  chainId: number
): Promise<Attempt> => {
  const child = spawn(
    process.execPath,
    ["-e", WATCHDOG, binary, String(process.pid), ...buildArgs(options, port, chainId)],
    {
      stdio: ["ignore", "pipe", "pipe"],
      detached: process.platform !== "win32"
    }
  )
  live.add(child)
  installExitHook()

  // Keep a short tail of output for error messages; draining the pipes keeps anvil from blocking.
  // "Listening on host:port" is this child's own word that it holds the port: another node that
  // got the port first would answer eth_chainId just the same.
  const listeningLine = `Listening on ${ANVIL_HOST}:${port}`
  let output = ""
  let listening = false
  const collect = (chunk: Buffer): void => {
    output = (output + chunk.toString("utf8")).slice(-4000)
    if (!listening && output.includes(listeningLine)) listening = true
  }
  child.stdout?.on("data", collect)
  child.stderr?.on("data", collect)

  const exited = new Promise<void>((resolve) => {
    child.once("exit", () => {
      live.delete(child)
      resolve()
    })
  })
  let spawnError: unknown
  child.once("error", (error) => {
    spawnError = error
  })

  const rpcUrl = `http://${ANVIL_HOST}:${port}`
  const deadline = Date.now() + (options.startTimeoutMs ?? 20_000)
  while (true) {
    if (spawnError !== undefined) {
      throw new AnvilStartError({
        message: `could not start anvil: ${String(spawnError)}`,
        cause: spawnError
      })
    }
    if (child.exitCode !== null || child.signalCode !== null) {
      if (/address already in use/i.test(output)) return { portTaken: true }
      throw new AnvilStartError({ message: `anvil exited during startup: ${output.trim() || "no output"}` })
    }
    const answered = listening ? await queryChainId(rpcUrl) : undefined
    if (answered !== undefined && child.exitCode === null) {
      if (answered !== chainId) {
        killTree(child, "SIGKILL")
        throw new AnvilStartError({
          message: `node on ${rpcUrl} answered chain id ${answered}, expected ${chainId}`
        })
      }
      break
    }
    if (Date.now() > deadline) {
      killTree(child, "SIGKILL")
      await exited
      throw new AnvilStartError({
        message: `anvil did not answer eth_chainId on ${rpcUrl} in time: ${output.trim()}`
      })
    }
    await sleep(50)
  }

  let stopping: Promise<void> | undefined
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      if (child.exitCode !== null || child.signalCode !== null) return
      killTree(child, "SIGTERM")
      const timer = setTimeout(() => killTree(child, "SIGKILL"), 3000)
      await exited
      clearTimeout(timer)
    })()
    return stopping
  }
  return { instance: { rpcUrl, port, chainId, stop } }
}

/** Starts anvil and resolves once it answers `eth_chainId`. Rejects with {@link AnvilStartError}. */
export async function spawnAnvil(options: AnvilOptions = {}): Promise<AnvilInstance> {
  const binary = resolveAnvilBinary()
  const chainId = options.chainId ?? ANVIL_CHAIN_ID
  if (options.port !== undefined) {
    try {
      await probePort(options.port)
    } catch (error) {
      if (isAddressInUse(error))
        throw new AnvilStartError({ message: portInUseMessage(options.port), cause: error })
      throw new AnvilStartError({
        message: `cannot bind ${ANVIL_HOST}:${options.port}: ${String(error)}`,
        cause: error
      })
    }
    const result = await attempt(binary, options, options.port, chainId)
    if (result.instance === undefined) throw new AnvilStartError({ message: portInUseMessage(options.port) })
    return result.instance
  }
  // A free port can be taken between probing and anvil binding it; try again with another.
  for (let tries = 0; tries < 5; tries++) {
    const result = await attempt(binary, options, await probePort(0), chainId)
    if (result.instance !== undefined) return result.instance
  }
  throw new AnvilStartError({ message: "could not find a free loopback port for anvil" })
}

/** Anvil as a scoped resource: started on acquire, stopped when the scope closes. */
export const startAnvil = (
  options: AnvilOptions = {}
): Effect.Effect<AnvilInstance, AnvilStartError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: () => spawnAnvil(options),
      catch: (error) =>
        error instanceof AnvilStartError
          ? error
          : new AnvilStartError({ message: String(error), cause: error })
    }),
    (anvil) => Effect.promise(() => anvil.stop())
  )
