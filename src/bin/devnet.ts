/**
 * `npm run devnet`: the whole system on this machine. Anvil with the reference contracts, then
 * the relayer and the attestor as their own processes (exactly as an operator runs them) on the
 * embedded database. Ctrl-C or SIGTERM stops the services and the chain; nothing is left behind.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { createServer } from "node:net"
import { fileURLToPath } from "node:url"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Config, Data, Deferred, Effect } from "effect"
import {
  attestorEnv,
  autoVetoEnv,
  DEVNET_TRANSFER_METHOD,
  type DevnetChain,
  devnetChain,
  devnetClockEnv,
  devnetFacilitator,
  devnetStandIns,
  devnetWalletPage,
  fedsocialEnv,
  paidLookupEnv,
  relayerEnv,
  standInEnv,
  walletPageEnv,
  writeDevnetFile
} from "../../layers/devnet.js"
import { safeText, serviceLogger } from "../logging.js"
import { SERVICE_ALLOCATOR_ENV, SERVICE_NODE_FLAGS } from "./processTuning.js"

const repoRoot = fileURLToPath(new URL("../../", import.meta.url))

class DevnetStartError extends Data.TaggedError("DevnetStartError")<{ readonly message: string }> {}

const portSetting = (name: string, defaultValue: number) =>
  Config.integer(name).pipe(
    Config.validate({ message: "expected a port from 1 to 65535", validation: (p) => p > 0 && p < 65_536 }),
    Config.withDefault(defaultValue)
  )

/** Fails with a clear message when something already listens on the port. */
const ensurePortFree = (port: number, what: string) =>
  Effect.async<void, DevnetStartError>((resume) => {
    const server = createServer()
    server.once("error", (e: NodeJS.ErrnoException) =>
      resume(
        Effect.fail(
          new DevnetStartError({
            message:
              e.code === "EADDRINUSE"
                ? `port ${port} for the ${what} is already in use; stop whatever uses it or set another port`
                : `cannot use port ${port} for the ${what}: ${e.code ?? e.message}`
          })
        )
      )
    )
    server.listen(port, "127.0.0.1", () => server.close(() => resume(Effect.void)))
  })

/** A service's access-log line (src/http/server.ts), one per answered request. */
const ACCESS_LINE = /\bmessage=request\b/
/** Access lines are printed one by one at LOG_LEVEL=debug; otherwise summed up every few seconds. */
const perRequest = (process.env.LOG_LEVEL ?? "").toLowerCase() === "debug"
const SUMMARY_EVERY_MS = 5_000

/** Counts a service's answered requests by status class and prints one line per period with any. */
const requestSummary = (name: string) => {
  const byClass = new Map<string, number>()
  const timer = setInterval(() => {
    if (byClass.size === 0) return
    const total = [...byClass.values()].reduce((a, b) => a + b, 0)
    const classes = [...byClass.entries()].map(([status, n]) => `${status}: ${n}`).join(", ")
    process.stdout.write(
      `[${name}] ${total} request${total === 1 ? "" : "s"} in ${SUMMARY_EVERY_MS / 1000} s (${classes}); LOG_LEVEL=debug lists each\n`
    )
    byClass.clear()
  }, SUMMARY_EVERY_MS)
  timer.unref()
  return {
    count: (line: string) => {
      const status = `${line.match(/\bstatus=(\d)\d\d\b/)?.[1] ?? "?"}xx`
      byClass.set(status, (byClass.get(status) ?? 0) + 1)
    }
  }
}

/** A service process whose output is prefixed with its name; terminated when the scope closes. */
const serviceProcess = (name: string, entry: string, env: Record<string, string>) =>
  Effect.gen(function* () {
    const requests = requestSummary(name)
    const listening = yield* Deferred.make<string, DevnetStartError>()
    const exited = yield* Deferred.make<number | null>()
    const child = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const proc: ChildProcess = spawn(
          process.execPath,
          [...SERVICE_NODE_FLAGS, "--import", "tsx", entry],
          {
            cwd: repoRoot,
            // The devnet gives every setting it means: a developer's .env in the checkout is not read.
            env: { ...process.env, ENV_FILE: "none", ...SERVICE_ALLOCATOR_ENV, ...env },
            stdio: ["ignore", "pipe", "pipe"]
          }
        )
        const relay = (stream: NodeJS.ReadableStream | null, out: NodeJS.WriteStream) => {
          let pending = ""
          stream?.setEncoding("utf8")
          stream?.on("data", (chunk: string) => {
            pending += chunk
            const lines = pending.split("\n")
            pending = lines.pop() ?? ""
            for (const line of lines) {
              if (!perRequest && ACCESS_LINE.test(line)) {
                requests.count(line)
                continue
              }
              out.write(`[${name}] ${line}\n`)
              const match = line.match(/Listening on (http:\/\/\S+?)"?$/)
              if (match?.[1]) Effect.runSync(Deferred.succeed(listening, match[1]))
            }
          })
        }
        relay(proc.stdout, process.stdout)
        relay(proc.stderr, process.stderr)
        proc.once("exit", (code) => {
          Effect.runSync(Deferred.succeed(exited, code))
          Effect.runSync(
            Deferred.fail(listening, new DevnetStartError({ message: `the ${name} exited during start-up` }))
          )
        })
        return proc
      }),
      (proc) =>
        Effect.gen(function* () {
          if (proc.exitCode === null && proc.signalCode === null) {
            proc.kill("SIGTERM")
            const done = yield* Deferred.await(exited).pipe(Effect.timeout("10 seconds"), Effect.option)
            if (done._tag === "None") proc.kill("SIGKILL")
          }
        })
    )
    const url = yield* Deferred.await(listening)
    return { child, url, exited: Deferred.await(exited) }
  })

const program = Effect.gen(function* () {
  const dir = yield* Config.string("DEVNET_DIR").pipe(Config.withDefault(".devnet"))
  const rpcPort = yield* portSetting("DEVNET_RPC_PORT", 8545)
  const relayerPort = yield* portSetting("DEVNET_RELAYER_PORT", 8080)
  const attestorPort = yield* portSetting("DEVNET_ATTESTOR_PORT", 8081)
  const doublesPort = yield* portSetting("DEVNET_DOUBLES_PORT", 8082)
  const facilitatorPort = yield* portSetting("DEVNET_FACILITATOR_PORT", 8083)
  const walletPort = yield* portSetting("DEVNET_WALLET_PORT", 5173)
  // Check every port first, so a busy one stops the devnet before anything has started.
  yield* ensurePortFree(rpcPort, "chain RPC (DEVNET_RPC_PORT)")
  yield* ensurePortFree(relayerPort, "relayer (DEVNET_RELAYER_PORT)")
  yield* ensurePortFree(attestorPort, "attestor (DEVNET_ATTESTOR_PORT)")
  yield* ensurePortFree(doublesPort, "OAuth provider stand-ins (DEVNET_DOUBLES_PORT)")
  yield* ensurePortFree(facilitatorPort, "x402 facilitator stand-in (DEVNET_FACILITATOR_PORT)")
  yield* ensurePortFree(walletPort, "wallet page (DEVNET_WALLET_PORT)")

  yield* Effect.logInfo("starting anvil and deploying the reference contracts")
  const chain: DevnetChain = yield* devnetChain({ dir, rpcPort })
  const relayerUrl = `http://127.0.0.1:${relayerPort}`
  const attestorUrl = `http://127.0.0.1:${attestorPort}`
  // The stand-ins run in this process: the attestor's OAuth apps log in at them (docs/protocol.md §9).
  const standIns = yield* devnetStandIns(attestorUrl, doublesPort)
  // The facilitator of paid handle lookups settles from account #0 (docs/protocol.md §9).
  const facilitator = yield* devnetFacilitator(chain, facilitatorPort)
  yield* writeDevnetFile(chain, {
    relayerUrl,
    attestorUrl,
    doublesUrl: standIns.url,
    facilitatorUrl: facilitator.url
  })
  // The wallet page at http://localhost:<port>: the attestor's allow-list and both services' CORS name it.
  const wallet = yield* devnetWalletPage({ attestorUrl, relayerUrl }, walletPort)
  const walletSettings = walletPageEnv(wallet.url)

  const [relayer, attestor] = yield* Effect.all(
    [
      serviceProcess("relayer", "src/bin/relayer.ts", {
        ...relayerEnv(chain, relayerPort),
        ...walletSettings.relayer
      }),
      serviceProcess("attestor", "src/bin/attestor.ts", {
        ...attestorEnv(chain, attestorPort),
        ...standInEnv(standIns, attestorUrl),
        ...fedsocialEnv(chain),
        // Quoted as stock @x402/evm clients pay (docs/protocol.md §9).
        ...paidLookupEnv(chain, facilitator.url, DEVNET_TRANSFER_METHOD),
        // Vetoes paid by the attestor's key, account #2 (docs/protocol.md §9).
        ...autoVetoEnv,
        ...walletSettings.attestor,
        // Deadlines by the chain's clock, which a skipped bind delay moves ahead (docs/protocol.md §9).
        ...devnetClockEnv
      })
    ],
    { concurrency: 2 }
  )
  process.stdout.write(
    [
      "",
      "devnet is up",
      `  wallet    ${wallet.url}/  (open it in a browser: log in, see your escrows, bind)`,
      `  chain     ${chain.anvil.rpcUrl}  (chain id ${chain.deployment.chainId})`,
      `  vault     ${chain.deployment.vault}`,
      `  relayer   ${relayer.url}`,
      `  attestor  ${attestor.url}`,
      `  doubles   ${standIns.url}  (OAuth providers; add devnet_user=<id> to a login URL)`,
      `  x402      ${facilitator.url}  (facilitator of paid handle lookups, 0.01 a lookup, quoted as ${DEVNET_TRANSFER_METHOD})`,
      "  vetoes    AUTO_VETO on: the attestor vetoes unattested and contested binds, paid by account #2",
      `  file      ${chain.deploymentFile}`,
      "  metrics   Authorization: Bearer devnet",
      "Ctrl-C stops everything.",
      ""
    ].join("\n")
  )
  // Runs until interrupted (Ctrl-C / SIGTERM) or until a service dies.
  const first = yield* Effect.raceFirst(
    Effect.map(relayer.exited, (code) => ["relayer", code] as const),
    Effect.map(attestor.exited, (code) => ["attestor", code] as const)
  )
  return yield* new DevnetStartError({
    message: `the ${first[0]} stopped unexpectedly (exit code ${first[1]})`
  })
})

const main = Effect.scoped(program).pipe(
  Effect.catchAllCause((cause) =>
    Cause.isInterruptedOnly(cause)
      ? Effect.void
      : Effect.sync(() => {
          const error = Cause.squash(cause)
          const message =
            typeof error === "object" && error !== null && "message" in error
              ? String(error.message)
              : String(error)
          process.stderr.write(`devnet: ${safeText(message)}\n`)
          process.exitCode = 1
        })
  ),
  Effect.provide(serviceLogger)
)

// On SIGINT/SIGTERM NodeRuntime interrupts `main`, which runs every finalizer in reverse order:
// the services stop first, then anvil.
NodeRuntime.runMain(main, { disableErrorReporting: true, disablePrettyLogger: true })
