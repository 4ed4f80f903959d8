/**
 * Every attestor setting (docs/attestor.md §8 and docs/protocol.md §8), read once at start-up.
 */
import { Config, ConfigError, Context, Effect, Either, Layer, Option, Redacted } from "effect"
import { type Address, getAddress } from "viem"
import type { OAuthCallbackPlatform } from "../../schema/attestor.js"
import type { Deployment } from "../../schema/deployment.js"
import { type OAuthApp, oauthProviders } from "../attestor/logins/oauth/providers.js"
import { allowListEntry } from "../attestor/logins/oauth/redirectAllowList.js"
import type { ResolverSettings } from "../attestor/lookups/handleResolvers.js"
import { DEVNET_CHAIN_ID } from "../chain/DevnetChainClock.js"
import type { Signer } from "../keys/Signer.js"
import { requiredSecretText } from "./secrets.js"
import {
  address,
  addressOr,
  allSettings,
  type IndexerTuningSettings,
  indexerTuningSettings,
  oneOf,
  optionalDeployment,
  optionalSecret,
  positiveInt,
  privateKey,
  type ServiceSettings,
  serviceSettings,
  type TxSenderSettings,
  txSenderSettings
} from "./settings.js"
import { signerSetting } from "./signer.js"

/** The modes docs/attestor.md §2 names for `HANDLE_LOOKUP_MODE`. */
export type HandleLookupMode = "paid" | "off" | "free"

/**
 * Why a `HANDLE_LOOKUP_MODE` cannot be served, if it cannot. `free` is for local development only
 * (docs/attestor.md §2): refused on chain id 56, and refused while the chain id is only known from the RPC
 * (set `CHAIN_ID` or a deployment file), since start-up could not tell.
 */
export const handleLookupModeRefusal = (
  mode: HandleLookupMode,
  chainId: Option.Option<number>
): string | undefined => {
  if (mode === "free" && Option.contains(chainId, 56))
    return "free handle lookups are for local development and refused on chain id 56"
  if (mode === "free" && Option.isNone(chainId))
    return "free handle lookups need the chain id at start-up (CHAIN_ID or a deployment file), to refuse chain id 56"
  return undefined
}

export interface AttestorSettingsShape extends ServiceSettings, IndexerTuningSettings, TxSenderSettings {
  readonly deployment: Option.Option<Deployment>
  readonly vault: Address
  readonly indexerStartBlock: number
  /** The vault's settlement asset (the account projection's balances need it). */
  readonly settlementAsset: Address
  /**
   * Signs `BindOwner`, `PublicHandle`, commitments and vetoes; must be an attestor of the vault
   * (`ATTESTOR_SIGNER` and its backend's settings, src/config/signer.ts).
   */
  readonly signingKey: Signer
  /** Opens the hint envelopes addressed to this attestor. */
  readonly hintKey: Redacted.Redacted<`0x${string}`>
  /** HMAC key of `attestorSalt`; never leaves the process. */
  readonly pepper: Redacted.Redacted<Uint8Array>
  readonly rateLimitBurst: number
  readonly rateLimitPerMinute: number
  readonly oauthStateTtlSeconds: number
  /** Live OAuth and fedsocial states one client address may hold (src/attestor/logins/oauth/OAuthStates.ts). */
  readonly oauthStatesPerClient: number
  /** Live OAuth and fedsocial states of all clients together. */
  readonly oauthStatesMax: number
  readonly sessionTtlSeconds: number
  readonly bindDeadlineSeconds: number
  /** The veto watcher sends `vetoBind` for unattested proposals (else it only counts them). */
  readonly autoVeto: boolean
  /** The veto watcher also judges proposals of ids without a hint for this attestor. */
  readonly vetoUnknownIds: boolean
  /**
   * `VETO_RULE`: `committee` spares a proposal this attestor was not asked for (docs/attestor.md
   * "The committee"); `strict` vetoes every proposal it did not attest (the specs' rule).
   */
  readonly vetoRule: "committee" | "strict"
  /** `VETO_STAGGER_SECONDS`: the step between the veto slots of committee members (0: none). */
  readonly vetoStaggerSeconds: number
  readonly oauthGetStart: boolean
  /**
   * Where a login may redirect back to, each `scheme://host[:port]/path` (an entry given without a
   * path is `/`); a redirect must equal one (src/attestor/logins/oauth/redirectAllowList.ts).
   */
  readonly redirectAllowList: ReadonlyArray<string>
  /**
   * `LOGIN_CHALLENGE`: `required` refuses a redirect login (microblog, codehost, community) started
   * without a `loginChallenge`; `optional` takes the specs' wire unchanged (docs/protocol.md §10).
   */
  readonly loginChallenge: "required" | "optional"
  /** `off` (the default), `free` (local development) or `paid` (x402, `paidLookup`). */
  readonly handleLookupMode: HandleLookupMode
  /** Where handles are resolved (`free` and `paid` modes). */
  readonly handleResolvers: ResolverSettings
  /** What a lookup costs and who settles it: present exactly when the mode is `paid`. */
  readonly paidLookup: Option.Option<PaidLookupSettings>
  /**
   * Bot token of the messenger login widget: the widget's hash is keyed with its SHA-256. None:
   * no messenger login (`/v1/oauth/messenger/verify` answers 400 `unsupported`).
   */
  readonly messengerBotToken: Option.Option<Redacted.Redacted>
  /** A widget payload whose `auth_date` is older than this is refused. */
  readonly messengerAuthMaxAgeSeconds: number
  /**
   * The OAuth apps of this instance by platform (`<PLATFORM>_CLIENT_ID` and the rest); a platform
   * without a client id is not offered.
   */
  readonly oauthApps: Partial<Readonly<Record<OAuthCallbackPlatform, OAuthApp>>>
  /** Longest wait for each call to an OAuth provider. */
  readonly oauthProviderTimeoutMs: number
  /**
   * Sign In With Farcaster (`FEDSOCIAL_DOMAIN`, `FEDSOCIAL_URI`, `FEDSOCIAL_RPC_URL`,
   * `FEDSOCIAL_ID_REGISTRY`, `FEDSOCIAL_KEY_REGISTRY`, `FEDSOCIAL_CONTRACT_SIGNATURES`,
   * `FEDSOCIAL_CONTRACT_SIGNATURE_GAS`); none without a domain: fedsocial is not offered.
   */
  readonly fedsocial: Option.Option<FedsocialSettings>
  /**
   * The attestor's origin as browsers and providers reach it (`PUBLIC_URL`; default
   * `http://HOST:PORT`, required when HOST is a wildcard such as 0.0.0.0): the OAuth callbacks are `<publicUrl>/v1/oauth/<platform>/callback`.
   */
  readonly publicUrl: string
  /**
   * `DEVNET_CHAIN_CLOCK`: deadlines, sessions and payments by the devnet chain's clock instead of
   * this machine's (src/chain/DevnetChainClock.ts); accepted on the devnet's chain id only.
   */
  readonly devnetChainClock: boolean
}

/** An http(s) URL setting (`{client_id}` may stand in a provider's URL template). */
const httpUrl = (name: string) =>
  Config.string(name).pipe(
    Config.mapOrFail((s) => {
      try {
        const parsed = new URL(s.replace("{client_id}", "client_id"))
        if (parsed.protocol !== "https:" && parsed.protocol !== "http:") throw new Error()
        return Either.right(s)
      } catch {
        return Either.left(ConfigError.InvalidData([], "expected an http(s) URL"))
      }
    })
  )

/** An http(s) URL setting with a default. */
const endpointUrl = (name: string, defaultValue: string) =>
  httpUrl(name).pipe(Config.withDefault(defaultValue))

/**
 * Paid handle lookups (docs/attestor.md §4 "Paid handle lookup flow", docs/protocol.md §10): the price
 * in the settlement asset, who is paid, and the x402 facilitator that verifies and settles.
 */
export interface PaidLookupSettings {
  /** `FACILITATOR_URL`: the facilitator's base URL (`/supported`, `/verify`, `/settle`). */
  readonly facilitatorUrl: string
  /** `FACILITATOR_TOKEN`: sent as `Authorization: Bearer` to a facilitator that wants one. */
  readonly facilitatorToken: Option.Option<Redacted.Redacted>
  /** `FACILITATOR_TIMEOUT_MS`: longest wait for each facilitator request (a settle waits for its block). */
  readonly facilitatorTimeoutMs: number
  /** `HANDLE_LOOKUP_PRICE`: atomic units of the settlement asset. */
  readonly amount: bigint
  /** `HANDLE_LOOKUP_PAY_TO`: who receives the payments. */
  readonly payTo: Address
  /** `HANDLE_LOOKUP_MAX_TIMEOUT_SECONDS`: the x402 `maxTimeoutSeconds` a payment stays good for. */
  readonly maxTimeoutSeconds: number
  /** `HANDLE_LOOKUP_TRANSFER_METHOD`: the dialect the quote speaks; the facilitator must list it. */
  readonly transferMethod: TransferMethod
  /**
   * `HANDLE_LOOKUP_PAYMENT_RETENTION_DAYS`: how long after its deadline a payment that may have
   * moved money stays in `attestor_payments` for accounting (docs/operations.md). Default 30.
   */
  readonly paymentRetentionDays: number
  /**
   * `HANDLE_LOOKUP_ANSWER_RETENTION_SECONDS`: how long a paid lookup's answer is kept for the same
   * payment to replay it (docs/attestor.md §4, replay), then pruned. Default a day.
   */
  readonly answerRetentionSeconds: number
  /** The settlement asset's decimals and symbol, as `/v1/info` shows the price. */
  readonly decimals: number
  readonly symbol: string
  /** The token's EIP-712 name and version for the quote's `extra`; read from the token when unset. */
  readonly assetName: Option.Option<string>
  readonly assetVersion: Option.Option<string>
}

/**
 * How the payer's Permit2 authorization reaches the facilitator (docs/protocol.md §10 "Paid lookups"):
 * `permit2-exact`, the specs' vocabulary, with the facilitator's own signer and spender; or
 * `permit2`, the x402 `exact` scheme of `@x402/evm` and the public facilitators, whose spender is
 * the canonical `x402ExactPermit2Proxy`.
 */
export type TransferMethod = "permit2-exact" | "permit2"

export const TRANSFER_METHODS: ReadonlyArray<TransferMethod> = ["permit2-exact", "permit2"]

/** A positive amount in atomic units, as a decimal string. */
const atomicAmount = (name: string) =>
  Config.string(name).pipe(
    Config.mapOrFail((s) =>
      /^[1-9][0-9]{0,77}$/.test(s) && BigInt(s) < 2n ** 256n
        ? Either.right(BigInt(s))
        : Either.left(ConfigError.InvalidData([], "expected a positive whole number of atomic units"))
    )
  )

/**
 * The paid-lookup settings, read only when `HANDLE_LOOKUP_MODE=paid`: the facilitator, price and
 * payee are required; the asset's decimals and symbol come from the deployment file's `assets`
 * entry for the settlement asset unless set.
 */
const paidLookupSettings = (
  settlementAsset: Address,
  deployment: Option.Option<Deployment>
): Effect.Effect<PaidLookupSettings, ConfigError.ConfigError> =>
  Effect.gen(function* () {
    const listed = Option.flatMap(deployment, (d) =>
      Option.fromNullable(
        Object.entries(d.assets).find(([asset]) => asset.toLowerCase() === settlementAsset.toLowerCase())?.[1]
      )
    )
    const fromDeployment = <A>(name: string, config: Config.Config<A>, value: Option.Option<A>) =>
      Effect.flatMap(Config.option(config), (set) =>
        Option.isSome(set)
          ? Effect.succeed(set.value)
          : Option.match(value, {
              onSome: Effect.succeed,
              onNone: () =>
                Effect.fail(
                  ConfigError.MissingData(
                    [name],
                    `set ${name} or give a DEPLOYMENT_FILE whose assets list the settlement asset`
                  )
                )
            })
      )
    const rest = yield* Config.all({
      facilitatorUrl: httpUrl("FACILITATOR_URL").pipe(Config.map((url) => url.replace(/\/+$/, ""))),
      facilitatorToken: optionalSecret("FACILITATOR_TOKEN"),
      facilitatorTimeoutMs: positiveInt("FACILITATOR_TIMEOUT_MS", 30_000, 300_000),
      amount: atomicAmount("HANDLE_LOOKUP_PRICE"),
      payTo: address("HANDLE_LOOKUP_PAY_TO"),
      maxTimeoutSeconds: positiveInt("HANDLE_LOOKUP_MAX_TIMEOUT_SECONDS", 300, 3_600),
      transferMethod: oneOf("HANDLE_LOOKUP_TRANSFER_METHOD", TRANSFER_METHODS).pipe(
        Config.withDefault<TransferMethod>("permit2-exact")
      ),
      paymentRetentionDays: positiveInt("HANDLE_LOOKUP_PAYMENT_RETENTION_DAYS", 30, 3_650),
      // At least an hour: longer than any quote's maxTimeoutSeconds, so a payer whose answer was
      // lost can always ask again within the authorization's own time.
      answerRetentionSeconds: positiveInt("HANDLE_LOOKUP_ANSWER_RETENTION_SECONDS", 86_400, 2_592_000).pipe(
        Config.validate({
          message: "must be at least 3600 (an hour)",
          validation: (seconds: number) => seconds >= 3_600
        })
      ),
      assetName: Config.option(Config.nonEmptyString("HANDLE_LOOKUP_ASSET_NAME")),
      assetVersion: Config.option(Config.nonEmptyString("HANDLE_LOOKUP_ASSET_VERSION"))
    })
    const decimals = yield* fromDeployment(
      "HANDLE_LOOKUP_ASSET_DECIMALS",
      Config.integer("HANDLE_LOOKUP_ASSET_DECIMALS").pipe(
        Config.validate({ message: "expected 0 to 255", validation: (n) => n >= 0 && n <= 255 })
      ),
      Option.map(listed, (asset) => asset.decimals)
    )
    const symbol = yield* fromDeployment(
      "HANDLE_LOOKUP_ASSET_SYMBOL",
      Config.string("HANDLE_LOOKUP_ASSET_SYMBOL").pipe(
        Config.validate({
          message: "expected 1 to 32 characters",
          validation: (s) => s.length >= 1 && s.length <= 32
        })
      ),
      Option.map(listed, (asset) => asset.symbol)
    )
    return { ...rest, decimals, symbol }
  })

export interface FedsocialSettings {
  /** The domain the client's sign-in message must name (its front-end's host). */
  readonly domain: string
  /** The URI the message must name. */
  readonly uri: string
  /** RPC of the chain holding the registries (Optimism). */
  readonly rpcUrl: string
  readonly idRegistry: Address
  readonly keyRegistry: Address
  /**
   * `FEDSOCIAL_CONTRACT_SIGNATURES`: whether a contract wallet's signature (ERC-1271, or ERC-6492
   * for one not yet deployed) is checked at all; such a check runs code the signer chose on the
   * registry RPC, so it is off by default and answered 400 `unsupported` (docs/attestor.md
   * "fedsocial sign-in").
   */
  readonly contractSignatures: boolean
  /** `FEDSOCIAL_CONTRACT_SIGNATURE_GAS`: the gas limit of that check's `eth_call`. */
  readonly contractSignatureGas: number
}

/**
 * Optimism's public RPC, `FEDSOCIAL_RPC_URL`'s default: rate-limited, so fedsocial sign-ins answer
 * 503 under load; production sets a private one (docs/operations.md "Provider endpoints").
 */
export const PUBLIC_OPTIMISM_RPC_URL = "https://mainnet.optimism.io"

/** Whether `rpcUrl` is Optimism's public endpoint, however spelled (any path, a trailing slash). */
export const isPublicOptimismRpc = (rpcUrl: string): boolean =>
  URL.canParse(rpcUrl) && new URL(rpcUrl).hostname === new URL(PUBLIC_OPTIMISM_RPC_URL).hostname

/** Farcaster's registries on Optimism (and the devnet's stand-ins at the same addresses, docs/protocol.md §9). */
export const FARCASTER_ID_REGISTRY: Address = "0x00000000Fc6c5F01Fc30151999387Bb99A9f489b"
export const FARCASTER_KEY_REGISTRY: Address = "0x00000000fc1237824fb747abde0ff18990e59b7e"

const fedsocialSettings: Config.Config<Option.Option<FedsocialSettings>> = Config.all({
  domain: Config.option(Config.nonEmptyString("FEDSOCIAL_DOMAIN")),
  uri: Config.option(Config.nonEmptyString("FEDSOCIAL_URI")),
  rpcUrl: endpointUrl("FEDSOCIAL_RPC_URL", PUBLIC_OPTIMISM_RPC_URL),
  idRegistry: address("FEDSOCIAL_ID_REGISTRY").pipe(Config.withDefault(getAddress(FARCASTER_ID_REGISTRY))),
  keyRegistry: address("FEDSOCIAL_KEY_REGISTRY").pipe(Config.withDefault(getAddress(FARCASTER_KEY_REGISTRY))),
  contractSignatures: Config.boolean("FEDSOCIAL_CONTRACT_SIGNATURES").pipe(Config.withDefault(false)),
  // At most geth's default `RPCGasCap`: a node refuses or caps a call above its own cap anyway.
  contractSignatureGas: positiveInt("FEDSOCIAL_CONTRACT_SIGNATURE_GAS", 1_000_000, 50_000_000)
}).pipe(
  Config.mapOrFail(({ domain, uri, ...rest }) => {
    if (Option.isNone(domain)) return Either.right(Option.none())
    if (Option.isNone(uri))
      return Either.left(
        ConfigError.InvalidData(["FEDSOCIAL_URI"], "fedsocial sign-in needs the URI its messages name")
      )
    if (!URL.canParse(uri.value))
      return Either.left(
        ConfigError.InvalidData(["FEDSOCIAL_URI"], "expected a URI such as https://app.example/login")
      )
    return Either.right(Option.some({ domain: domain.value, uri: uri.value, ...rest }))
  })
)

/**
 * One platform's OAuth app: `<PREFIX>_CLIENT_ID`, `<PREFIX>_CLIENT_SECRET` and its endpoints
 * `<PREFIX>_AUTHORIZE_URL`, `_TOKEN_URL`, `_REVOKE_URL`, `_USER_URL` (the real provider's by
 * default). None without a client id. codehost apps are confidential: a secret is required.
 */
const oauthApp = (platform: OAuthCallbackPlatform): Config.Config<Option.Option<OAuthApp>> => {
  const prefix = platform.toUpperCase()
  const defaults = oauthProviders[platform].defaults
  return Config.all({
    clientId: Config.option(Config.nonEmptyString(`${prefix}_CLIENT_ID`)),
    clientSecret: optionalSecret(`${prefix}_CLIENT_SECRET`),
    authorize: endpointUrl(`${prefix}_AUTHORIZE_URL`, defaults.authorize),
    token: endpointUrl(`${prefix}_TOKEN_URL`, defaults.token),
    revoke: endpointUrl(`${prefix}_REVOKE_URL`, defaults.revoke),
    user: endpointUrl(`${prefix}_USER_URL`, defaults.user)
  }).pipe(
    Config.mapOrFail(({ clientId, clientSecret, ...endpoints }) => {
      if (Option.isNone(clientId)) return Either.right(Option.none())
      if (platform === "codehost" && Option.isNone(clientSecret))
        return Either.left(
          ConfigError.InvalidData([`${prefix}_CLIENT_SECRET`], "a codehost OAuth app needs its client secret")
        )
      return Either.right(
        Option.some({
          clientId: clientId.value,
          clientSecret: Option.getOrUndefined(clientSecret),
          endpoints
        })
      )
    })
  )
}

const oauthApps = Config.all({
  microblog: oauthApp("microblog"),
  codehost: oauthApp("codehost"),
  community: oauthApp("community")
}).pipe(
  Config.map((apps) => {
    const out: Partial<Record<OAuthCallbackPlatform, OAuthApp>> = {}
    for (const [platform, app] of Object.entries(apps) as Array<
      [OAuthCallbackPlatform, Option.Option<OAuthApp>]
    >)
      if (Option.isSome(app)) out[platform] = app.value
    return out
  })
)

/** `PUBLIC_URL`: an http(s) origin, no path. */
const publicUrl = Config.option(Config.string("PUBLIC_URL")).pipe(
  Config.mapOrFail((value) => {
    if (Option.isNone(value)) return Either.right(Option.none<string>())
    try {
      const parsed = new URL(value.value)
      if (parsed.protocol !== "https:" && parsed.protocol !== "http:") throw new Error()
      if (parsed.pathname !== "/" || parsed.search !== "" || parsed.hash !== "") throw new Error()
      return Either.right(Option.some(parsed.origin))
    } catch {
      return Either.left(
        ConfigError.InvalidData([], "expected an http(s) origin such as https://attestor.example")
      )
    }
  })
)

/**
 * `PUBLIC_URL` when it is not set: `http://HOST:PORT`, when that is an address a browser can reach.
 * A wildcard `HOST` (0.0.0.0, ::) names no address, so the setting is required then.
 */
const derivedPublicUrl = (host: string, port: number): Effect.Effect<string, ConfigError.ConfigError> =>
  host === "0.0.0.0" || host === "::" || host === ""
    ? Effect.fail(
        ConfigError.MissingData(
          ["PUBLIC_URL"],
          `required when HOST is ${host === "" ? "empty" : host} (every address): the attestor's origin as browsers and providers reach it, such as https://attestor.example`
        )
      )
    : Effect.succeed(`http://${host.includes(":") ? `[${host}]` : host}:${port}`)

/** `PEPPER` (or `PEPPER_FILE`): at least 16 bytes of hex. Wrapped only after validation, so a refusal says why (never the value). */
const pepper = requiredSecretText("PEPPER").pipe(
  Config.mapOrFail((s) => {
    const hex = s.startsWith("0x") ? s.slice(2) : s
    return /^(?:[0-9a-fA-F]{2}){16,}$/.test(hex)
      ? Either.right(Redacted.make(Uint8Array.from(Buffer.from(hex, "hex"))))
      : Either.left(ConfigError.InvalidData(["PEPPER"], "must be at least 16 bytes of hex"))
  })
)

/** `REDIRECT_ALLOWLIST`: the redirects a login may name, each canonical (`allowListEntry`). */
const redirectAllowList = Config.string("REDIRECT_ALLOWLIST").pipe(
  Config.mapOrFail((s) => {
    const out: Array<string> = []
    for (const raw of s.split(",").map((e) => e.trim())) {
      if (raw.length === 0) continue
      const parsed = allowListEntry(raw)
      if ("refusal" in parsed) return Either.left(ConfigError.InvalidData([], parsed.refusal))
      out.push(parsed.entry)
    }
    return Either.right(out as ReadonlyArray<string>)
  }),
  Config.withDefault([] as ReadonlyArray<string>)
)

export const loadAttestorSettings = Effect.gen(function* () {
  // The deployment file first: the addresses may come from it. Every other setting is read even
  // when it fails, so that one refusal names them all.
  const file = yield* Effect.either(optionalDeployment)
  const deployment = Either.getOrElse(file, () => Option.none<Deployment>())
  const afterFile = <A>(read: Effect.Effect<A, ConfigError.ConfigError>) =>
    Either.isLeft(file) ? Effect.fail(file.left) : read
  const { vault, settlementAsset, startBlockSetting, ...rest } = yield* allSettings({
    vault: afterFile(
      addressOr(
        "FEE_VAULT",
        Option.map(deployment, (d) => d.vault)
      )
    ),
    settlementAsset: afterFile(
      addressOr(
        "SETTLEMENT_ASSET",
        Option.map(deployment, (d) => d.settlementAsset)
      )
    ),
    startBlockSetting: Config.option(Config.integer("INDEXER_START_BLOCK")),
    ...serviceSettings({ port: 8081, dataDir: ".data/attestor", maxBodyBytes: 16 * 1024 }),
    ...indexerTuningSettings,
    signingKey: signerSetting("ATTESTOR"),
    hintKey: privateKey("HINT_PRIVATE_KEY"),
    pepper,
    rateLimitBurst: positiveInt("RATE_LIMIT_BURST", 20),
    rateLimitPerMinute: positiveInt("RATE_LIMIT_PER_MINUTE", 20),
    oauthStateTtlSeconds: positiveInt("OAUTH_STATE_TTL_SECONDS", 600),
    oauthStatesPerClient: positiveInt("OAUTH_STATES_PER_CLIENT", 10),
    oauthStatesMax: positiveInt("OAUTH_STATES_MAX", 100_000),
    sessionTtlSeconds: positiveInt("SESSION_TTL_SECONDS", 900),
    bindDeadlineSeconds: positiveInt("BIND_DEADLINE_SECONDS", 3600, 30 * 24 * 3600),
    autoVeto: Config.boolean("AUTO_VETO").pipe(Config.withDefault(false)),
    vetoUnknownIds: Config.boolean("VETO_UNKNOWN_IDS").pipe(Config.withDefault(false)),
    vetoRule: oneOf("VETO_RULE", ["committee", "strict"] as const).pipe(
      Config.withDefault("committee" as const)
    ),
    vetoStaggerSeconds: Config.integer("VETO_STAGGER_SECONDS").pipe(
      Config.validate({ message: "expected 0 to 60 seconds", validation: (n) => n >= 0 && n <= 60 }),
      Config.withDefault(2)
    ),
    ...txSenderSettings,
    oauthGetStart: Config.boolean("OAUTH_GET_START").pipe(Config.withDefault(true)),
    redirectAllowList,
    loginChallenge: oneOf("LOGIN_CHALLENGE", ["required", "optional"] as const).pipe(
      Config.withDefault("required" as const)
    ),
    messengerBotToken: optionalSecret("MESSENGER_BOT_TOKEN"),
    messengerAuthMaxAgeSeconds: positiveInt("MESSENGER_AUTH_MAX_AGE_SECONDS", 300, 7 * 86_400),
    oauthApps,
    oauthProviderTimeoutMs: positiveInt("OAUTH_PROVIDER_TIMEOUT_MS", 10_000, 120_000),
    fedsocial: fedsocialSettings,
    publicUrl,
    handleResolvers: Config.all({
      microblog: Config.all({
        apiUrl: endpointUrl("MICROBLOG_API_URL", "https://api.x.com"),
        bearerToken: optionalSecret("MICROBLOG_BEARER_TOKEN").pipe(Config.map(Option.getOrUndefined))
      }),
      codehost: Config.all({
        apiUrl: endpointUrl("CODEHOST_API_URL", "https://api.github.com"),
        token: optionalSecret("CODEHOST_API_TOKEN").pipe(Config.map(Option.getOrUndefined))
      }),
      fedsocial: Config.all({
        fnamesUrl: endpointUrl("FEDSOCIAL_FNAMES_URL", "https://fnames.farcaster.xyz")
      }),
      timeoutMs: positiveInt("HANDLE_LOOKUP_TIMEOUT_MS", 5_000, 60_000)
    }),
    handleLookupMode: oneOf("HANDLE_LOOKUP_MODE", ["off", "free", "paid"] as const).pipe(
      Config.withDefault("off" as const)
    ),
    devnetChainClock: Config.boolean("DEVNET_CHAIN_CLOCK").pipe(Config.withDefault(false))
  })
  const indexerStartBlock = Option.getOrElse(
    Option.orElse(startBlockSetting, () => Option.map(deployment, (d) => d.startBlock)),
    () => 0
  )
  const chainId = Option.orElse(rest.chainId, () => Option.map(deployment, (d) => d.chainId))
  const { handleLookupMode: requestedMode, ...others } = rest
  const refusal = handleLookupModeRefusal(requestedMode, chainId)
  const { paidLookup, publicUrl: origin } = yield* allSettings({
    paidLookup:
      refusal !== undefined
        ? Effect.fail(ConfigError.InvalidData(["HANDLE_LOOKUP_MODE"], refusal))
        : requestedMode === "paid"
          ? Effect.map(paidLookupSettings(settlementAsset, deployment), Option.some)
          : Effect.succeed(Option.none<PaidLookupSettings>()),
    publicUrl: Option.match(others.publicUrl, {
      onSome: Effect.succeed,
      onNone: () => derivedPublicUrl(others.host, others.port)
    }),
    devnetChainClock:
      others.devnetChainClock && !Option.contains(chainId, DEVNET_CHAIN_ID)
        ? Effect.fail(
            ConfigError.InvalidData(
              ["DEVNET_CHAIN_CLOCK"],
              `the devnet's chain clock is for the devnet only: refused unless the chain id (CHAIN_ID or the deployment file's) is ${DEVNET_CHAIN_ID}`
            )
          )
        : Effect.void
  })
  return {
    ...others,
    publicUrl: origin,
    handleLookupMode: requestedMode,
    paidLookup,
    chainId,
    deployment,
    vault,
    settlementAsset,
    indexerStartBlock
  } satisfies AttestorSettingsShape as AttestorSettingsShape
})

export class AttestorSettings extends Context.Tag("AttestorSettings")<
  AttestorSettings,
  AttestorSettingsShape
>() {
  static readonly layer = Layer.effect(AttestorSettings, loadAttestorSettings)
}
