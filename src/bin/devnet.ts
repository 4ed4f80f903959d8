/**
 * `npm run devnet`: the whole system on this machine. Anvil with the reference contracts, then
 * the relayer and the attestor as their own processes (exactly as an operator runs them) on the
 * embedded database. Ctrl-C or SIGTERM stops the services and the chain; nothing is left behind.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { createServer } from "node:net"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Config, Data, Deferred, Effect, Option } from "effect"
import {
  attestorEnv,
  autoVetoEnv,
  CHECKOUT_PORT_OFFSET,
  committeeRefusal,
  DEVNET_MAX_ATTESTORS,
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
  writeCheckoutSettings,
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

/** A whole number from the environment, or the default; anything else stops start-up naming it. */
const integerSetting = (name: string, defaultValue: number) =>
  Config.string(name).pipe(
    Config.option,
    Effect.orElseSucceed(() => Option.none<string>()),
    Effect.flatMap((raw) => {
      if (Option.isNone(raw) || raw.value.trim() === "") return Effect.succeed(defaultValue)
      const value = Number(raw.value.trim())
      return /^\d+$/.test(raw.value.trim()) && Number.isSafeInteger(value)
        ? Effect.succeed(value)
        : Effect.fail(new DevnetStartError({ message: `${name} must be a whole number, not "${raw.value}"` }))
    })
  )

/**
 * Where members 2..5 listen by default: 8092..8095 (docs/protocol.md §9 "A committee devnet"), clear
 * of the devnet's other ports and of `npm run devnet:relayer` / `devnet:attestor` (8090, 8091).
 */
const MEMBER_PORT_BASE = 8090

/**
 * The committee (docs/protocol.md §9 "A committee devnet"): `DEVNET_ATTESTORS` members (1 to 5),
 * `DEVNET_ATTESTOR_THRESHOLD` signatures a bind needs (1 to the members), and each member's port:
 * `DEVNET_ATTESTOR_PORTS` lists them all, member 1 first; otherwise member 1 listens on
 * `DEVNET_ATTESTOR_PORT` (8081) and member k on 8090 + k (8092, 8093, …).
 */
const committeeSettings = Effect.gen(function* () {
  const attestors = yield* integerSetting("DEVNET_ATTESTORS", 1)
  if (attestors < 1 || attestors > DEVNET_MAX_ATTESTORS)
    return yield* new DevnetStartError({
      message: `DEVNET_ATTESTORS must be 1 to ${DEVNET_MAX_ATTESTORS}, not ${attestors}`
    })
  const threshold = yield* integerSetting("DEVNET_ATTESTOR_THRESHOLD", 1)
  if (committeeRefusal(attestors, threshold) !== undefined)
    return yield* new DevnetStartError({
      message: `DEVNET_ATTESTOR_THRESHOLD must be 1 to ${attestors} (DEVNET_ATTESTORS), not ${threshold}`
    })
  const firstPort = yield* portSetting("DEVNET_ATTESTOR_PORT", 8081)
  const listed = yield* Config.string("DEVNET_ATTESTOR_PORTS").pipe(Config.withDefault(""))
  if (listed.trim() === "") {
    const ports = Array.from({ length: attestors }, (_, i) =>
      i === 0 ? firstPort : MEMBER_PORT_BASE + i + 1
    )
    return { attestors, threshold, ports }
  }
  const ports = listed.split(",").map((p) => Number(p.trim()))
  if (ports.length !== attestors || ports.some((p) => !Number.isInteger(p) || p < 1 || p > 65_535))
    return yield* new DevnetStartError({
      message: `DEVNET_ATTESTOR_PORTS must list ${attestors} port${attestors === 1 ? "" : "s"} (one per member of DEVNET_ATTESTORS, member 1 first), comma-separated, not "${listed}"`
    })
  return { attestors, threshold, ports }
})

/** Fails naming the first port two services were given. */
const ensurePortsDistinct = (ports: ReadonlyArray<readonly [number, string]>) => {
  const seen = new Map<number, string>()
  for (const [port, what] of ports) {
    const other = seen.get(port)
    if (other !== undefined)
      return Effect.fail(
        new DevnetStartError({ message: `port ${port} is given to both the ${other} and the ${what}` })
      )
    seen.set(port, what)
  }
  return Effect.void
}

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

/** Member 1 is "attestor", as on a single-attestor devnet; the others "attestor-<k>". */
const memberName = (member: number) => (member === 1 ? "attestor" : `attestor-${member}`)

/** The banner's attestor lines: one, or the committee's threshold and each member. */
const memberLines = (chain: DevnetChain, attestors: ReadonlyArray<{ readonly url: string }>) => {
  const [first] = attestors
  if (attestors.length === 1 && first !== undefined) return [`  attestor  ${first.url}`]
  return [
    `  attestors ${attestors.length} members; a bind needs ${chain.attestorThreshold} of their signatures`,
    ...attestors.map(
      (attestor, i) =>
        `    ${String(i + 1).padEnd(2)}${attestor.url}  ${chain.members[i]?.address}  hint key ${chain.members[i]?.hintPublicKey}`
    )
  ]
}

const program = Effect.gen(function* () {
  const dir = yield* Config.string("DEVNET_DIR").pipe(Config.withDefault(".devnet"))
  const rpcPort = yield* portSetting("DEVNET_RPC_PORT", 8545)
  const relayerPort = yield* portSetting("DEVNET_RELAYER_PORT", 8080)
  const committee = yield* committeeSettings
  const doublesPort = yield* portSetting("DEVNET_DOUBLES_PORT", 8082)
  const facilitatorPort = yield* portSetting("DEVNET_FACILITATOR_PORT", 8083)
  const walletPort = yield* portSetting("DEVNET_WALLET_PORT", 5173)
  const services: ReadonlyArray<readonly [number, string]> = [
    [rpcPort, "chain RPC (DEVNET_RPC_PORT)"],
    [relayerPort, "relayer (DEVNET_RELAYER_PORT)"],
    ...committee.ports.map(
      (port, i) =>
        [
          port,
          i === 0
            ? `attestor (DEVNET_ATTESTOR_PORT${committee.attestors > 1 ? " or DEVNET_ATTESTOR_PORTS" : ""})`
            : `attestor ${i + 1} (DEVNET_ATTESTOR_PORTS)`
        ] as const
    ),
    [doublesPort, "OAuth provider stand-ins (DEVNET_DOUBLES_PORT)"],
    [facilitatorPort, "x402 facilitator stand-in (DEVNET_FACILITATOR_PORT)"],
    [walletPort, "wallet page (DEVNET_WALLET_PORT)"]
  ]
  // Check every port first, so a busy one stops the devnet before anything has started.
  yield* ensurePortsDistinct(services)
  for (const [port, what] of services) yield* ensurePortFree(port, what)

  yield* Effect.logInfo("starting anvil and deploying the reference contracts")
  const chain: DevnetChain = yield* devnetChain({
    dir,
    rpcPort,
    attestors: committee.attestors,
    threshold: committee.threshold
  })
  const relayerUrl = `http://127.0.0.1:${relayerPort}`
  const memberUrls = chain.members.map(({ member }, i) => ({
    member,
    url: `http://127.0.0.1:${committee.ports[i]}`
  }))
  const attestorUrl = memberUrls[0]!.url
  // The stand-ins run in this process: each member's own OAuth apps log in at them (docs/protocol.md §9).
  const standIns = yield* devnetStandIns(memberUrls, doublesPort)
  // The facilitator of paid handle lookups settles from account #0 (docs/protocol.md §9).
  const facilitator = yield* devnetFacilitator(chain, facilitatorPort)
  // The wallet page at http://localhost:<port>, speaking to every member: the members' allow-lists
  // and every service's CORS name it.
  const wallet = yield* devnetWalletPage(
    chain,
    { attestorUrls: memberUrls.map((m) => m.url), relayerUrl },
    walletPort
  )
  yield* writeDevnetFile(chain, {
    relayerUrl,
    attestorUrl,
    attestorUrls: memberUrls.map((m) => m.url),
    doublesUrl: standIns.url,
    facilitatorUrl: facilitator.url,
    walletUrl: wallet.url
  })
  const walletSettings = walletPageEnv(wallet.url)
  // `npm run devnet:relayer` and `devnet:attestor` read these: this run's RPC, ports and wallet page.
  yield* writeCheckoutSettings(chain, { relayer: relayerPort, attestor: committee.ports[0]! }, wallet.url)

  const memberProcess = ({ member, url }: { readonly member: number; readonly url: string }) =>
    serviceProcess(memberName(member), "src/bin/attestor.ts", {
      ...attestorEnv(chain, Number(new URL(url).port), member),
      ...standInEnv(standIns, url, undefined, member),
      // One domain for every member: the front-end's (docs/protocol.md §9).
      ...fedsocialEnv(chain),
      // Quoted as stock @x402/evm clients pay (docs/protocol.md §9).
      ...paidLookupEnv(chain, facilitator.url, DEVNET_TRANSFER_METHOD),
      // Vetoes paid by the member's own key, account #2 for member 1 (docs/protocol.md §9).
      ...autoVetoEnv,
      ...walletSettings.attestor,
      // Deadlines by the chain's clock, which a skipped bind delay moves ahead (docs/protocol.md §9).
      ...devnetClockEnv
    })
  // Two at a time: the machine starts one Node process per service.
  const [relayer, ...attestors] = yield* Effect.all(
    [
      serviceProcess("relayer", "src/bin/relayer.ts", {
        ...relayerEnv(chain, relayerPort),
        ...walletSettings.relayer
      }),
      ...memberUrls.map(memberProcess)
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
      ...memberLines(chain, attestors),
      `  doubles   ${standIns.url}  (OAuth providers; add devnet_user=<id> to a login URL)`,
      `  x402      ${facilitator.url}  (facilitator of paid handle lookups, 0.01 a lookup, quoted as ${DEVNET_TRANSFER_METHOD})`,
      committee.attestors === 1
        ? "  vetoes    AUTO_VETO on: the attestor vetoes unattested and contested binds, paid by account #2"
        : "  vetoes    AUTO_VETO on: each member vetoes unattested and contested binds, paid by its own key",
      `  file      ${chain.deploymentFile}`,
      `  checkout  ${join(chain.dir, "relayer.env")}, ${join(chain.dir, "attestor.env")}  (npm run devnet:relayer / devnet:attestor, ports ${relayerPort + CHECKOUT_PORT_OFFSET} and ${committee.ports[0]! + CHECKOUT_PORT_OFFSET})`,
      "  metrics   Authorization: Bearer devnet",
      "Ctrl-C stops everything.",
      ""
    ].join("\n")
  )
  // Runs until interrupted (Ctrl-C / SIGTERM) or until a service dies.
  const first = yield* Effect.raceAll([
    Effect.map(relayer.exited, (code) => ["relayer", code] as const),
    ...attestors.map((attestor, i) =>
      Effect.map(attestor.exited, (code) => [memberName(i + 1), code] as const)
    )
  ])
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
