/**
 * Reading settings: Effect `Config` helpers shared by both services, and the one-line report a
 * bad setting produces at start-up.
 */
import { readFile } from "node:fs/promises"
import { Cause, Config, ConfigError, Effect, Either, Option, ParseResult, Redacted } from "effect"
import { type Address, getAddress, isAddress, parseGwei } from "viem"
import { type Deployment, decodeDeploymentJson } from "../../schema/deployment.js"
import { corsOrigin } from "../http/cors.js"
import { requiredSecretText, secretText } from "./secrets.js"

export const address = (name: string): Config.Config<Address> =>
  Config.string(name).pipe(
    Config.mapOrFail((s) =>
      isAddress(s, { strict: true })
        ? Either.right(getAddress(s))
        : Either.left(
            ConfigError.InvalidData([], "expected a 0x address (mixed case needs a valid checksum)")
          )
    )
  )

const integerIn = (name: string, min: number, max: number): Config.Config<number> =>
  Config.integer(name).pipe(
    Config.validate({
      message: `expected an integer from ${min} to ${max}`,
      validation: (n) => n >= min && n <= max
    })
  )

/** Basis points: 10_000 is 1x. */
export const bps = (name: string, defaultValue: number, max = 1_000_000): Config.Config<number> =>
  integerIn(name, 0, max).pipe(Config.withDefault(defaultValue))

/** A positive amount of gwei with at most 9 decimals, as wei. */
export const gweiAmount = (name: string, defaultValue: string): Config.Config<bigint> =>
  Config.string(name).pipe(
    Config.withDefault(defaultValue),
    Config.mapOrFail((s) =>
      /^\d{1,12}(\.\d{1,9})?$/.test(s) && parseGwei(s) > 0n
        ? Either.right(parseGwei(s))
        : Either.left(ConfigError.InvalidData([], "expected a positive amount of gwei, e.g. 500 or 0.05"))
    )
  )

export const positiveInt = (name: string, defaultValue: number, max = Number.MAX_SAFE_INTEGER) =>
  integerIn(name, 1, max).pipe(Config.withDefault(defaultValue))

/** A positive integer that may be left unset (no default). */
export const optionalPositiveInt = (name: string) =>
  Config.option(integerIn(name, 1, Number.MAX_SAFE_INTEGER))

export const nonNegativeInt = (name: string, defaultValue: number, max = Number.MAX_SAFE_INTEGER) =>
  integerIn(name, 0, max).pipe(Config.withDefault(defaultValue))

export const port = (defaultValue: number) =>
  integerIn("PORT", 0, 65_535).pipe(Config.withDefault(defaultValue))

export const url = (name: string): Config.Config<URL> =>
  Config.string(name).pipe(
    Config.mapOrFail((s) => {
      try {
        const parsed = new URL(s)
        return parsed.protocol === "http:" ||
          parsed.protocol === "https:" ||
          parsed.protocol === "ws:" ||
          parsed.protocol === "wss:"
          ? Either.right(parsed)
          : Either.left(ConfigError.InvalidData([], "expected an http(s) or ws(s) URL"))
      } catch {
        return Either.left(ConfigError.InvalidData([], "expected a URL"))
      }
    })
  )

/**
 * An optional secret, from `NAME` or the file `NAME_FILE` names (src/config/secrets.ts): unset and
 * empty both mean "not configured".
 */
export const optionalSecret = (name: string): Config.Config<Option.Option<Redacted.Redacted>> =>
  secretText(name).pipe(Config.map((raw) => Option.map(raw, Redacted.make)))

/** A comma-separated list of http(s) origins (`scheme://host[:port]`, no path); empty or unset: none. */
const originList = (name: string): Config.Config<ReadonlyArray<string>> =>
  Config.string(name).pipe(
    Config.mapOrFail((s) => {
      const entries = s
        .split(",")
        .map((e) => e.trim())
        .filter((e) => e.length > 0)
      const origins = entries.map(corsOrigin)
      const bad = origins.indexOf(undefined)
      return bad < 0
        ? Either.right(origins as ReadonlyArray<string>)
        : Either.left(
            ConfigError.InvalidData(
              [],
              `expected comma-separated origins such as https://wallet.example (got "${entries[bad]!.slice(0, 40)}")`
            )
          )
    }),
    Config.withDefault([] as ReadonlyArray<string>)
  )

/** One of a few words; a refusal lists every one of them. */
export const oneOf = <const A extends string>(name: string, allowed: ReadonlyArray<A>): Config.Config<A> =>
  Config.string(name).pipe(
    Config.mapOrFail((s) =>
      (allowed as ReadonlyArray<string>).includes(s)
        ? Either.right(s as A)
        : Either.left(
            ConfigError.InvalidData([], `expected one of ${allowed.join(", ")} (got "${s.slice(0, 40)}")`)
          )
    )
  )

/** A 32-byte private key in hex, from `NAME` or the file `NAME_FILE` names (src/config/secrets.ts). */
export const privateKey = (name: string): Config.Config<Redacted.Redacted<`0x${string}`>> =>
  requiredSecretText(name).pipe(
    Config.mapOrFail((s) => {
      const hex = s.startsWith("0x") ? s : `0x${s}`
      return /^0x[0-9a-fA-F]{64}$/.test(hex)
        ? Either.right(hex.toLowerCase() as `0x${string}`)
        : Either.left(ConfigError.InvalidData([name], "expected a 32-byte hex private key"))
    }),
    // Wrapped only after validation, so a refusal still says what is wrong (never the value).
    Config.map((key) => Redacted.make(key))
  )

/** Reads and validates the deployment file; a bad file names the setting and what is wrong. */
export const loadDeploymentFile = (path: string): Effect.Effect<Deployment, ConfigError.ConfigError> =>
  Effect.tryPromise({
    try: () => readFile(path, "utf8"),
    catch: (e) =>
      ConfigError.InvalidData(
        ["DEPLOYMENT_FILE"],
        `cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? e}`
      )
  }).pipe(
    Effect.flatMap((text) =>
      decodeDeploymentJson(text).pipe(
        Effect.mapError((e) =>
          ConfigError.InvalidData(
            ["DEPLOYMENT_FILE"],
            `${path} is not a valid deployment file: ${ParseResult.TreeFormatter.formatErrorSync(e).split("\n").join(" ")}`
          )
        )
      )
    )
  )

export const optionalDeployment: Effect.Effect<
  Option.Option<Deployment>,
  ConfigError.ConfigError
> = Effect.flatMap(
  Config.option(Config.nonEmptyString("DEPLOYMENT_FILE")),
  Option.match({
    onNone: () => Effect.succeed(Option.none()),
    onSome: (path) => Effect.map(loadDeploymentFile(path), Option.some)
  })
)

/**
 * An address setting that may be left empty when the deployment file has it. The setting wins
 * over the file, so an operator can override one address without editing the file.
 */
export const addressOr = (
  name: string,
  fromDeployment: Option.Option<Address>
): Effect.Effect<Address, ConfigError.ConfigError> =>
  Effect.flatMap(Config.option(Config.nonEmptyString(name)), (raw) =>
    Option.isSome(raw)
      ? address(name)
      : Option.match(fromDeployment, {
          onNone: () =>
            Effect.fail(ConfigError.MissingData([name], `set ${name} or give a DEPLOYMENT_FILE that has it`)),
          onSome: Effect.succeed
        })
  )

const leaves = (e: ConfigError.ConfigError): Array<string> => {
  switch (e._op) {
    case "And":
    case "Or":
      return [...leaves(e.left), ...leaves(e.right)]
    case "MissingData":
      // Effect's own wording ("Expected X to exist in the process context") says less than this.
      return [
        `${e.path.join(".") || "setting"}: ${/^Expected .* to exist/.test(e.message) ? "required, not set" : e.message}`
      ]
    case "InvalidData":
    case "SourceUnavailable":
    case "Unsupported":
      return [`${e.path.join(".") || "setting"}: ${e.message}`]
  }
}

/**
 * Reads every part, and fails with all their refusals at once (ConfigError `And`), so one start-up
 * line names every missing or bad setting instead of the first one.
 */
export const allSettings = <const P extends Record<string, Effect.Effect<unknown, ConfigError.ConfigError>>>(
  parts: P
): Effect.Effect<{ -readonly [K in keyof P]: Effect.Effect.Success<P[K]> }, ConfigError.ConfigError> =>
  (
    Effect.all(parts as Record<string, Effect.Effect<unknown, ConfigError.ConfigError>>, {
      mode: "validate"
    }) as Effect.Effect<Record<string, unknown>, Record<string, Option.Option<ConfigError.ConfigError>>>
  ).pipe(
    Effect.mapError((results) =>
      Object.values(results)
        .flatMap((result) => (Option.isSome(result) ? [result.value] : []))
        .reduce((all, error) => ConfigError.And(all, error))
    )
  ) as never

/** One line naming every bad setting and what is wrong with it. */
export const formatConfigError = (e: ConfigError.ConfigError): string => [...new Set(leaves(e))].join("; ")

/** The start-up report for a cause: a ConfigError becomes one line; anything else is passed on. */
export const configFailure = (cause: Cause.Cause<unknown>): Option.Option<string> =>
  Option.flatMap(Cause.failureOption(cause), (e) =>
    ConfigError.isConfigError(e) ? Option.some(formatConfigError(e)) : Option.none()
  )

/** The durable transaction sender's settings (`TX_*`), the same for every key that sends. */
export interface TxSenderSettings {
  /** A transaction not mined this long after its last signature is re-simulated and replaced. */
  readonly txReplaceAfterSeconds: number
  /** Fee bumps (and no-op cancellations) per transaction before the sender only waits. */
  readonly txMaxReplacements: number
  /** Ceiling of `maxFeePerGas` for every transaction and replacement, in wei. */
  readonly txMaxFeePerGas: bigint
  /** How often the sender reconciles nonces, settles receipts and looks for stuck transactions. */
  readonly txPollIntervalMs: number
  /**
   * How deep (the including block counts as 1) a mined transaction must be before the sender
   * stops watching it for reorgs; until then a reorg that takes it out makes it pending again.
   */
  readonly txConfirmations: number
  /**
   * How long a submission waits for the hot key's lock (held by this process's monitor or another
   * replica) before it is refused 503 `unavailable`.
   */
  readonly txLockWaitMs: number
  /**
   * How long an RPC the sender makes holding the hot key's lock (a broadcast, a nonce or receipt
   * read), retries included, may go unanswered before the sender lets the lock go.
   */
  readonly txRpcTimeoutMs: number
}

/** `TX_*`, to spread into a service's `Config.all`. */
export const txSenderSettings = {
  txReplaceAfterSeconds: positiveInt("TX_REPLACE_AFTER_SECONDS", 60, 86_400),
  txMaxReplacements: nonNegativeInt("TX_MAX_REPLACEMENTS", 5, 100),
  txMaxFeePerGas: gweiAmount("TX_MAX_FEE_GWEI", "500"),
  txPollIntervalMs: positiveInt("TX_POLL_INTERVAL_MS", 2_000, 600_000),
  txConfirmations: positiveInt("TX_CONFIRMATIONS", 12, 10_000),
  txLockWaitMs: positiveInt("TX_LOCK_WAIT_MS", 5_000, 600_000),
  txRpcTimeoutMs: positiveInt("TX_RPC_TIMEOUT_MS", 5_000, 600_000)
}

/** The vault indexer's tuning (`INDEXER_*` but the start block), the same in both services. */
export interface IndexerTuningSettings {
  /** How often the indexer polls for a new head. */
  readonly indexerPollIntervalMs: number
  /** How far below the head a reorg may reach; deeper blocks are final. */
  readonly indexerConfirmationDepth: number
  /** Ceiling of the indexer's adaptive `eth_getLogs` block range. */
  readonly indexerMaxBlockRange: number
}

/** `INDEXER_POLL_INTERVAL_MS`, `INDEXER_CONFIRMATION_DEPTH`, `INDEXER_MAX_BLOCK_RANGE`. */
export const indexerTuningSettings = {
  indexerPollIntervalMs: positiveInt("INDEXER_POLL_INTERVAL_MS", 2_000, 3_600_000),
  indexerConfirmationDepth: nonNegativeInt("INDEXER_CONFIRMATION_DEPTH", 64, 10_000),
  indexerMaxBlockRange: positiveInt("INDEXER_MAX_BLOCK_RANGE", 2_000, 1_000_000)
}

/** How long the HTTP server waits on a client (`HTTP_*_TIMEOUT_MS`), the same in both services. */
export interface HttpTimeoutSettings {
  /** Until the request's headers are complete. */
  readonly httpHeadersTimeoutMs: number
  /** Until the whole request, body included, has arrived. */
  readonly httpRequestTimeoutMs: number
  /** An idle keep-alive connection is closed after this. */
  readonly httpKeepAliveTimeoutMs: number
}

/** `HTTP_HEADERS_TIMEOUT_MS`, `HTTP_REQUEST_TIMEOUT_MS`, `HTTP_KEEP_ALIVE_TIMEOUT_MS`. */
export const httpTimeoutSettings = {
  httpHeadersTimeoutMs: positiveInt("HTTP_HEADERS_TIMEOUT_MS", 10_000, 600_000),
  httpRequestTimeoutMs: positiveInt("HTTP_REQUEST_TIMEOUT_MS", 30_000, 600_000),
  httpKeepAliveTimeoutMs: positiveInt("HTTP_KEEP_ALIVE_TIMEOUT_MS", 5_000, 600_000)
}

/** What every service is told the same way: where it listens, its chain, database and limits. */
export interface ServiceSettings extends HttpTimeoutSettings {
  readonly host: string
  readonly port: number
  readonly rpcUrl: URL
  readonly rpcTimeoutMs: number
  /** Unanswered RPC attempts in a row that open the chain client's circuit; 0 never opens it. */
  readonly rpcCircuitFailures: number
  /** How long the circuit stays open before one request probes the RPC again. */
  readonly rpcCircuitProbeMs: number
  readonly databaseUrl: Option.Option<Redacted.Redacted>
  readonly dataDir: string
  /** `CHAIN_ID` (else the deployment file's, else the RPC's, read lazily: src/chain/chainId.ts). */
  readonly chainId: Option.Option<number>
  readonly metricsToken: Option.Option<Redacted.Redacted>
  readonly maxBodyBytes: number
  /** How many reverse proxies in front append to `X-Forwarded-For`; 0 trusts none. */
  readonly trustProxyHops: number
  /** Browser origins allowed to call the service (`CORS_ALLOWED_ORIGINS`); none by default. */
  readonly corsAllowedOrigins: ReadonlyArray<string>
}

/**
 * `HOST`, `PORT`, `RPC_URL`, `RPC_TIMEOUT_MS`, `RPC_CIRCUIT_*`, `DATABASE_URL`, `DATA_DIR`, `CHAIN_ID`,
 * `METRICS_TOKEN`, `MAX_BODY_BYTES`, `TRUST_PROXY`, `CORS_ALLOWED_ORIGINS` and `HTTP_*_TIMEOUT_MS`, with the service's own
 * defaults; to spread into its `Config.all`.
 */
export const serviceSettings = (defaults: {
  readonly port: number
  readonly dataDir: string
  readonly maxBodyBytes: number
}) => ({
  host: Config.string("HOST").pipe(Config.withDefault("127.0.0.1")),
  port: port(defaults.port),
  rpcUrl: url("RPC_URL"),
  rpcTimeoutMs: positiveInt("RPC_TIMEOUT_MS", 10_000),
  rpcCircuitFailures: nonNegativeInt("RPC_CIRCUIT_FAILURES", 3, 1_000),
  rpcCircuitProbeMs: positiveInt("RPC_CIRCUIT_PROBE_MS", 2_000, 600_000),
  databaseUrl: secretText("DATABASE_URL").pipe(
    // Refused by shape only; the refusal never repeats the value, which may hold a password.
    Config.mapOrFail((given) =>
      Option.match(given, {
        onNone: () => Either.right(Option.none<Redacted.Redacted>()),
        onSome: (s) =>
          URL.canParse(s) && /^postgres(ql)?:$/.test(new URL(s).protocol)
            ? Either.right(Option.some(Redacted.make(s)))
            : Either.left(
                ConfigError.InvalidData(
                  ["DATABASE_URL"],
                  "not a URL: expected postgres://user:password@host:5432/database"
                )
              )
      })
    )
  ),
  dataDir: Config.string("DATA_DIR").pipe(Config.withDefault(defaults.dataDir)),
  chainId: optionalPositiveInt("CHAIN_ID"),
  metricsToken: optionalSecret("METRICS_TOKEN"),
  maxBodyBytes: positiveInt("MAX_BODY_BYTES", defaults.maxBodyBytes),
  trustProxyHops: nonNegativeInt("TRUST_PROXY", 0, 16),
  corsAllowedOrigins: originList("CORS_ALLOWED_ORIGINS"),
  ...httpTimeoutSettings
})
