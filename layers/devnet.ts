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
import {
  ConfigProvider,
  Context,
  Data,
  Effect,
  ExecutionStrategy,
  Exit,
  Layer,
  Option,
  Scope,
  SynchronizedRef
} from "effect"
import type { Address, Hex } from "viem"
import { createTestClient, http, keccak256, parseEther, parseUnits, stringToHex } from "viem"
import { privateKeyToAccount } from "viem/accounts"
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

type OAuthApps = Record<StandInPlatform, { readonly clientId: string; readonly clientSecret: string }>

/** The most members a devnet committee has (docs/protocol.md §9 "A committee devnet"). */
export const DEVNET_MAX_ATTESTORS = 5

/**
 * One member of the devnet's attestor committee (docs/protocol.md §9 "A committee devnet"): its
 * fixed development keys, public by design. Member 1 is the single-attestor devnet's attestor.
 */
export interface DevnetMember {
  /** 1-based, the order of deployment.json's `attestors`. */
  readonly member: number
  readonly address: Address
  readonly signingPrivateKey: Hex
  readonly hintPrivateKey: Hex
  readonly hintPublicKey: Hex
  readonly pepper: Hex
  /** Its own OAuth app per platform at the stand-in providers. */
  readonly oauthApps: OAuthApps
}

const derivedSecret = (text: string): Hex => keccak256(stringToHex(text))

/** Member `k`'s OAuth apps: member 1 keeps the devnet's, the others get their own client ids. */
const memberOAuthApps = (k: number): OAuthApps =>
  k === 1
    ? DEVNET_OAUTH_APPS
    : {
        microblog: { clientId: `devnet-microblog-client-${k}`, clientSecret: `devnet-microblog-secret-${k}` },
        codehost: { clientId: `devnet-codehost-client-${k}`, clientSecret: `devnet-codehost-secret-${k}` },
        community: { clientId: `devnet-community-client-${k}`, clientSecret: `devnet-community-secret-${k}` }
      }

/**
 * Member `k` (1..5) of the devnet committee. Member 1: mnemonic account #2 and the devnet's hint key
 * and pepper. Members 2..5: keys derived from fixed phrases, never mnemonic accounts (tests use #3..#9).
 */
export const devnetMember = (k: number): DevnetMember => {
  if (!Number.isInteger(k) || k < 1 || k > DEVNET_MAX_ATTESTORS)
    throw new Error(`a devnet committee member is 1 to ${DEVNET_MAX_ATTESTORS}, not ${k}`)
  const signingPrivateKey = k === 1 ? devnetKeys.attestor : derivedSecret(`fee-vault devnet attestor ${k}`)
  const hintPrivateKey =
    k === 1 ? DEVNET_HINT_PRIVATE_KEY : derivedSecret(`fee-vault devnet attestor ${k} hint key`)
  return {
    member: k,
    address: privateKeyToAccount(signingPrivateKey).address,
    signingPrivateKey,
    hintPrivateKey,
    hintPublicKey: hintPublicKeyOf(hintPrivateKey),
    pepper: k === 1 ? DEVNET_PEPPER : derivedSecret(`fee-vault devnet attestor ${k} pepper`),
    oauthApps: memberOAuthApps(k)
  }
}

/** Where a member's OAuth callbacks go: its own PUBLIC_URL. */
export interface MemberUrl {
  readonly member: number
  readonly url: string
}

const appsAt = (platform: StandInPlatform, members: ReadonlyArray<MemberUrl>) =>
  members.map(({ member, url }) => ({
    ...devnetMember(member).oauthApps[platform],
    redirectUri: `${url}/v1/oauth/${platform}/callback`
  }))

/**
 * The stand-in OAuth providers and handle directories of the devnet (docs/protocol.md §9), with each
 * member's apps registered for callbacks at its URL (a string: member 1 at that URL); closed with
 * the scope.
 */
export const devnetStandIns = (members: string | ReadonlyArray<MemberUrl>, port = 0) => {
  const list = typeof members === "string" ? [{ member: 1, url: members }] : members
  return oauthStandIns({
    host: "127.0.0.1",
    port,
    clients: {
      microblog: appsAt("microblog", list),
      codehost: appsAt("codehost", list),
      community: appsAt("community", list)
    }
  })
}

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
 * The attestor's settings for the stand-ins: member `member`'s OAuth apps of `platforms` (every
 * one by default), their callbacks at `attestorUrl`.
 */
export const standInEnv = (
  standIns: OAuthStandIns,
  attestorUrl: string,
  platforms: ReadonlyArray<StandInPlatform> = standInPlatforms,
  member = 1
): Record<string, string> => {
  const apps = devnetMember(member).oauthApps
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
    const endpoints = standIns.endpoints(platform, apps[platform].clientId)
    env[`${prefix}_CLIENT_ID`] = apps[platform].clientId
    env[`${prefix}_CLIENT_SECRET`] = apps[platform].clientSecret
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

/**
 * The devnet's wallet page for the chain's committee (every member at its URL, member 1 first, and
 * the threshold), the relayer and the chain's RPC; closed with the scope.
 */
export const devnetWalletPage = (
  chain: DevnetChain,
  urls: { readonly attestorUrls: ReadonlyArray<string>; readonly relayerUrl: string },
  port = 0
) =>
  walletPage({
    attestors: chain.members.map((m, i) => ({
      url: urls.attestorUrls[i] ?? "",
      address: m.address,
      hintPublicKey: m.hintPublicKey
    })),
    threshold: chain.attestorThreshold,
    relayerUrl: urls.relayerUrl,
    rpcUrl: chain.anvil.rpcUrl,
    port,
    host: "127.0.0.1",
    messengerBotToken: DEVNET_MESSENGER_BOT_TOKEN
  })

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

/** A committee member as deployment.json lists it (docs/protocol.md §9 "A committee devnet"). */
export interface DevnetFileAttestor {
  readonly url: string
  readonly address: Address
  readonly hintPublicKey: Hex
}

export interface DevnetFile extends DevnetDeployment {
  readonly rpcUrl: string
  readonly relayerUrl: string
  /** The first member's URL. */
  readonly attestorUrl: string
  /** How many members' signatures a bind needs. */
  readonly attestorThreshold: number
  /** Every member, member 1 first. */
  readonly attestors: ReadonlyArray<DevnetFileAttestor>
  /** The stand-ins of the outside world (OAuth providers, handle directories), docs/protocol.md §9. */
  readonly doublesUrl?: string
  /** The x402 facilitator stand-in of paid handle lookups, docs/protocol.md §9. */
  readonly facilitatorUrl?: string
  /** The wallet page's origin, where logins redirect (`<walletUrl>/after-login`), docs/protocol.md §9. */
  readonly walletUrl?: string
  /** The first member's hint key. */
  readonly hintPublicKey: Hex
}

export interface DevnetChain {
  readonly anvil: AnvilInstance
  readonly deployment: DevnetDeployment
  readonly dir: string
  readonly deploymentFile: string
  readonly denyListFile: string
  /** The first member's hint key. */
  readonly hintPublicKey: Hex
  readonly sampleBeneficiaryId: Hex
  /** The attestor committee registered on the vault, member 1 first. */
  readonly members: ReadonlyArray<DevnetMember>
  /** The vault's attestor threshold. */
  readonly attestorThreshold: number
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
  /** Committee members, 1 to 5 (default 1). */
  readonly attestors?: number
  /** Signatures a bind needs, 1 to `attestors` (default 1). */
  readonly threshold?: number
}

/**
 * Why a committee size and threshold are refused, or undefined when they are fine
 * (docs/protocol.md §9 "A committee devnet").
 */
export const committeeRefusal = (attestors: number, threshold: number): string | undefined => {
  if (!Number.isInteger(attestors) || attestors < 1 || attestors > DEVNET_MAX_ATTESTORS)
    return `the committee has 1 to ${DEVNET_MAX_ATTESTORS} attestors, not ${attestors}`
  if (!Number.isInteger(threshold) || threshold < 1 || threshold > attestors)
    return `the attestor threshold is 1 to ${attestors} (the committee's size), not ${threshold}`
  return undefined
}

/** What members 2..5 hold to pay for their vetoes (AUTO_VETO), as much as anvil's accounts. */
const MEMBER_BALANCE = parseEther("10000")

/** Gives members 2..N ETH for their vetoes; member 1 is mnemonic account #2, funded already. */
const fundMembers = async (rpcUrl: string, members: ReadonlyArray<DevnetMember>) => {
  const client = createTestClient({ mode: "anvil", transport: http(rpcUrl) })
  for (const member of members.slice(1))
    await client.setBalance({ address: member.address, value: MEMBER_BALANCE })
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
    const attestors = options.attestors ?? 1
    const attestorThreshold = options.threshold ?? 1
    const refusal = committeeRefusal(attestors, attestorThreshold)
    if (refusal !== undefined) return yield* new DevnetError({ message: refusal })
    const members = Array.from({ length: attestors }, (_, i) => devnetMember(i + 1))
    const anvil = yield* startAnvil(options.rpcPort ? { port: options.rpcPort } : {})
    return yield* Effect.tryPromise({
      try: async () => {
        const deployment = await deployDevnet(anvil.rpcUrl, {
          attestors: members.map((m) => m.address),
          attestorThreshold: BigInt(attestorThreshold)
        })
        await fundMembers(anvil.rpcUrl, members)
        await mintSampleBalances(anvil.rpcUrl, deployment)
        await installFarcasterRegistries(anvil.rpcUrl)
        await installX402Contracts(anvil.rpcUrl)
        const hintPublicKey = members[0]!.hintPublicKey
        const hint = makeHint(
          Buffer.from(DEVNET_PEPPER.slice(2), "hex"),
          DEVNET_SAMPLE_USER.platformId,
          DEVNET_SAMPLE_USER.userId,
          keccak256(stringToHex("devnet sample launch nonce"))
        )
        const sampleBeneficiaryId = hintBeneficiaryId(hint)
        await launchSampleToken(anvil.rpcUrl, deployment, {
          beneficiaryId: sampleBeneficiaryId,
          // One envelope per member, so each member's hint index finds it (docs/protocol.md §6).
          beneficiaryHint: encodeBeneficiaryHint(members.map((m) => sealHint(m.hintPublicKey, hint)))
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
          sampleBeneficiaryId,
          members,
          attestorThreshold
        }
      },
      catch: (cause) => new DevnetError({ message: "deploying the reference contracts failed", cause })
    })
  })

export interface ServiceUrls {
  readonly relayerUrl: string
  /** Member 1's URL. */
  readonly attestorUrl: string
  /** Every member's URL, member 1 first; absent: `[attestorUrl]` on a single-attestor devnet. */
  readonly attestorUrls?: ReadonlyArray<string> | undefined
  readonly doublesUrl?: string | undefined
  readonly facilitatorUrl?: string | undefined
  readonly walletUrl?: string | undefined
}

/** Writes `deployment.json`: the deployment file plus what a client needs to reach the devnet. */
export const writeDevnetFile = (chain: DevnetChain, urls: ServiceUrls) =>
  Effect.tryPromise({
    try: () => {
      const attestorUrls = urls.attestorUrls ?? [urls.attestorUrl]
      if (attestorUrls.length !== chain.members.length || attestorUrls[0] !== urls.attestorUrl)
        throw new Error("deployment.json needs one URL per committee member, member 1's first")
      const file: DevnetFile = {
        ...chain.deployment,
        rpcUrl: chain.anvil.rpcUrl,
        relayerUrl: urls.relayerUrl,
        attestorUrl: urls.attestorUrl,
        attestorThreshold: chain.attestorThreshold,
        attestors: chain.members.map((m, i) => ({
          url: attestorUrls[i]!,
          address: m.address,
          hintPublicKey: m.hintPublicKey
        })),
        ...(urls.doublesUrl === undefined ? {} : { doublesUrl: urls.doublesUrl }),
        ...(urls.facilitatorUrl === undefined ? {} : { facilitatorUrl: urls.facilitatorUrl }),
        ...(urls.walletUrl === undefined ? {} : { walletUrl: urls.walletUrl }),
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

/** Member `k`'s database directory: `data/attestor` for member 1, `data/attestor-<k>` for the others. */
export const memberDataDir = (chain: DevnetChain, k: number): string =>
  join(chain.dir, "data", k === 1 ? "attestor" : `attestor-${k}`)

/**
 * Member `member`'s settings on the devnet (member 1 by default: the single-attestor devnet's
 * attestor), as environment variables. Every member shares the messenger bot token: the stand-in
 * widget signs for one bot, and a login at each member is the same user's (docs/protocol.md §9).
 */
export const attestorEnv = (chain: DevnetChain, port: number, member = 1): Record<string, string> => {
  const keys = devnetMember(member)
  return {
    RPC_URL: chain.anvil.rpcUrl,
    DEPLOYMENT_FILE: chain.deploymentFile,
    ATTESTOR_PRIVATE_KEY: keys.signingPrivateKey,
    HINT_PRIVATE_KEY: keys.hintPrivateKey,
    PEPPER: keys.pepper,
    MESSENGER_BOT_TOKEN: DEVNET_MESSENGER_BOT_TOKEN,
    METRICS_TOKEN: DEVNET_METRICS_TOKEN,
    DATA_DIR: memberDataDir(chain, member),
    HOST: "127.0.0.1",
    PORT: String(port)
  }
}

/**
 * How far above the devnet's own relayer and first attestor the services of a checkout listen
 * (`npm run devnet:relayer`, `devnet:attestor`): 8090 and 8091 on the default ports.
 */
export const CHECKOUT_PORT_OFFSET = 10

/**
 * The relayer's key of `npm run devnet:relayer`: mnemonic account #9, not the devnet relayer's #1,
 * since two relayers on one key but two databases would take each other's nonces.
 */
const CHECKOUT_RELAYER_ACCOUNT = 9

const envFileText = (title: string, settings: Record<string, string>): string =>
  [
    `# ${title}`,
    '# Written by `npm run devnet` for this run (docs/operations.md "A service from a checkout"): the',
    "# running devnet's RPC, deployment file, wallet page and ports. Every value is a public development",
    "# value of the devnet (docs/protocol.md §9): never use one elsewhere. The environment wins over it.",
    ...Object.entries(settings).map(([name, value]) => `${name}=${value}`),
    ""
  ].join("\n")

/**
 * The settings files `npm run devnet:relayer` and `npm run devnet:attestor` read
 * (`<dir>/relayer.env`, `<dir>/attestor.env`): the built services beside the running devnet, on its
 * RPC and deployment file, at its relayer's and first attestor's ports plus
 * `CHECKOUT_PORT_OFFSET`, the attestor with member 1's keys and pepper (it opens the same hints), its
 * logins sent back to the devnet's wallet page at `walletOrigin`.
 */
export const writeCheckoutSettings = (
  chain: DevnetChain,
  ports: { readonly relayer: number; readonly attestor: number },
  walletOrigin: string
) =>
  Effect.tryPromise({
    try: async () => {
      const relayerPort = ports.relayer + CHECKOUT_PORT_OFFSET
      const attestorPort = ports.attestor + CHECKOUT_PORT_OFFSET
      const relayer = {
        ...relayerEnv(chain, relayerPort),
        RELAYER_PRIVATE_KEY: privateKeyOf(CHECKOUT_RELAYER_ACCOUNT),
        DATA_DIR: join(chain.dir, "data", "checkout-relayer"),
        LOG_LEVEL: "info"
      }
      const attestor = {
        ...attestorEnv(chain, attestorPort),
        PUBLIC_URL: `http://127.0.0.1:${attestorPort}`,
        REDIRECT_ALLOWLIST:
          walletPageEnv(walletOrigin).attestor.REDIRECT_ALLOWLIST ?? DEVNET_REDIRECT_ALLOWLIST,
        ...devnetClockEnv,
        DATA_DIR: join(chain.dir, "data", "checkout-attestor"),
        LOG_LEVEL: "info"
      }
      await writeFile(
        join(chain.dir, "relayer.env"),
        envFileText("A relayer from this checkout beside the devnet.", relayer)
      )
      await writeFile(
        join(chain.dir, "attestor.env"),
        envFileText("An attestor from this checkout beside the devnet.", attestor)
      )
    },
    catch: (cause) => new DevnetError({ message: `cannot write the settings files in ${chain.dir}`, cause })
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

/** A committee member running in this process (docs/protocol.md §9 "A committee devnet"). */
export interface RunningMember extends DevnetMember {
  readonly url: string
  /** Stops the member (its database stays); nothing when it is stopped already. */
  readonly stop: Effect.Effect<void>
  /** Starts the member again on its database, at the same URL; nothing when it runs already. */
  readonly start: Effect.Effect<void, DevnetError>
}

export interface RunningDevnet extends DevnetChain, ServiceUrls {
  /** The stand-in providers, when this devnet runs an attestor. */
  readonly standIns?: OAuthStandIns | undefined
  /** The facilitator stand-in of its paid lookups. */
  readonly facilitator?: FacilitatorStandIn | undefined
  /** Every member, running, member 1 first (one on a single-attestor devnet), when it runs attestors. */
  readonly running?: ReadonlyArray<RunningMember> | undefined
}

export interface DevnetLayerOptions extends DevnetChainOptions {
  /** Settings every attestor runs with on top of the devnet's (e.g. `VETO_STAGGER_SECONDS`). */
  readonly attestorSettings?: Record<string, string>
  /**
   * The origin of a wallet page (src/devnet/walletPage.ts) that talks to this devnet: the relayer
   * and every member run with `walletPageEnv(walletOrigin)`.
   */
  readonly walletOrigin?: string
}

/**
 * An attestor in this process under a scope of its own, forked from `parent`, so that it can stop
 * and start again on the same database while the devnet runs on.
 */
const restartableAttestor = (parent: Scope.Scope, settings: Record<string, string>) =>
  Effect.gen(function* () {
    const current = yield* SynchronizedRef.make(Option.none<Scope.CloseableScope>())
    const stop = SynchronizedRef.updateEffect(current, (open) =>
      Option.isSome(open)
        ? Effect.as(Scope.close(open.value, Exit.void), Option.none())
        : Effect.succeed(open)
    )
    const start = SynchronizedRef.updateEffect(current, (open) =>
      Option.isSome(open)
        ? Effect.succeed(open)
        : Effect.gen(function* () {
            const scope = yield* Scope.fork(parent, ExecutionStrategy.sequential)
            yield* Layer.buildWithScope(withSettings(Attestor.layer, settings), scope).pipe(
              Effect.tapErrorCause(() => Scope.close(scope, Exit.void)),
              Effect.mapError((cause) => new DevnetError({ message: "an attestor failed to start", cause }))
            )
            return Option.some(scope)
          })
    )
    yield* start
    return { stop, start }
  })

export class Devnet extends Context.Tag("Devnet")<Devnet, RunningDevnet>() {
  /**
   * A private devnet for end-to-end tests: anvil and the contracts, with the relayer and the
   * attestor (or every member of a committee: `attestors`, `threshold`) running in this process
   * on free ports, all stopped when the layer's scope closes.
   */
  static readonly layer = (options: DevnetLayerOptions) =>
    Layer.scoped(
      Devnet,
      Effect.gen(function* () {
        const chain = yield* devnetChain(options)
        const relayerPort = yield* freeLoopbackPort
        const memberUrls: Array<MemberUrl> = []
        for (const { member } of chain.members)
          memberUrls.push({ member, url: `http://127.0.0.1:${yield* freeLoopbackPort}` })
        const attestorUrl = memberUrls[0]!.url
        const standIns = yield* devnetStandIns(memberUrls)
        const facilitator = yield* devnetFacilitator(chain)
        const urls = {
          relayerUrl: `http://127.0.0.1:${relayerPort}`,
          attestorUrl,
          attestorUrls: memberUrls.map((m) => m.url),
          doublesUrl: standIns.url,
          facilitatorUrl: facilitator.url,
          walletUrl: options.walletOrigin
        }
        yield* writeDevnetFile(chain, urls)
        const scope = yield* Effect.scope
        const wallet = options.walletOrigin === undefined ? undefined : walletPageEnv(options.walletOrigin)
        yield* Layer.buildWithScope(
          withSettings(Relayer.layer, { ...relayerEnv(chain, relayerPort), ...wallet?.relayer }),
          scope
        )
        const running: Array<RunningMember> = []
        for (const { member, url } of memberUrls) {
          const controls = yield* restartableAttestor(scope, {
            ...attestorEnv(chain, Number(new URL(url).port), member),
            ...standInEnv(standIns, url, undefined, member),
            ...paidLookupEnv(chain, facilitator.url, DEVNET_TRANSFER_METHOD),
            ...autoVetoEnv,
            // As `npm run devnet`: deadlines by the chain's clock, which a skipped bind delay moves
            // ahead (docs/protocol.md §9 "The devnet's clock"), so the examples run again on it.
            ...devnetClockEnv,
            ...wallet?.attestor,
            ...options.attestorSettings
          })
          running.push({ ...devnetMember(member), url, ...controls })
        }
        return { ...chain, ...urls, standIns, facilitator, running }
      })
    )
}
