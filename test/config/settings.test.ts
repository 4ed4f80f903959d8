import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type ConfigError, ConfigProvider, Effect, Either, Option, Redacted } from "effect"
import { describe, expect, it } from "vitest"
import { isPublicOptimismRpc, loadAttestorSettings } from "../../src/config/attestor.js"
import { loadRelayerSettings, relayerSettingsWarnings } from "../../src/config/relayer.js"
import { formatConfigError } from "../../src/config/settings.js"

const VAULT = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
const TOKEN = "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512"
const ADAPTER = "0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0"
const ROUTER = "0xCf7Ed3AccA5a467e9e704C703E8D87F634fB0Fc9"

const dir = mkdtempSync(join(tmpdir(), "settings-"))
const deploymentFile = join(dir, "deployment.json")
writeFileSync(
  deploymentFile,
  JSON.stringify({
    chainId: 31337,
    vault: VAULT.toLowerCase(),
    settlementAsset: TOKEN,
    shieldAdapter: ADAPTER,
    swapRouter: ROUTER,
    startBlock: 7,
    quotedFullBalance: false,
    assets: { [TOKEN]: { symbol: "USDT", decimals: 18, priceFeed: ROUTER } },
    nativePriceFeed: ROUTER,
    rpcUrl: "http://127.0.0.1:8545"
  })
)

const load = <A>(program: Effect.Effect<A, ConfigError.ConfigError>, env: Record<string, string>) =>
  Effect.runSync(
    Effect.either(Effect.withConfigProvider(program, ConfigProvider.fromMap(new Map(Object.entries(env)))))
  )

const failure = <A>(result: Either.Either<A, ConfigError.ConfigError>): string => {
  if (Either.isRight(result)) throw new Error("expected the settings to be refused")
  return formatConfigError(result.left)
}

const loadAsync = <A>(program: Effect.Effect<A, ConfigError.ConfigError>, env: Record<string, string>) =>
  Effect.runPromise(
    Effect.either(Effect.withConfigProvider(program, ConfigProvider.fromMap(new Map(Object.entries(env)))))
  )

describe("relayer settings", () => {
  const HOT_KEY = `0x${"11".repeat(32)}`
  const minimal = {
    RPC_URL: "http://127.0.0.1:8545",
    RELAYER_PRIVATE_KEY: HOT_KEY,
    FEE_VAULT: VAULT,
    SETTLEMENT_ASSET: TOKEN,
    SHIELD_ADAPTER: ADAPTER
  }

  it("applies the documented defaults", () => {
    const result = load(loadRelayerSettings, minimal)
    expect(Either.isRight(result)).toBe(true)
    if (Either.isLeft(result)) return
    const s = result.right
    expect(s).toMatchObject({
      port: 8080,
      maxBodyBytes: 65536,
      rateLimitIpBurst: 30,
      rateLimitIpPerMinute: 30,
      rateLimitIpBytesPerToken: 524288,
      rateLimitIdBurst: 6,
      rateLimitIdPerMinute: 6,
      gasCapBps: 20000,
      gasLimitMultiplierBps: 12000,
      minDeadlineSeconds: 120,
      feeMarginBps: 13000,
      quoteToleranceBps: 0,
      quoteTtlSeconds: 60,
      requireActionFee: true,
      indexerEnabled: true,
      quotedFullBalance: true,
      trustProxyHops: 0
    })
    expect(Option.isNone(s.metricsToken)).toBe(true)
    expect(Option.isNone(s.databaseUrl)).toBe(true)
  })

  it("fills every address left empty from the deployment file", async () => {
    const result = await loadAsync(loadRelayerSettings, {
      RPC_URL: "http://127.0.0.1:8545",
      RELAYER_PRIVATE_KEY: HOT_KEY,
      DEPLOYMENT_FILE: deploymentFile
    })
    if (Either.isLeft(result)) throw new Error(formatConfigError(result.left))
    const s = result.right
    expect(s.vault).toBe(VAULT)
    expect(s.settlementAsset).toBe(TOKEN)
    expect(s.shieldAdapter).toBe(ADAPTER)
    expect(s.indexerStartBlock).toBe(7)
    expect(s.quotedFullBalance).toBe(false)
    expect(s.chainId).toEqual(Option.some(31337))
  })

  it("lets a setting override the deployment file", async () => {
    const other = "0x0000000000000000000000000000000000000001"
    const result = await loadAsync(loadRelayerSettings, {
      RPC_URL: "http://127.0.0.1:8545",
      RELAYER_PRIVATE_KEY: HOT_KEY,
      DEPLOYMENT_FILE: deploymentFile,
      FEE_VAULT: other,
      INDEXER_START_BLOCK: "100"
    })
    if (Either.isLeft(result)) throw new Error(formatConfigError(result.left))
    expect(result.right.vault).toBe(other)
    expect(result.right.indexerStartBlock).toBe(100)
  })

  it("names a missing hot key", () => {
    const { RELAYER_PRIVATE_KEY: _, ...rest } = minimal
    expect(failure(load(loadRelayerSettings, rest))).toMatch(/^RELAYER_PRIVATE_KEY: required, not set$/)
  })

  it("never echoes a bad private key", () => {
    const bad = "0xabc123def"
    expect(failure(load(loadRelayerSettings, { ...minimal, RELAYER_PRIVATE_KEY: bad }))).not.toContain(
      "abc123"
    )
  })

  it("names a missing RPC_URL", () => {
    const { RPC_URL: _, ...rest } = minimal
    expect(failure(load(loadRelayerSettings, rest))).toMatch(/^RPC_URL: /)
  })

  it("names a missing address and says where it can come from", () => {
    const { FEE_VAULT: _, ...rest } = minimal
    expect(failure(load(loadRelayerSettings, rest))).toContain(
      "FEE_VAULT: set FEE_VAULT or give a DEPLOYMENT_FILE"
    )
  })

  it.each([
    ["GAS_CAP_BPS", "two", "GAS_CAP_BPS"],
    ["MAX_BODY_BYTES", "0", "MAX_BODY_BYTES"],
    ["QUOTE_TOLERANCE_BPS", "10001", "QUOTE_TOLERANCE_BPS"],
    ["RPC_URL", "not a url", "RPC_URL"],
    ["PORT", "70000", "PORT"],
    ["FEE_VAULT", "0x5FbDB2315678afecb367f032d93F642f64180aA3", "FEE_VAULT"],
    ["RELAYER_PRIVATE_KEY", "0x1234", "RELAYER_PRIVATE_KEY"],
    ["RELAYER_PRIVATE_KEY", "", "RELAYER_PRIVATE_KEY"],
    ["REQUIRE_ACTION_FEE", "maybe", "REQUIRE_ACTION_FEE"],
    ["OPEN_CLAIMS", "sometimes", "OPEN_CLAIMS"],
    ["REVERT_COOLDOWN_SECONDS", "-1", "REVERT_COOLDOWN_SECONDS"],
    ["REVERT_COOLDOWN_MAX_SECONDS", "0", "REVERT_COOLDOWN_MAX_SECONDS"],
    ["BIND_BUDGET_PER_DAY", "-1", "BIND_BUDGET_PER_DAY"],
    ["BIND_BUDGET_PER_DAY", "1", "BIND_BUDGET_PER_DAY"]
  ])("names an invalid %s", (name, value, expected) => {
    const line = failure(load(loadRelayerSettings, { ...minimal, [name]: value }))
    expect(line).toContain(`${expected}: `)
    expect(line).not.toContain("\n")
  })

  it("names an unreadable or invalid deployment file", async () => {
    const missing = await loadAsync(loadRelayerSettings, {
      ...minimal,
      DEPLOYMENT_FILE: join(dir, "nope.json")
    })
    expect(failure(missing)).toMatch(/^DEPLOYMENT_FILE: cannot read/)
    const bad = join(dir, "bad.json")
    writeFileSync(bad, JSON.stringify({ chainId: 1, vault: "0x12" }))
    const invalid = await loadAsync(loadRelayerSettings, { ...minimal, DEPLOYMENT_FILE: bad })
    const line = failure(invalid)
    expect(line).toMatch(/^DEPLOYMENT_FILE: .* is not a valid deployment file/)
    expect(line).not.toContain("\n")
  })

  it("refuses OPEN_CLAIMS=private-only without SEND_RPC_URL, a maximum cooldown below the first, and a bind budget of 1", () => {
    expect(failure(load(loadRelayerSettings, { ...minimal, OPEN_CLAIMS: "private-only" }))).toMatch(
      /^OPEN_CLAIMS: private-only needs SEND_RPC_URL/
    )
    const privateOnly = load(loadRelayerSettings, {
      ...minimal,
      OPEN_CLAIMS: "private-only",
      SEND_RPC_URL: "http://127.0.0.1:8546"
    })
    expect(Either.isRight(privateOnly) && privateOnly.right.openClaims).toBe("private-only")
    expect(
      failure(
        load(loadRelayerSettings, {
          ...minimal,
          REVERT_COOLDOWN_SECONDS: "600",
          REVERT_COOLDOWN_MAX_SECONDS: "60"
        })
      )
    ).toMatch(/^REVERT_COOLDOWN_MAX_SECONDS: must not be below REVERT_COOLDOWN_SECONDS$/)
    expect(failure(load(loadRelayerSettings, { ...minimal, BIND_BUDGET_PER_DAY: "1" }))).toMatch(
      /^BIND_BUDGET_PER_DAY: must be 0 \(off\) or at least 2/
    )
    for (const value of ["0", "2"]) {
      const loaded = load(loadRelayerSettings, { ...minimal, BIND_BUDGET_PER_DAY: value })
      expect(Either.isRight(loaded) && loaded.right.bindBudgetPerDay).toBe(Number(value))
    }
    for (const value of ["0", "1"]) {
      const loaded = load(loadRelayerSettings, { ...minimal, BIND_BUDGET_TOTAL_PER_DAY: value })
      expect(Either.isRight(loaded) && loaded.right.bindBudgetTotalPerDay).toBe(Number(value))
    }
  })

  it("warns of a gas cap above the fee margin and of open claims without a private send RPC", () => {
    const defaults = load(loadRelayerSettings, minimal)
    if (Either.isLeft(defaults)) throw new Error("refused")
    expect(defaults.right).toMatchObject({
      openClaims: "accept",
      revertCooldownSeconds: 3600,
      revertCooldownMaxSeconds: 86400,
      bindBudgetPerDay: 10,
      bindBudgetTotalPerDay: 1000
    })
    const warnings = relayerSettingsWarnings(defaults.right)
    expect(warnings).toHaveLength(2)
    expect(warnings[0]).toMatch(/^GAS_CAP_BPS \(20000\) is above FEE_MARGIN_BPS \(13000\)/)
    expect(warnings[1]).toMatch(/public mempool without SEND_RPC_URL/)
    const quiet = load(loadRelayerSettings, {
      ...minimal,
      GAS_CAP_BPS: "13000",
      SEND_RPC_URL: "http://127.0.0.1:8546"
    })
    if (Either.isLeft(quiet)) throw new Error("refused")
    expect(relayerSettingsWarnings(quiet.right)).toEqual([])
    const refusing = load(loadRelayerSettings, { ...minimal, GAS_CAP_BPS: "13000", OPEN_CLAIMS: "refuse" })
    if (Either.isLeft(refusing)) throw new Error("refused")
    expect(relayerSettingsWarnings(refusing.right)).toEqual([])
    const outpriced = load(loadRelayerSettings, {
      ...minimal,
      GAS_CAP_BPS: "13000",
      OPEN_CLAIMS: "refuse",
      GAS_LIMIT_MULTIPLIER_BPS: "13001"
    })
    if (Either.isLeft(outpriced)) throw new Error("refused")
    expect(relayerSettingsWarnings(outpriced.right)).toEqual([
      expect.stringMatching(/^GAS_LIMIT_MULTIPLIER_BPS \(13001\) is above FEE_MARGIN_BPS \(13000\): /)
    ])
  })

  it("treats an empty METRICS_TOKEN as unset and keeps a set one secret", () => {
    const empty = load(loadRelayerSettings, { ...minimal, METRICS_TOKEN: "" })
    expect(Either.isRight(empty) && Option.isNone(empty.right.metricsToken)).toBe(true)
    const set = load(loadRelayerSettings, { ...minimal, METRICS_TOKEN: "s3cret" })
    if (Either.isLeft(set)) throw new Error("refused")
    const token = Option.getOrThrow(set.right.metricsToken)
    expect(Redacted.value(token)).toBe("s3cret")
    expect(String(token)).not.toContain("s3cret")
  })
})

describe("attestor settings", () => {
  const minimal = {
    RPC_URL: "http://127.0.0.1:8545",
    FEE_VAULT: VAULT,
    SETTLEMENT_ASSET: TOKEN,
    ATTESTOR_PRIVATE_KEY: `0x${"11".repeat(32)}`,
    HINT_PRIVATE_KEY: `0x${"22".repeat(32)}`,
    PEPPER: `0x${"33".repeat(32)}`
  }

  it("applies the documented defaults", () => {
    const result = load(loadAttestorSettings, minimal)
    if (Either.isLeft(result)) throw new Error(formatConfigError(result.left))
    expect(result.right).toMatchObject({
      port: 8081,
      maxBodyBytes: 16384,
      rateLimitBurst: 20,
      rateLimitPerMinute: 20,
      oauthStateTtlSeconds: 600,
      sessionTtlSeconds: 900,
      handleLookupMode: "off",
      oauthGetStart: true,
      loginChallenge: "required",
      messengerAuthMaxAgeSeconds: 300,
      redirectAllowList: [],
      autoVeto: false,
      settlementAsset: TOKEN,
      indexerPollIntervalMs: 2000,
      indexerConfirmationDepth: 64,
      indexerMaxBlockRange: 2000
    })
    expect(Array.from(Redacted.value(result.right.pepper))).toEqual(Array(32).fill(0x33))
  })

  it("defaults the community app to Discord's documented endpoints, its API routes pinned to v10", () => {
    const result = load(loadAttestorSettings, { ...minimal, COMMUNITY_CLIENT_ID: "1234567890" })
    if (Either.isLeft(result)) throw new Error(formatConfigError(result.left))
    expect(result.right.oauthApps.community?.endpoints).toEqual({
      authorize: "https://discord.com/oauth2/authorize",
      token: "https://discord.com/api/v10/oauth2/token",
      revoke: "https://discord.com/api/v10/oauth2/token/revoke",
      user: "https://discord.com/api/v10/users/@me"
    })
  })

  it("tells Optimism's public RPC (FEDSOCIAL_RPC_URL's default, which start-up warns about) from a private one", () => {
    const result = load(loadAttestorSettings, {
      ...minimal,
      FEDSOCIAL_DOMAIN: "w.example",
      FEDSOCIAL_URI: "https://w.example"
    })
    if (Either.isLeft(result)) throw new Error(formatConfigError(result.left))
    const { rpcUrl, contractSignatures, contractSignatureGas } = Option.getOrThrow(result.right.fedsocial)
    // Contract wallets' signatures are off unless asked for, and capped when on.
    expect({ contractSignatures, contractSignatureGas }).toEqual({
      contractSignatures: false,
      contractSignatureGas: 1_000_000
    })
    expect(isPublicOptimismRpc(rpcUrl)).toBe(true)
    expect(isPublicOptimismRpc("https://mainnet.optimism.io/")).toBe(true)
    expect(isPublicOptimismRpc("https://opt-mainnet.example-rpc.com/v2/key")).toBe(false)
    expect(isPublicOptimismRpc("http://127.0.0.1:8545")).toBe(false)
  })

  it.each([
    ["PEPPER", "0x1234"],
    ["ATTESTOR_PRIVATE_KEY", "nothex"],
    ["HANDLE_LOOKUP_MODE", "sometimes"],
    ["REDIRECT_ALLOWLIST", "ftp://files.example"],
    ["REDIRECT_ALLOWLIST", "https://wallet.example/after-login?next=x"],
    ["REDIRECT_ALLOWLIST", "https://wallet.example/after-login#x"],
    ["LOGIN_CHALLENGE", "sometimes"],
    ["FEDSOCIAL_CONTRACT_SIGNATURES", "sometimes"],
    ["FEDSOCIAL_CONTRACT_SIGNATURE_GAS", "0"],
    ["FEDSOCIAL_CONTRACT_SIGNATURE_GAS", "50000001"]
  ])("names an invalid %s", (name, value) => {
    expect(failure(load(loadAttestorSettings, { ...minimal, [name]: value }))).toContain(`${name}: `)
  })

  it("keeps REDIRECT_ALLOWLIST entries canonical: scheme, host, port and path, / when none", () => {
    const result = load(loadAttestorSettings, {
      ...minimal,
      REDIRECT_ALLOWLIST: "http://localhost:5173, https://Wallet.Example:443/after-login",
      LOGIN_CHALLENGE: "optional"
    })
    expect(Either.isRight(result) && result.right.redirectAllowList).toEqual([
      "http://localhost:5173/",
      "https://wallet.example/after-login"
    ])
    expect(Either.isRight(result) && result.right.loginChallenge).toBe("optional")
  })

  it("takes DEVNET_CHAIN_CLOCK on the devnet's chain id only, never elsewhere or with none known", () => {
    const on = (env: Record<string, string>) =>
      load(loadAttestorSettings, { ...minimal, DEVNET_CHAIN_CLOCK: "true", ...env })
    const devnet = on({ CHAIN_ID: "31337" })
    expect(Either.isRight(devnet) && devnet.right.devnetChainClock).toBe(true)
    expect(failure(on({ CHAIN_ID: "1" }))).toContain(
      "DEVNET_CHAIN_CLOCK: the devnet's chain clock is for the devnet only"
    )
    expect(failure(on({}))).toContain("DEVNET_CHAIN_CLOCK: ")
  })

  it("needs the settlement asset, from SETTLEMENT_ASSET or the deployment file", () => {
    const { SETTLEMENT_ASSET: _, ...rest } = minimal
    expect(failure(load(loadAttestorSettings, rest))).toContain(
      "SETTLEMENT_ASSET: set SETTLEMENT_ASSET or give a DEPLOYMENT_FILE"
    )
  })

  it("names every missing secret on one line", () => {
    const line = failure(
      load(loadAttestorSettings, {
        RPC_URL: "http://127.0.0.1:8545",
        FEE_VAULT: VAULT,
        SETTLEMENT_ASSET: TOKEN
      })
    )
    expect(line).toContain("ATTESTOR_PRIVATE_KEY")
    expect(line).not.toContain("\n")
  })
})
