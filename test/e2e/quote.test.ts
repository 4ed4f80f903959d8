/**
 * `GET /v1/config` and `GET /v1/quote` on a private devnet, through HTTP: every field, every
 * parameter, every refusal with its status and code, the metrics they feed; then the price
 * sources (feeds, DEX quote) read from the reference contracts by a live chain client.
 */
import { tmpdir } from "node:os"
import { join } from "node:path"
import { HttpApi, HttpApiBuilder, HttpApiGroup, HttpServer } from "@effect/platform"
import { it } from "@effect/vitest"
import { Cause, ConfigProvider, Effect, Exit, Layer, ManagedRuntime, Metric, Schema, TestClock } from "effect"
import { type Address, getAddress, zeroAddress } from "viem"
import { afterAll, beforeAll, describe, expect } from "vitest"
import { mockAggregatorV3Abi, mockSwapRouterAbi } from "../../contracts/abi.js"
import { devnetAccount, devnetClients, devnetRoles } from "../../contracts/deploy.js"
import {
  DEVNET_METRICS_TOKEN,
  Devnet,
  devnetChain,
  devnetKeys,
  freeLoopbackPort,
  type RunningDevnet,
  relayerEnv,
  withSettings,
  writeDevnetFile
} from "../../layers/devnet.js"
import { Relayer } from "../../layers/relayer.js"
import { Unavailable } from "../../schema/errors.js"
import { QuoteResponse } from "../../schema/relayer.js"
import { ChainClient } from "../../src/chain/ChainClient.js"
import { loadRelayerSettings, RelayerSettings } from "../../src/config/relayer.js"
import { quoteEndpoint } from "../../src/relayer/api/quote.js"
import { FeeOracle, gasTable, type QuoteRequest } from "../../src/relayer/FeeOracle.js"
import { priceDeviations } from "../../src/relayer/fees/metrics.js"
import { parsePrometheus } from "../support/prometheus.js"

/** The devnet's chain and relayer only: these tests never reach the attestor. */
const relayerDevnet = Layer.scoped(
  Devnet,
  Effect.gen(function* () {
    const chain = yield* devnetChain({ dir: join(tmpdir(), `quote-e2e-${process.pid}`) })
    const port = yield* freeLoopbackPort
    const urls = { relayerUrl: `http://127.0.0.1:${port}`, attestorUrl: "http://127.0.0.1:9" }
    yield* writeDevnetFile(chain, urls)
    yield* Layer.buildWithScope(
      withSettings(Relayer.layer, {
        ...relayerEnv(chain, port),
        // Dozens of quotes from one address: the per-IP limit is not what these tests are about.
        RATE_LIMIT_IP_BURST: "100000",
        RATE_LIMIT_IP_PER_MINUTE: "100000",
        // Static and feed prices only, so a broken feed leaves no source (the DEX has its own test).
        PRICE_SOURCES: "static,feed"
      }),
      yield* Effect.scope
    )
    return { ...chain, ...urls }
  })
)

const runtime = ManagedRuntime.make(relayerDevnet)
let devnet: RunningDevnet
let usdt: Address
let weth: Address
let usdc: Address

beforeAll(async () => {
  devnet = await runtime.runPromise(Devnet)
  usdt = devnet.deployment.settlementAsset
  weth = devnet.deployment.tokens.WETH!
  usdc = devnet.deployment.tokens.USDC!
}, 180_000)
afterAll(() => runtime.dispose())

interface Reply {
  readonly status: number
  readonly body: Record<string, unknown>
}

const get = async (path: string, headers: Record<string, string> = {}): Promise<Reply> => {
  const response = await fetch(`${devnet.relayerUrl}${path}`, { headers })
  const text = await response.text()
  return { status: response.status, body: text.startsWith("{") ? JSON.parse(text) : { text } }
}

const quote = (params: Record<string, string>) => get(`/v1/quote?${new URLSearchParams(params)}`)

/** The address with one hex letter's case flipped: its checksum no longer holds. */
const flipCase = (address: Address): string => {
  const i = address.slice(2).search(/[a-fA-F]/) + 2
  const c = address[i]!
  return (
    address.slice(0, i) + (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase()) + address.slice(i + 1)
  )
}

const ceilDiv = (a: bigint, b: bigint) => (a + b - 1n) / b

/**
 * The devnet's prices: the native coin and WETH at $3000, USDT and USDC at $1, every feed with 8
 * decimals. So one ETH of gas cost is 3000 USDT (18 decimals), 3000 USDC (6) or 1 WETH (18).
 */
const expectedFee = (gas: bigint, gasPrice: bigint, asset: Address) => {
  const costWithMargin = gas * gasPrice * 13_000n
  if (asset === weth) return ceilDiv(costWithMargin, 10_000n)
  if (asset === usdc) return ceilDiv(costWithMargin * 3000n, 10_000n * 10n ** 12n)
  return ceilDiv(costWithMargin * 3000n, 10_000n)
}

const setNativeFeed = async (answer: bigint) => {
  const { walletClient, publicClient } = await devnetClients(
    devnet.anvil.rpcUrl,
    devnetAccount(devnetRoles.firstFree + 6)
  )
  const hash = await walletClient.writeContract({
    address: devnet.deployment.nativePriceFeed,
    abi: mockAggregatorV3Abi,
    functionName: "setAnswer",
    args: [answer]
  })
  await publicClient.waitForTransactionReceipt({ hash })
}

/** Sets the devnet router's rate of `from` into `to` (raw units out per 1e18 raw units in). */
const setRate = async (from: Address, to: Address, rate: bigint) => {
  const { walletClient, publicClient } = await devnetClients(
    devnet.anvil.rpcUrl,
    devnetAccount(devnetRoles.firstFree + 6)
  )
  const hash = await walletClient.writeContract({
    address: devnet.deployment.swapRouter,
    abi: mockSwapRouterAbi,
    functionName: "setRate",
    args: [from, to, rate]
  })
  await publicClient.waitForTransactionReceipt({ hash })
}

const metricsText = async () => {
  const reply = await get("/v1/metrics", { authorization: `Bearer ${DEVNET_METRICS_TOKEN}` })
  expect(reply.status).toBe(200)
  return String(reply.body.text)
}

// Runs first: no price of USDC is cached yet, so the broken feed is really consulted.
describe("no price source available", () => {
  it("answers 503 unavailable and counts the failed source", async () => {
    await setNativeFeed(0n)
    try {
      const reply = await quote({ asset: usdc, adapter: zeroAddress })
      expect(reply.status).toBe(503)
      expect(reply.body).toMatchObject({ code: "unavailable" })
      expect(await metricsText()).toMatch(/relayer_price_source_failures_total\{source="feed"\} [1-9]/)
    } finally {
      await setNativeFeed(3000n * 10n ** 8n)
    }
    expect((await quote({ asset: usdc, adapter: zeroAddress })).status).toBe(200)
  })
})

describe("GET /v1/config", () => {
  it("has every RelayerConfig field", async () => {
    const reply = await get("/v1/config")
    expect(reply.status).toBe(200)
    expect(reply.body).toEqual({
      chainId: 31337,
      vault: devnet.deployment.vault,
      relayer: devnetAccount(devnetRoles.relayer).address,
      settlementAsset: usdt,
      adapters: { direct: zeroAddress, shield: devnet.deployment.shieldAdapter },
      minDeadlineSeconds: 120,
      quoteTtlSeconds: 60
    })
  })
})

describe("GET /v1/quote", () => {
  it("prices a direct claim from the feeds: gasEstimate x gasPrice x 1.3 in the asset", async () => {
    const before = Math.floor(Date.now() / 1000)
    const reply = await quote({ asset: usdt, adapter: zeroAddress })
    expect(reply.status).toBe(200)
    const body = reply.body
    expect(Object.keys(body).sort()).toEqual(
      [
        "action",
        "adapter",
        "asset",
        "chainId",
        "gasEstimate",
        "gasPrice",
        "relayer",
        "relayerFee",
        "validUntil",
        "vault"
      ].sort()
    )
    expect(body).toMatchObject({
      chainId: 31337,
      vault: devnet.deployment.vault,
      asset: usdt,
      adapter: zeroAddress,
      action: "claim",
      relayer: devnetAccount(devnetRoles.relayer).address,
      gasEstimate: gasTable.claimDirect.toString()
    })
    const gasPrice = BigInt(String(body.gasPrice))
    expect(gasPrice).toBeGreaterThan(0n)
    expect(BigInt(String(body.relayerFee))).toBe(expectedFee(gasTable.claimDirect, gasPrice, usdt))
    expect(body.validUntil).toBeGreaterThanOrEqual(before + 60)
    expect(body.validUntil).toBeLessThanOrEqual(Math.floor(Date.now() / 1000) + 60)
  })

  it("converts with each asset's decimals and price", async () => {
    for (const asset of [usdc, weth]) {
      const { status, body } = await quote({ asset, adapter: zeroAddress, action: "ping" })
      expect(status).toBe(200)
      const fee = expectedFee(gasTable.pingWithFee, BigInt(String(body.gasPrice)), asset)
      expect(BigInt(String(body.relayerFee))).toBe(fee)
    }
  })

  it("budgets every action, adapter and flag from the table", async () => {
    const cases: ReadonlyArray<readonly [Record<string, string>, bigint]> = [
      [{ adapter: devnet.deployment.shieldAdapter }, gasTable.claimShield],
      [{ register: "1" }, gasTable.claimDirect + gasTable.register + gasTable.claimMulticall],
      [{ consolidate: "1" }, gasTable.claimDirect + gasTable.consolidateStep + gasTable.claimMulticall],
      [{ action: "consolidate" }, gasTable.consolidateWithFee],
      [
        { action: "shield-templates", templates: "1" },
        gasTable.shieldTemplatesWithFeeBase + gasTable.shieldTemplatesPerTemplate
      ],
      [
        { action: "shield-templates", templates: "32", register: "1" },
        gasTable.shieldTemplatesWithFeeBase + 32n * gasTable.shieldTemplatesPerTemplate + gasTable.register
      ],
      [{ action: "rotate-owner" }, gasTable.rotateOwnerWithFee],
      [{ action: "ping", register: "1" }, gasTable.pingWithFee + gasTable.register]
    ]
    for (const [params, gas] of cases) {
      const { status, body } = await quote({ asset: usdt, adapter: zeroAddress, ...params })
      expect(status, JSON.stringify(params)).toBe(200)
      expect(body.gasEstimate, JSON.stringify(params)).toBe(gas.toString())
      expect(body.action).toBe(params.action ?? "claim")
      expect(BigInt(String(body.relayerFee))).toBe(expectedFee(gas, BigInt(String(body.gasPrice)), usdt))
    }
  })

  it("accepts a legacy amount, ignores it and does not echo it", async () => {
    const plain = await quote({ asset: usdt, adapter: zeroAddress, action: "rotate-owner" })
    const withAmount = await quote({
      asset: usdt,
      adapter: zeroAddress,
      action: "rotate-owner",
      amount: "123456789000000000000"
    })
    expect(withAmount.status).toBe(200)
    expect(withAmount.body).toEqual(plain.body)
    expect(withAmount.body).not.toHaveProperty("amount")
  })

  it("serves the same cached quote to the same question, and takes addresses in any case", async () => {
    const a = await quote({ asset: usdt, adapter: zeroAddress, action: "consolidate" })
    const b = await quote({ asset: usdt.toLowerCase(), adapter: zeroAddress, action: "consolidate" })
    expect(b.status).toBe(200)
    expect(b.body).toEqual(a.body)
    expect(b.body.asset).toBe(usdt)
  })

  it("answers a cached quote with the bytes and headers HttpApiBuilder encodes for the quote", async () => {
    const path = `/v1/quote?${new URLSearchParams({ asset: usdt, adapter: zeroAddress, action: "ping" })}`
    const answers = await Promise.all([0, 1, 2].map(() => fetch(`${devnet.relayerUrl}${path}`)))
    const texts = await Promise.all(answers.map((answer) => answer.text()))
    const headersOf = (answer: Response) =>
      [...answer.headers.entries()].filter(([name]) => name !== "date").sort()
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200])
    // The same quote, encoded once, served to every client asking the same question.
    expect(new Set(texts).size).toBe(1)
    expect(headersOf(answers[1]!)).toEqual(headersOf(answers[0]!))
    // What a handler returning the quote as a value answers: the schema's encoding, as JSON.
    const value = Schema.decodeUnknownSync(QuoteResponse)(JSON.parse(texts[0]!))
    const bareApi = HttpApi.make("bare").add(HttpApiGroup.make("quote").add(quoteEndpoint))
    const bareQuote = HttpApiBuilder.group(bareApi, "quote", (handlers) =>
      handlers.handle("quote", () => Effect.succeed(value))
    )
    const bare = HttpApiBuilder.toWebHandler(
      Layer.mergeAll(HttpApiBuilder.api(bareApi).pipe(Layer.provide(bareQuote)), HttpServer.layerContext)
    )
    try {
      const expected = await bare.handler(new Request(`http://bare${path}`))
      expect(texts[0]).toBe(await expected.text())
      expect(answers[0]!.headers.get("content-type")).toBe(expected.headers.get("content-type"))
      expect(answers[0]!.headers.get("content-length")).toBe(String(Buffer.byteLength(texts[0]!)))
    } finally {
      await bare.dispose()
    }
  })

  const refusals: ReadonlyArray<readonly [string, () => Record<string, string>, number, string]> = [
    ["an unknown adapter", () => ({ asset: usdt, adapter: weth }), 400, "adapter_not_allowed"],
    [
      "the shield adapter with another asset",
      () => ({ asset: usdc, adapter: devnet.deployment.shieldAdapter }),
      400,
      "adapter_not_allowed"
    ],
    [
      "the shield adapter on a non-claim action",
      () => ({ asset: usdt, adapter: devnet.deployment.shieldAdapter, action: "ping" }),
      400,
      "adapter_not_allowed"
    ],
    [
      "the shield adapter on shield-templates",
      () => ({
        asset: usdt,
        adapter: devnet.deployment.shieldAdapter,
        action: "shield-templates",
        templates: "2"
      }),
      400,
      "adapter_not_allowed"
    ],
    [
      "shield-templates without templates",
      () => ({ asset: usdt, adapter: zeroAddress, action: "shield-templates" }),
      400,
      "bad_request"
    ],
    ...["0", "33", "01", "1.5", "-1", ""].map(
      (templates) =>
        [
          `templates=${JSON.stringify(templates)}`,
          () => ({ asset: usdt, adapter: zeroAddress, action: "shield-templates", templates }),
          400,
          "bad_request"
        ] as const
    ),
    [
      "templates on another action",
      () => ({ asset: usdt, adapter: zeroAddress, action: "ping", templates: "2" }),
      400,
      "bad_request"
    ],
    [
      "consolidate=1 on an action",
      () => ({ asset: usdt, adapter: zeroAddress, action: "ping", consolidate: "1" }),
      400,
      "bad_request"
    ],
    [
      "consolidate=1 with another asset",
      () => ({ asset: weth, adapter: zeroAddress, consolidate: "1" }),
      400,
      "bad_request"
    ],
    ["consolidate=0", () => ({ asset: usdt, adapter: zeroAddress, consolidate: "0" }), 400, "bad_request"],
    ["register=true", () => ({ asset: usdt, adapter: zeroAddress, register: "true" }), 400, "bad_request"],
    [
      "an unknown action",
      () => ({ asset: usdt, adapter: zeroAddress, action: "cancel-bind" }),
      400,
      "bad_request"
    ],
    ["no asset", () => ({ adapter: zeroAddress }), 400, "bad_request"],
    ["no adapter", () => ({ asset: usdt }), 400, "bad_request"],
    ["an asset that is no address", () => ({ asset: "0x1234", adapter: zeroAddress }), 400, "bad_request"],
    [
      "a mixed-case address with a wrong checksum",
      () => ({ asset: flipCase(usdt), adapter: zeroAddress }),
      400,
      "bad_request"
    ],
    [
      "an asset the relayer does not price",
      () => ({ asset: getAddress("0x000000000000000000000000000000000000beef"), adapter: zeroAddress }),
      400,
      "bad_request"
    ]
  ]

  for (const [name, params, status, code] of refusals)
    it(`refuses ${name} with ${status} ${code}`, async () => {
      const reply = await quote(params())
      expect(reply.status).toBe(status)
      expect(reply.body).toMatchObject({ code })
      expect(typeof reply.body.error).toBe("string")
    })

  it("answers a repeated question from the quote's bytes, counted as served each time", async () => {
    const sample = async (family: string, labels: Record<string, string>) => {
      const samples = parsePrometheus(await metricsText()).get(family)?.samples ?? []
      const match = samples.find((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v))
      return match?.value ?? 0
    }
    const served = () => sample("relayer_quotes_total", { action: "rotate-owner" })
    const requests = () => sample("http_requests_total", { method: "GET", route: "/v1/quote", status: "200" })
    const [servedBefore, requestsBefore] = [await served(), await requests()]
    const path = `/v1/quote?${new URLSearchParams({ asset: weth, adapter: zeroAddress, action: "rotate-owner" })}`
    const answers = []
    for (let i = 0; i < 4; i++) {
      const response = await fetch(`${devnet.relayerUrl}${path}`)
      answers.push({
        status: response.status,
        headers: [...response.headers.entries()].filter(([name]) => name !== "date").sort(),
        text: await response.text()
      })
    }
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200, 200])
    for (const answer of answers.slice(1)) expect(answer).toEqual(answers[0])
    expect(await served()).toBe(servedBefore + 4)
    expect(await requests()).toBe(requestsBefore + 4)
  })

  it("counts quotes by action and shows the gas price in the metrics", async () => {
    await quote({ asset: usdt, adapter: zeroAddress, action: "ping" })
    const text = await metricsText()
    expect(text).toMatch(/relayer_quotes_total\{action="claim"\} [1-9]/)
    expect(text).toMatch(/relayer_quotes_total\{action="ping"\} [1-9]/)
    expect(text).toMatch(/relayer_gas_price_wei [1-9]/)
  })

  it("documents both endpoints in the OpenAPI document", async () => {
    const reply = await get("/v1/openapi.json")
    const paths = reply.body.paths as Record<string, { get?: { parameters?: Array<{ name: string }> } }>
    expect(paths["/v1/config"]?.get).toBeDefined()
    expect(paths["/v1/quote"]?.get?.parameters?.map((p) => p.name).sort()).toEqual(
      ["action", "adapter", "asset", "consolidate", "register", "templates"].sort()
    )
  })
})

describe("price sources on the reference contracts (live chain client)", () => {
  /** A fee oracle over the devnet's chain with these extra settings. */
  const oracleWith = (env: Record<string, string>) => {
    const settings = Layer.effect(RelayerSettings, loadRelayerSettings).pipe(
      Layer.provide(
        Layer.setConfigProvider(
          ConfigProvider.fromMap(
            new Map(
              Object.entries({
                RPC_URL: devnet.anvil.rpcUrl,
                DEPLOYMENT_FILE: devnet.deploymentFile,
                RELAYER_PRIVATE_KEY: devnetKeys.relayer,
                ...env
              })
            )
          )
        )
      )
    )
    const chain = ChainClient.layer({ rpcUrl: devnet.anvil.rpcUrl, timeoutMs: 5_000 })
    return FeeOracle.layer.pipe(Layer.provide(Layer.merge(settings, chain)))
  }

  const request = (asset: Address): QuoteRequest => ({
    asset,
    adapter: zeroAddress,
    action: "claim",
    consolidate: false,
    register: false
  })

  const quotesFor = (env: Record<string, string>) =>
    Effect.gen(function* () {
      const oracle = yield* FeeOracle
      return yield* Effect.forEach([usdt, usdc, weth], (asset) => oracle.quote(request(asset)))
    }).pipe(Effect.provide(oracleWith(env)))

  it.live("feeds and the DEX quote agree on the devnet's prices", () =>
    Effect.gen(function* () {
      const feeds = yield* quotesFor({ PRICE_SOURCES: "feed" })
      const dex = yield* quotesFor({ PRICE_SOURCES: "dex", WRAPPED_NATIVE: weth })
      for (const [i, asset] of [usdt, usdc, weth].entries()) {
        const viaFeed = feeds[i]!
        const viaDex = dex[i]!
        expect(viaFeed.relayerFee).toBe(expectedFee(viaFeed.gasEstimate, viaFeed.gasPrice, asset))
        expect(viaDex.relayerFee).toBe(expectedFee(viaDex.gasEstimate, viaDex.gasPrice, asset))
      }
    })
  )

  it.effect(
    "a pool skewed beyond PRICE_MAX_DEVIATION_BPS from the stale feeds is not used, and counted",
    () => {
      const wholeRate = (usdtPerEth: bigint) => usdtPerEth * 10n ** 18n
      const dexDeviations = Effect.map(
        Metric.value(Metric.tagged(priceDeviations, "source", "dex")),
        (state) => state.count
      )
      return Effect.gen(function* () {
        // The feeds answer 3000 USD per ETH and 1 per USDT, then go unrefreshed: four hours later
        // they are past the default limit of three, and the DEX quote is next.
        yield* Effect.promise(() => setNativeFeed(3000n * 10n ** 8n))
        yield* TestClock.setTime(Date.now() + 4 * 3_600_000)
        const oracleOn =
          (env: Record<string, string>) =>
          <A, E>(program: Effect.Effect<A, E, FeeOracle>) =>
            Effect.provide(program, oracleWith({ WRAPPED_NATIVE: weth, ...env }))
        const quoteUsdt = Effect.flatMap(FeeOracle, (oracle) => oracle.quote(request(usdt)))

        // A thin WETH/USDT pool pushed 10% down: not used, counted, and no source is left.
        yield* Effect.promise(() => setRate(weth, usdt, wholeRate(2700n)))
        const before = yield* dexDeviations
        const skewed = yield* Effect.exit(quoteUsdt).pipe(oracleOn({}))
        expect(Exit.isFailure(skewed) && Cause.squash(skewed.cause)).toBeInstanceOf(Unavailable)
        expect(yield* dexDeviations).toBe(before + 1)

        // 3% off is within the default 5%: the DEX price is used as it is.
        yield* Effect.promise(() => setRate(weth, usdt, wholeRate(2910n)))
        const close = yield* quoteUsdt.pipe(oracleOn({}))
        expect(close.relayerFee).toBe(ceilDiv(close.gasEstimate * close.gasPrice * 13_000n * 2910n, 10_000n))

        // A wider bound takes the pushed pool.
        yield* Effect.promise(() => setRate(weth, usdt, wholeRate(2700n)))
        const wide = yield* quoteUsdt.pipe(oracleOn({ PRICE_MAX_DEVIATION_BPS: "1500" }))
        expect(wide.relayerFee).toBe(ceilDiv(wide.gasEstimate * wide.gasPrice * 13_000n * 2700n, 10_000n))
      }).pipe(Effect.ensuring(Effect.promise(() => setRate(weth, usdt, wholeRate(3000n)))))
    },
    60_000
  )

  it.live("a static price is used as given", () =>
    Effect.gen(function* () {
      const [usdtQuote] = yield* quotesFor({ STATIC_PRICES: `${usdt}=1500`, PRICE_SOURCES: "static,feed" })
      const q = usdtQuote!
      expect(q.relayerFee).toBe(ceilDiv(q.gasEstimate * q.gasPrice * 13_000n * 1500n, 10_000n))
    })
  )
})
