/**
 * GET /v1/info through the attestor's own server wiring (layers/attestor.ts `Attestor.server`) over
 * a mocked chain: the body computed from the settings, the chain id read from the RPC once when
 * no setting names it, and reads that cost no rate-limit token. Also the OpenAPI document.
 */
import { ConfigProvider, Effect, Layer, Logger, LogLevel, ManagedRuntime, Option, Schema } from "effect"
import { type Hex, hexToBigInt } from "viem"
import { privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Attestor } from "../../layers/attestor.js"
import { AttestorInfo } from "../../schema/attestor.js"
import { AttestationStore } from "../../src/attestor/binds/AttestationStore.js"
import { HintIndex } from "../../src/attestor/hints/HintIndex.js"
import { loginPlatforms } from "../../src/attestor/info/attestorInfo.js"
import { OAuthStates } from "../../src/attestor/logins/oauth/OAuthStates.js"
import { SessionStore } from "../../src/attestor/logins/SessionStore.js"
import { PaymentStore } from "../../src/attestor/lookups/payments/PaymentStore.js"
import { PublicCommitments } from "../../src/attestor/publicHandles/PublicCommitments.js"
import { VetoWatcher } from "../../src/attestor/veto/VetoWatcher.js"
import { ChainUnavailable } from "../../src/chain/errors.js"
import { mockChainClient } from "../../src/chain/MockChainClient.js"
import { AttestorSettings, loadAttestorSettings } from "../../src/config/attestor.js"
import { serverUrl } from "../../src/http/server.js"
import { Indexer } from "../../src/indexer/Indexer.js"
import { storageLayer } from "../../src/store/sql.js"

const VAULT = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
const SIGNING_KEY: Hex = `0x${"11".repeat(32)}`
const HINT_KEY: Hex = `0x${"22".repeat(32)}`

const baseEnv = {
  RPC_URL: "http://127.0.0.1:1",
  FEE_VAULT: VAULT.toLowerCase(),
  SETTLEMENT_ASSET: "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512",
  ATTESTOR_PRIVATE_KEY: SIGNING_KEY,
  HINT_PRIVATE_KEY: HINT_KEY,
  PEPPER: `0x${"33".repeat(32)}`,
  BIND_DEADLINE_SECONDS: "7200",
  HOST: "127.0.0.1",
  PORT: "0",
  TRUST_PROXY: "1",
  // One token refilled per minute: any POST-priced read would be refused at once.
  RATE_LIMIT_BURST: "1",
  RATE_LIMIT_PER_MINUTE: "1"
}

/** The attestor's server over the given chain id reads, with settings from `env`. */
const serve = (env: Record<string, string>, chainId: Effect.Effect<number, ChainUnavailable>) =>
  ManagedRuntime.make(
    Attestor.server.pipe(
      Layer.provide(
        Layer.mergeAll(
          Indexer.disabled,
          HintIndex.disabled,
          VetoWatcher.disabled,
          SessionStore.test({}),
          OAuthStates.test({}),
          PublicCommitments.none,
          PaymentStore.test({}),
          AttestationStore.test({})
        )
      ),
      // fedsocial's verify takes its nonce and makes its session in one transaction.
      Layer.provide(
        storageLayer({ databaseUrl: Option.none(), dataDir: "memory://", applicationName: "test" })
      ),
      Layer.provide(mockChainClient({ chainId })),
      Layer.provide(AttestorSettings.layer),
      Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))),
      Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
    )
  )

/** Compressed secp256k1 public key computed from viem's uncompressed one: parity byte + x. */
const compressed = (privateKey: Hex): Hex => {
  const full = privateKeyToAccount(privateKey).publicKey
  const x = full.slice(4, 68)
  const y = hexToBigInt(`0x${full.slice(68)}`)
  return `0x${y % 2n === 0n ? "02" : "03"}${x}`
}

const get = (base: string, path: string, client = "198.51.100.1") =>
  fetch(`${base}${path}`, { headers: { "x-forwarded-for": client } })

describe("GET /v1/info with the chain id configured", () => {
  let chainReads = 0
  const runtime = serve(
    { ...baseEnv, CHAIN_ID: "31337" },
    Effect.sync(() => {
      chainReads += 1
      return 1
    })
  )
  let base = ""
  beforeAll(async () => {
    base = await runtime.runPromise(serverUrl)
  })
  afterAll(() => runtime.dispose())

  it("answers the settings' values, checksummed, and decodes as AttestorInfo", async () => {
    const res = await get(base, "/v1/info")
    expect(res.status).toBe(200)
    const body = await res.json()
    expect(body).toEqual({
      chainId: 31337,
      vault: VAULT,
      attestor: privateKeyToAccount(SIGNING_KEY).address,
      hintPublicKey: compressed(HINT_KEY),
      platforms: [],
      bindDeadlineSeconds: 7200,
      handleLookup: { mode: "off", platforms: [], price: null }
    })
    expect(() => Schema.decodeUnknownSync(AttestorInfo)(body)).not.toThrow()
    // The configured chain id is used as is: no RPC read.
    expect(chainReads).toBe(0)
  })

  it("advertises only the logins it can perform: none without MESSENGER_BOT_TOKEN", async () => {
    const settingsOf = (env: Record<string, string>) =>
      Effect.runPromise(
        Effect.withConfigProvider(loadAttestorSettings, ConfigProvider.fromMap(new Map(Object.entries(env))))
      )
    const settings = await settingsOf({ ...baseEnv, CHAIN_ID: "31337" })
    expect(loginPlatforms(settings)).toEqual([])
    const body = (await (await get(base, "/v1/info")).json()) as { platforms: unknown }
    expect(body.platforms).toEqual(loginPlatforms(settings))
    // The messenger widget is the one login of this version; an empty token is no token.
    expect(loginPlatforms(await settingsOf({ ...baseEnv, MESSENGER_BOT_TOKEN: "1:bot" }))).toEqual([
      "messenger"
    ])
    expect(loginPlatforms(await settingsOf({ ...baseEnv, MESSENGER_BOT_TOKEN: "" }))).toEqual([])
  })

  it("serves the same body every time, and reads cost no rate-limit token", async () => {
    const client = "198.51.100.2"
    const bodies = await Promise.all(
      Array.from({ length: 6 }, () => get(base, "/v1/info", client).then((r) => r.text()))
    )
    expect(new Set(bodies).size).toBe(1)
    expect((await get(base, "/v1/health", client)).status).toBe(200)
    expect((await get(base, "/v1/openapi.json", client)).status).toBe(200)
    // The one token is still there for a POST; the next POST is refused.
    const post = () =>
      fetch(`${base}/v1/commitment`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-forwarded-for": client },
        body: JSON.stringify({ platform: "microblog", userId: "1" })
      })
    expect((await post()).status).toBe(200)
    const refused = await post()
    expect(refused.status).toBe(429)
    expect(await refused.json()).toMatchObject({ code: "rate_limited" })
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0)
    expect((await get(base, "/v1/info", client)).status).toBe(200)
  })

  it("documents its endpoints in its OpenAPI document", async () => {
    const spec = (await (await get(base, "/v1/openapi.json")).json()) as {
      paths: Record<string, Record<string, { responses: Record<string, unknown> }>>
    }
    expect(Object.keys(spec.paths).sort()).toEqual(
      [
        "/v1/health",
        "/v1/metrics",
        "/v1/info",
        "/v1/commitment",
        "/v1/public-handle",
        "/v1/oauth/messenger/verify",
        "/v1/oauth/fedsocial/verify",
        "/v1/oauth/{platform}/start",
        "/v1/oauth/{platform}/callback",
        "/v1/escrows",
        "/v1/bind"
      ].sort()
    )
    expect(Object.keys(spec.paths["/v1/oauth/messenger/verify"]?.post?.responses ?? {})).toEqual(
      expect.arrayContaining(["200", "400", "401", "413", "429", "503"])
    )
    expect(Object.keys(spec.paths["/v1/escrows"]?.post?.responses ?? {})).toEqual(
      expect.arrayContaining(["200", "400", "401", "413", "429", "503"])
    )
    expect(Object.keys(spec.paths["/v1/bind"]?.post?.responses ?? {})).toEqual(
      expect.arrayContaining(["200", "400", "401", "413", "429", "503"])
    )
    expect(Object.keys(spec.paths["/v1/info"]?.get?.responses ?? {})).toEqual(
      expect.arrayContaining(["200", "503"])
    )
    expect(Object.keys(spec.paths["/v1/commitment"]?.post?.responses ?? {})).toEqual(
      expect.arrayContaining(["200", "400", "413", "429"])
    )
  })
})

describe("GET /v1/info without a configured chain id", () => {
  let chainReads = 0
  const runtime = serve(
    baseEnv,
    Effect.suspend(() => {
      chainReads += 1
      return chainReads === 1
        ? Effect.fail(
            new ChainUnavailable({ operation: "eth_chainId", reason: "down", attempts: 1, cause: undefined })
          )
        : Effect.succeed(8453)
    })
  )
  let base = ""
  beforeAll(async () => {
    base = await runtime.runPromise(serverUrl)
  })
  afterAll(() => runtime.dispose())

  it("answers 503 unavailable while the RPC is down, then the chain's id, read once and cached", async () => {
    const down = await get(base, "/v1/info")
    expect(down.status).toBe(503)
    expect(await down.json()).toMatchObject({ code: "unavailable" })
    const up = await get(base, "/v1/info")
    expect(up.status).toBe(200)
    expect(await up.json()).toMatchObject({ chainId: 8453, vault: VAULT })
    expect((await get(base, "/v1/info")).status).toBe(200)
    expect(chainReads).toBe(2)
  })
})
