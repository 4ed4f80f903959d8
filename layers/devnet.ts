/**
 * The devnet (docs/protocol.md §9): anvil, the reference contracts deployed and configured, sample
 * balances and a sample launch, and the settings each service runs with. `npm run devnet` runs
 * the services as processes; end-to-end tests use `devnetChain` and the same settings to run
 * them in-process on free ports.
 */
import { readFileSync } from "node:fs"
import { mkdir, rm, writeFile } from "node:fs/promises"
import { createServer } from "node:net"
import { join } from "node:path"
import { ConfigProvider, Context, Data, Effect, Layer, type Scope } from "effect"
import type { Hex } from "viem"
import { keccak256, parseUnits, stringToHex } from "viem"
import {
  type DevnetDeployment,
  deployDevnet,
  devnetAccount,
  devnetRoles,
  installFarcasterRegistries,
  launchSampleToken,
  mintSampleBalances
} from "../contracts/deploy.js"
import { platformIds } from "../schema/ids.js"
import {
  encodeBeneficiaryHint,
  hintBeneficiaryId,
  hintPublicKeyOf,
  makeHint,
  sealHint
} from "../src/attestor/hints/hintEnvelopes.js"
import { type AnvilInstance, type AnvilStartError, startAnvil } from "../src/chain/anvil.js"
import { type OAuthStandIns, oauthStandIns, type StandInPlatform } from "../src/devnet/oauthStandIns.js"
import { walletPage } from "../src/devnet/walletPage.js"
import { type FacilitatorStandIn, facilitatorStandIn, installX402Contracts } from "../src/devnet/x402.js"
import { Attestor } from "./attestor.js"
import { Relayer } from "./relayer.js"

/** Fixed development secrets: the devnet is public by design, never use these elsewhere. */
export const DEVNET_HINT_PRIVATE_KEY: Hex = keccak256(stringToHex("fee-vault devnet hint key"))
export const DEVNET_PEPPER: Hex = keccak256(stringToHex("fee-vault devnet pepper"))
export const DEVNET_METRICS_TOKEN = "devnet"
/**
 * The bot token of the devnet's messenger login widget: a client signs its own widget payloads
 * with it (`signWidgetPayload(widgetKey(token), …)` of src/attestor/logins/messenger/messengerWidget.ts), standing in
 * for the messenger's widget.
 */
export const DEVNET_MESSENGER_BOT_TOKEN = "1000000001:devnet-messenger-bot-token-not-a-secret"
export const DEVNET_DENY_LIST = ["0x000000000000000000000000000000000000dEaD"] as const
/** The sample launch's beneficiary: a microblog user of the devnet's OAuth doubles. */
export const DEVNET_SAMPLE_USER = { platformId: platformIds.microblog, userId: "1000001" } as const
/** Where a front-end dev server usually runs (docs/protocol.md §9). */
export const DEVNET_FRONTEND_ORIGIN = "http://localhost:5173"
/** The devnet attestor's redirect allow-list: one page of that front-end (docs/protocol.md §9, §10 "Redirects"). */
export const DEVNET_REDIRECT_ALLOWLIST = `${DEVNET_FRONTEND_ORIGIN}/after-login`

/** The devnet attestor's OAuth apps at the stand-in providers: development values, not secrets. */
export const DEVNET_OAUTH_APPS = {
  microblog: { clientId: "devnet-microblog-client", clientSecret: "devnet-microblog-secret" },
  codehost: { clientId: "devnet-codehost-client", clientSecret: "devnet-codehost-secret" },
  community: { clientId: "devnet-community-client", clientSecret: "devnet-community-secret" }
} as const satisfies Record<StandInPlatform, { readonly clientId: string; readonly clientSecret: string }>

const standInPlatforms = [
  "microblog",
  "codehost",
  "community"
] as const satisfies ReadonlyArray<StandInPlatform>

/**
 * The stand-in OAuth providers and handle directories of the devnet (docs/protocol.md §9), with the devnet
 * attestor's apps registered for callbacks at `attestorUrl`; closed with the scope.
 */
export const devnetStandIns = (attestorUrl: string, port = 0) =>
  oauthStandIns({
    host: "127.0.0.1",
    port,
    clients: {
      microblog: {
        ...DEVNET_OAUTH_APPS.microblog,
        redirectUri: `${attestorUrl}/v1/oauth/microblog/callback`
      },
      codehost: { ...DEVNET_OAUTH_APPS.codehost, redirectUri: `${attestorUrl}/v1/oauth/codehost/callback` },
      community: { ...DEVNET_OAUTH_APPS.community, redirectUri: `${attestorUrl}/v1/oauth/community/callback` }
    }
  })

/**
 * The attestor's Sign In With Farcaster on the devnet (docs/protocol.md §9): messages for the front-end's
 * domain, the registries' stand-ins read over the devnet's own RPC.
 */
export const fedsocialEnv = (chain: DevnetChain): Record<string, string> => ({
  FEDSOCIAL_DOMAIN: new URL(DEVNET_FRONTEND_ORIGIN).host,
  FEDSOCIAL_URI: `${DEVNET_FRONTEND_ORIGIN}/login`,
  FEDSOCIAL_RPC_URL: chain.anvil.rpcUrl
})

/**
 * The attestor's settings for the stand-ins: the OAuth apps of `platforms` (every one by default),
 * their callbacks at `attestorUrl`.
 */
export const standInEnv = (
  standIns: OAuthStandIns,
  attestorUrl: string,
  platforms: ReadonlyArray<StandInPlatform> = standInPlatforms
): Record<string, string> => {
  const env: Record<string, string> = {
    PUBLIC_URL: attestorUrl,
    REDIRECT_ALLOWLIST: DEVNET_REDIRECT_ALLOWLIST,
    // The handle directories (used by handle lookups when HANDLE_LOOKUP_MODE allows them).
    MICROBLOG_API_URL: `${standIns.url}/microblog`,
    MICROBLOG_BEARER_TOKEN: "devnet-microblog-app-token",
    CODEHOST_API_URL: `${standIns.url}/codehost`,
    FEDSOCIAL_FNAMES_URL: standIns.fnames
  }
  for (const platform of platforms) {
    const prefix = platform.toUpperCase()
    const endpoints = standIns.endpoints(platform)
    env[`${prefix}_CLIENT_ID`] = DEVNET_OAUTH_APPS[platform].clientId
    env[`${prefix}_CLIENT_SECRET`] = DEVNET_OAUTH_APPS[platform].clientSecret
    env[`${prefix}_AUTHORIZE_URL`] = endpoints.authorize
    env[`${prefix}_TOKEN_URL`] = endpoints.token
    env[`${prefix}_REVOKE_URL`] = endpoints.revoke
    env[`${prefix}_USER_URL`] = endpoints.user
  }
  return env
}

/**
 * The settings that let the devnet's wallet page at `origin` (src/devnet/walletPage.ts; by default
 * `DEVNET_FRONTEND_ORIGIN`) log users in and call the services from the browser: the attestor's
 * redirect allow-list and Sign In With Farcaster domain name it, and both services allow it
 * cross-origin calls (`CORS_ALLOWED_ORIGINS`).
 */
export const walletPageEnv = (origin: string = DEVNET_FRONTEND_ORIGIN) => ({
  relayer: { CORS_ALLOWED_ORIGINS: origin } as Record<string, string>,
  attestor: {
    CORS_ALLOWED_ORIGINS: origin,
    // The usual front-end origin stays listed, so scripts that name it work whatever the page's port.
    REDIRECT_ALLOWLIST: [...new Set([DEVNET_REDIRECT_ALLOWLIST, `${origin}/after-login`])].join(","),
    FEDSOCIAL_DOMAIN: new URL(origin).host,
    FEDSOCIAL_URI: `${origin}/login`
  } as Record<string, string>
})

/** The devnet's wallet page for the services at these URLs; closed with the scope. */
export const devnetWalletPage = (
  urls: { readonly attestorUrl: string; readonly relayerUrl: string },
  port = 0
) => walletPage({ ...urls, port, host: "127.0.0.1", messengerBotToken: DEVNET_MESSENGER_BOT_TOKEN })

/** What a handle lookup costs on the devnet (docs/protocol.md §9): 0.01 of the settlement asset. */
export const DEVNET_LOOKUP_PRICE = "0.01"

/** The mnemonic account the devnet's facilitator settles from and lookups are paid to (docs/protocol.md §9). */
export const DEVNET_FACILITATOR_ACCOUNT = 0

/** The devnet's x402 facilitator stand-in over the chain's RPC, settling from account #0. */
export const devnetFacilitator = (chain: DevnetChain, port = 0) =>
  facilitatorStandIn({
    rpcUrl: chain.anvil.rpcUrl,
    privateKey: privateKeyOf(DEVNET_FACILITATOR_ACCOUNT),
    host: "127.0.0.1",
    port
  })

/**
 * The transfer method the devnet's attestor quotes (docs/protocol.md §9): `permit2`, the one stock
 * `@x402/evm` clients pay, so examples/paid-lookup.ts is such a client. The facilitator stand-in
 * lists both methods, so an attestor of either can use it.
 */
export const DEVNET_TRANSFER_METHOD = "permit2"

/**
 * The attestor's paid handle lookups on the devnet (docs/protocol.md §9): 0.01 of the settlement asset per
 * lookup, paid to account #0, through the facilitator stand-in at `facilitatorUrl`. The asset's
 * decimals and symbol come from the deployment file. `transferMethod` unset: the attestor's default.
 */
export const paidLookupEnv = (
  chain: DevnetChain,
  facilitatorUrl: string,
  transferMethod?: "permit2-exact" | "permit2"
): Record<string, string> => {
  const settlement = Object.entries(chain.deployment.assets).find(
    ([asset]) => asset.toLowerCase() === chain.deployment.settlementAsset.toLowerCase()
  )?.[1]
  if (settlement === undefined) throw new Error("the devnet deployment does not list its settlement asset")
  return {
    HANDLE_LOOKUP_MODE: "paid",
    FACILITATOR_URL: facilitatorUrl,
    HANDLE_LOOKUP_PRICE: parseUnits(DEVNET_LOOKUP_PRICE, settlement.decimals).toString(),
    HANDLE_LOOKUP_PAY_TO: devnetAccount(DEVNET_FACILITATOR_ACCOUNT).address,
    ...(transferMethod === undefined ? {} : { HANDLE_LOOKUP_TRANSFER_METHOD: transferMethod })
  }
}

export interface DevnetFile extends DevnetDeployment {
  readonly rpcUrl: string
  readonly relayerUrl: string
  readonly attestorUrl: string
  /** The stand-ins of the outside world (OAuth providers, handle directories), docs/protocol.md §9. */
  readonly doublesUrl?: string
  /** The x402 facilitator stand-in of paid handle lookups, docs/protocol.md §9. */
  readonly facilitatorUrl?: string
  readonly hintPublicKey: Hex
}

export interface DevnetChain {
  readonly anvil: AnvilInstance
  readonly deployment: DevnetDeployment
  readonly dir: string
  readonly deploymentFile: string
  readonly denyListFile: string
  readonly hintPublicKey: Hex
  readonly sampleBeneficiaryId: Hex
}

export class DevnetError extends Data.TaggedError("DevnetError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

const privateKeyOf = (index: number): Hex => {
  const key = devnetAccount(index).getHdKey().privateKey
  if (key === null) throw new Error(`no private key for mnemonic account #${index}`)
  return `0x${Buffer.from(key).toString("hex")}`
}

export const devnetKeys = {
  relayer: privateKeyOf(devnetRoles.relayer),
  attestor: privateKeyOf(devnetRoles.attestor)
} as const

export interface DevnetChainOptions {
  /** Where deployment.json, the deny list and the services' data live; wiped at start. */
  readonly dir: string
  /** 0 or absent: a free port. */
  readonly rpcPort?: number
}

/** Anvil with everything deployed; stopped when the scope closes. */
export const devnetChain = (
  options: DevnetChainOptions
): Effect.Effect<DevnetChain, DevnetError | AnvilStartError, Scope.Scope> =>
  Effect.gen(function* () {
    yield* Effect.tryPromise({
      try: async () => {
        await rm(options.dir, { recursive: true, force: true })
        await mkdir(options.dir, { recursive: true })
      },
      catch: (cause) => new DevnetError({ message: `cannot prepare ${options.dir}`, cause })
    })
    const anvil = yield* startAnvil(options.rpcPort ? { port: options.rpcPort } : {})
    return yield* Effect.tryPromise({
      try: async () => {
        const deployment = await deployDevnet(anvil.rpcUrl)
        await mintSampleBalances(anvil.rpcUrl, deployment)
        await installFarcasterRegistries(anvil.rpcUrl)
        await installX402Contracts(anvil.rpcUrl)
        const hintPublicKey = hintPublicKeyOf(DEVNET_HINT_PRIVATE_KEY)
        const hint = makeHint(
          Buffer.from(DEVNET_PEPPER.slice(2), "hex"),
          DEVNET_SAMPLE_USER.platformId,
          DEVNET_SAMPLE_USER.userId,
          keccak256(stringToHex("devnet sample launch nonce"))
        )
        const sampleBeneficiaryId = hintBeneficiaryId(hint)
        await launchSampleToken(anvil.rpcUrl, deployment, {
          beneficiaryId: sampleBeneficiaryId,
          beneficiaryHint: encodeBeneficiaryHint([sealHint(hintPublicKey, hint)])
        })
        const denyListFile = join(options.dir, "deny-list.txt")
        await writeFile(denyListFile, `${DEVNET_DENY_LIST.join("\n")}\n`)
        return {
          anvil,
          deployment,
          dir: options.dir,
          deploymentFile: join(options.dir, "deployment.json"),
          denyListFile,
          hintPublicKey,
          sampleBeneficiaryId
        }
      },
      catch: (cause) => new DevnetError({ message: "deploying the reference contracts failed", cause })
    })
  })

export interface ServiceUrls {
  readonly relayerUrl: string
  readonly attestorUrl: string
  readonly doublesUrl?: string | undefined
  readonly facilitatorUrl?: string | undefined
}

/** Writes `deployment.json`: the deployment file plus what a client needs to reach the devnet. */
export const writeDevnetFile = (chain: DevnetChain, urls: ServiceUrls) =>
  Effect.tryPromise({
    try: () => {
      const file: DevnetFile = {
        ...chain.deployment,
        rpcUrl: chain.anvil.rpcUrl,
        relayerUrl: urls.relayerUrl,
        attestorUrl: urls.attestorUrl,
        ...(urls.doublesUrl === undefined ? {} : { doublesUrl: urls.doublesUrl }),
        ...(urls.facilitatorUrl === undefined ? {} : { facilitatorUrl: urls.facilitatorUrl }),
        hintPublicKey: chain.hintPublicKey
      }
      return writeFile(chain.deploymentFile, `${JSON.stringify(file, null, 2)}\n`)
    },
    catch: (cause) => new DevnetError({ message: `cannot write ${chain.deploymentFile}`, cause })
  })

/**
 * The devnet attestor's veto watcher vetoes (docs/protocol.md §9): with `AUTO_VETO` on, a pending
 * bind it did not attest, or one to an owner a contest ruled out, gets `vetoBind`, sent and paid
 * for by the attestor's own key, mnemonic account #2.
 */
export const autoVetoEnv: Record<string, string> = { AUTO_VETO: "true" }

/**
 * The devnet attestor's clock is the chain's (docs/protocol.md §9 "The devnet's clock"): a test or
 * example that skips a bind delay with `evm_increaseTime` leaves the chain ahead of this machine,
 * and deadlines signed after that must still lie ahead on chain.
 */
export const devnetClockEnv: Record<string, string> = { DEVNET_CHAIN_CLOCK: "true" }

/** The relayer's settings on the devnet, as environment variables. */
export const relayerEnv = (chain: DevnetChain, port: number): Record<string, string> => ({
  RPC_URL: chain.anvil.rpcUrl,
  DEPLOYMENT_FILE: chain.deploymentFile,
  RELAYER_PRIVATE_KEY: devnetKeys.relayer,
  // The devnet's WETH stands in for the wrapped native coin, so the DEX price source works too.
  ...(chain.deployment.tokens.WETH !== undefined ? { WRAPPED_NATIVE: chain.deployment.tokens.WETH } : {}),
  METRICS_TOKEN: DEVNET_METRICS_TOKEN,
  DENY_LIST: chain.denyListFile,
  DATA_DIR: join(chain.dir, "data", "relayer"),
  HOST: "127.0.0.1",
  PORT: String(port)
})

/** The attestor's settings on the devnet, as environment variables. */
export const attestorEnv = (chain: DevnetChain, port: number): Record<string, string> => ({
  RPC_URL: chain.anvil.rpcUrl,
  DEPLOYMENT_FILE: chain.deploymentFile,
  ATTESTOR_PRIVATE_KEY: devnetKeys.attestor,
  HINT_PRIVATE_KEY: DEVNET_HINT_PRIVATE_KEY,
  PEPPER: DEVNET_PEPPER,
  MESSENGER_BOT_TOKEN: DEVNET_MESSENGER_BOT_TOKEN,
  METRICS_TOKEN: DEVNET_METRICS_TOKEN,
  DATA_DIR: join(chain.dir, "data", "attestor"),
  HOST: "127.0.0.1",
  PORT: String(port)
})

/** Runs a service layer with the given settings instead of the process environment. */
export const withSettings = <A, E, R>(layer: Layer.Layer<A, E, R>, env: Record<string, string>) =>
  layer.pipe(Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))))

/**
 * The first port the kernel hands out for outgoing connections and for `listen(0)`: Linux reads it
 * from `ip_local_port_range` (32768 by default); macOS and Windows start at 49152.
 */
const ephemeralFloor = (): number => {
  try {
    const floor = Number.parseInt(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8"), 10)
    return Number.isInteger(floor) && floor > 1024 ? floor : 32768
  } catch {
    return process.platform === "linux" ? 32768 : 49152
  }
}

/**
 * Chosen ports come from just below the ephemeral range. Between the choice and the service's
 * listen, connections are opened (to anvil, to the database) whose local ports the kernel takes
 * from the ephemeral range, as it takes `listen(0)` ports; none of them can take a port below it.
 */
const chosenPorts = (() => {
  const top = ephemeralFloor() - 1
  const bottom = Math.max(1024, top - 12_287)
  const span = top - bottom + 1
  // A random start per process keeps processes that choose ports at once apart.
  let next = Math.floor(Math.random() * span)
  return { take: () => bottom + (next++ % span) }
})()

const isPortTaken = (cause: unknown): boolean =>
  typeof cause === "object" &&
  cause !== null &&
  "code" in cause &&
  (cause.code === "EADDRINUSE" || cause.code === "EACCES")

const probeLoopbackPort = (port: number) =>
  Effect.async<number, DevnetError>((resume) => {
    const server = createServer()
    server.once("error", (cause) =>
      resume(Effect.fail(new DevnetError({ message: `port ${port} is not free`, cause })))
    )
    server.listen({ port, host: "127.0.0.1", exclusive: true }, () => {
      server.close(() => resume(Effect.succeed(port)))
    })
  })

/**
 * A free loopback port, chosen up front so the deployment file can name the services' URLs; outside
 * the ephemeral range, so no connection opened before the service listens can be holding it.
 */
export const freeLoopbackPort: Effect.Effect<number, DevnetError> = Effect.suspend(() =>
  probeLoopbackPort(chosenPorts.take())
).pipe(
  Effect.retry({ times: 64, while: (error) => isPortTaken(error.cause) }),
  Effect.mapError((error) =>
    isPortTaken(error.cause) ? new DevnetError({ message: "no free port", cause: error.cause }) : error
  )
)

export interface RunningDevnet extends DevnetChain, ServiceUrls {
  /** The stand-in providers, when this devnet runs an attestor. */
  readonly standIns?: OAuthStandIns | undefined
  /** The facilitator stand-in of its paid lookups. */
  readonly facilitator?: FacilitatorStandIn | undefined
}

export class Devnet extends Context.Tag("Devnet")<Devnet, RunningDevnet>() {
  /**
   * A private devnet for end-to-end tests: anvil and the contracts, with the relayer and the
   * attestor running in this process on free ports, all stopped when the layer's scope closes.
   */
  static readonly layer = (options: DevnetChainOptions) =>
    Layer.scoped(
      Devnet,
      Effect.gen(function* () {
        const chain = yield* devnetChain(options)
        const relayerPort = yield* freeLoopbackPort
        const attestorPort = yield* freeLoopbackPort
        const attestorUrl = `http://127.0.0.1:${attestorPort}`
        const standIns = yield* devnetStandIns(attestorUrl)
        const facilitator = yield* devnetFacilitator(chain)
        const urls = {
          relayerUrl: `http://127.0.0.1:${relayerPort}`,
          attestorUrl,
          doublesUrl: standIns.url,
          facilitatorUrl: facilitator.url
        }
        yield* writeDevnetFile(chain, urls)
        const scope = yield* Effect.scope
        yield* Layer.buildWithScope(withSettings(Relayer.layer, relayerEnv(chain, relayerPort)), scope)
        yield* Layer.buildWithScope(
          withSettings(Attestor.layer, {
            ...attestorEnv(chain, attestorPort),
            ...standInEnv(standIns, attestorUrl),
            ...paidLookupEnv(chain, facilitator.url, DEVNET_TRANSFER_METHOD),
            ...autoVetoEnv
          }),
          scope
        )
        return { ...chain, ...urls, standIns, facilitator }
      })
    )
}
