/**
 * The devnet of a bench: anvil with the reference contracts (`devnetChain`), the deployment file,
 * and the services started as their own processes (src/bin/*.ts) with the devnet's settings
 * (`relayerEnv`, `attestorEnv`) plus a bench's overrides.
 */
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Exit, Scope } from "effect"
import {
  attestorEnv,
  type DevnetChain,
  devnetChain,
  freeLoopbackPort,
  relayerEnv,
  writeDevnetFile
} from "../../layers/devnet.js"
import { SERVICE_ALLOCATOR_ENV, SERVICE_NODE_FLAGS } from "../../src/bin/processTuning.js"
import { freshPostgresSchema } from "../../test/support/postgresSchema.js"
import { bundled } from "./build.js"
import { type Server, startServer } from "./processes.js"

export interface BenchDevnet {
  readonly chain: DevnetChain
  readonly relayerPort: number
  readonly attestorPort: number
  readonly relayerUrl: string
  readonly attestorUrl: string
  readonly close: () => Promise<void>
}

export const freePort = () => Effect.runPromise(freeLoopbackPort)

/** Anvil and the contracts, the deployment file naming the services' ports. */
export const startDevnet = async (name: string): Promise<BenchDevnet> => {
  const scope = Effect.runSync(Scope.make())
  const chain = await Effect.runPromise(
    Scope.extend(devnetChain({ dir: join(tmpdir(), `bench-${name}-${process.pid}`) }), scope)
  )
  const relayerPort = await freePort()
  const attestorPort = await freePort()
  const relayerUrl = `http://127.0.0.1:${relayerPort}`
  const attestorUrl = `http://127.0.0.1:${attestorPort}`
  await Effect.runPromise(writeDevnetFile(chain, { relayerUrl, attestorUrl }))
  return {
    chain,
    relayerPort,
    attestorPort,
    relayerUrl,
    attestorUrl,
    close: () => Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

/** Rate limits out of the way: the load comes from one address, and the limiter still runs. */
export const liftedRelayerLimits = {
  RATE_LIMIT_IP_BURST: "1000000000",
  RATE_LIMIT_IP_PER_MINUTE: "1000000000",
  RATE_LIMIT_ID_BURST: "1000000000",
  RATE_LIMIT_ID_PER_MINUTE: "1000000000"
}

export interface RunOptions {
  readonly nodeArgs?: ReadonlyArray<string>
  /** From bench/.build with plain node (after `ensureBuild`), instead of tsx on the source. */
  readonly bundled?: boolean
  /**
   * A PostgreSQL database the relayer shares with others (replicas), left as it is when it stops,
   * instead of a schema of its own on BENCH_DATABASE_URL.
   */
  readonly sharedDatabaseUrl?: string
}

const script = (source: string, options: RunOptions) =>
  options.bundled === true ? { script: bundled(source), bundled: true } : { script: source }

/**
 * The relayer's node flags: the services' own, as the image and the devnet run them
 * (src/bin/processTuning.ts), then `extra` or else BENCH_RELAYER_NODE_ARGS (e.g. --cpu-prof).
 */
export const relayerNodeArgs = (extra?: ReadonlyArray<string>): ReadonlyArray<string> => [
  ...SERVICE_NODE_FLAGS,
  ...(extra ?? process.env.BENCH_RELAYER_NODE_ARGS?.split(" ").filter((a) => a !== "") ?? [])
]

export const startRelayer = async (
  devnet: BenchDevnet,
  overrides: Record<string, string> = {},
  options: RunOptions = {}
): Promise<Server> => {
  // BENCH_DATABASE_URL runs the relayer on PostgreSQL instead of the embedded database.
  const database =
    process.env.BENCH_DATABASE_URL === undefined || options.sharedDatabaseUrl !== undefined
      ? undefined
      : // A schema of its own, dropped when it stops: a store left by an earlier run (another
        // chain under the same hot key) must not be what it resumes.
        await freshPostgresSchema(process.env.BENCH_DATABASE_URL, "bench")
  const server = await startServer({
    ...script("src/bin/relayer.ts", options),
    env: {
      ...SERVICE_ALLOCATOR_ENV,
      ...relayerEnv(devnet.chain, devnet.relayerPort),
      ...(database === undefined ? {} : { DATABASE_URL: database.url }),
      ...(options.sharedDatabaseUrl === undefined ? {} : { DATABASE_URL: options.sharedDatabaseUrl }),
      ...overrides
    },
    readyPath: "/v1/config",
    port: Number(overrides.PORT ?? devnet.relayerPort),
    nodeArgs: relayerNodeArgs(options.nodeArgs)
  })
  return database === undefined
    ? server
    : { ...server, stop: () => server.stop().then(() => database.drop()) }
}

export const startAttestor = (
  devnet: BenchDevnet,
  overrides: Record<string, string> = {},
  options: RunOptions = {}
): Promise<Server> =>
  startServer({
    ...script("src/bin/attestor.ts", options),
    env: { ...SERVICE_ALLOCATOR_ENV, ...attestorEnv(devnet.chain, devnet.attestorPort), ...overrides },
    readyPath: "/v1/info",
    port: devnet.attestorPort,
    nodeArgs: [...SERVICE_NODE_FLAGS, ...(options.nodeArgs ?? [])]
  })

/** The two baseline servers (bench/baselines), on free ports. */
export const startRaw = async (bodyFile: string, gzipFile?: string, options: RunOptions = {}) => {
  const port = await freePort()
  return startServer({
    ...script("bench/baselines/raw.ts", options),
    env: {
      PORT: String(port),
      BODY_FILE: bodyFile,
      ...(gzipFile === undefined ? {} : { GZIP_FILE: gzipFile })
    },
    readyPath: "/",
    port
  })
}

export const startBare = async (mode: "get" | "post", sampleFile: string, options: RunOptions = {}) => {
  const port = await freePort()
  return startServer({
    ...script("bench/baselines/bare.ts", options),
    env: { PORT: String(port), MODE: mode, SAMPLE_FILE: sampleFile },
    readyPath: "/",
    port,
    nodeArgs: options.nodeArgs ?? []
  })
}
