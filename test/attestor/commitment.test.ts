/**
 * POST /v1/commitment through the attestor's own server wiring over a mocked chain: commitments
 * recomputed independently from docs/protocol.md §2, fresh nonces, every refusal of docs/attestor.md §4 rules 3-5
 * with its status and code, the outcome metric, and nothing of a request in logs or metrics.
 * Also the start-up refusal of HANDLE_LOOKUP_MODE values this version cannot serve.
 */
import { createHmac } from "node:crypto"
import type * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import {
  ConfigProvider,
  Effect,
  Either,
  FastCheck as fc,
  Layer,
  Logger,
  LogLevel,
  ManagedRuntime,
  Option,
  Schema
} from "effect"
import { encodeAbiParameters, type Hex, keccak256, stringToHex, toHex } from "viem"
import { privateKeyToAccount, publicKeyToAddress } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Attestor } from "../../layers/attestor.js"
import { CommitmentResponse } from "../../schema/attestor.js"
import { AttestationStore } from "../../src/attestor/binds/AttestationStore.js"
import {
  COMMUNITY_HANDLE_REFUSAL,
  commitmentFor,
  commitmentKeys,
  freshNonce
} from "../../src/attestor/commitments/commitmentRules.js"
import { commitmentAnswer } from "../../src/attestor/commitments/handlers.js"
import { HintIndex } from "../../src/attestor/hints/HintIndex.js"
import { OAuthStates } from "../../src/attestor/logins/oauth/OAuthStates.js"
import { SessionStore } from "../../src/attestor/logins/SessionStore.js"
import { PaymentStore } from "../../src/attestor/lookups/payments/PaymentStore.js"
import { PublicCommitments } from "../../src/attestor/publicHandles/PublicCommitments.js"
import { VetoWatcher } from "../../src/attestor/veto/VetoWatcher.js"
import { mockChainClient } from "../../src/chain/MockChainClient.js"
import { AttestorSettings, loadAttestorSettings } from "../../src/config/attestor.js"
import { formatConfigError } from "../../src/config/settings.js"
import { encodedBody, renderedBody } from "../../src/http/precomputed.js"
import { serverUrl } from "../../src/http/server.js"
import { Indexer } from "../../src/indexer/Indexer.js"
import { localSigner } from "../../src/keys/Signer.js"
import { storageLayer } from "../../src/store/sql.js"

const SIGNING_KEY: Hex = `0x${"11".repeat(32)}`
const PEPPER: Hex = `0x${"33".repeat(32)}`
const ATTESTOR = privateKeyToAccount(SIGNING_KEY)

const env = {
  RPC_URL: "http://127.0.0.1:1",
  FEE_VAULT: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
  SETTLEMENT_ASSET: "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512",
  CHAIN_ID: "31337",
  ATTESTOR_PRIVATE_KEY: SIGNING_KEY,
  HINT_PRIVATE_KEY: `0x${"22".repeat(32)}`,
  PEPPER,
  METRICS_TOKEN: "metrics-secret",
  HOST: "127.0.0.1",
  PORT: "0",
  TRUST_PROXY: "1",
  // Slow refills, so a loaded machine cannot refill a token in the middle of a test.
  RATE_LIMIT_BURST: "40",
  RATE_LIMIT_PER_MINUTE: "1"
}

/** Every log line the server writes, to check that no request value reaches one. */
const logLines: Array<string> = []
const capture = Logger.replace(
  Logger.defaultLogger,
  Logger.map(Logger.logfmtLogger, (line) => {
    logLines.push(line)
  })
)

const runtime = ManagedRuntime.make(
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
    Layer.provide(mockChainClient({})),
    Layer.provide(AttestorSettings.layer),
    Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))),
    Layer.provide(capture),
    Layer.provide(Logger.minimumLogLevel(LogLevel.Info))
  )
)
let base = ""
beforeAll(async () => {
  base = await runtime.runPromise(serverUrl)
})
afterAll(() => runtime.dispose())

let clients = 0
/** Each call comes from its own client address unless one is given, so tests share no bucket. */
const post = (body: unknown, client = `198.51.100.${++clients}`) =>
  fetch(`${base}/v1/commitment`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-forwarded-for": client },
    body: typeof body === "string" ? body : JSON.stringify(body)
  })

const metricsText = async () =>
  (await fetch(`${base}/v1/metrics`, { headers: { authorization: "Bearer metrics-secret" } })).text()

const outcomes = async (outcome: string) => {
  const match = new RegExp(`^attestor_commitments_total\\{outcome="${outcome}"\\} (\\d+)$`, "m").exec(
    await metricsText()
  )
  return match?.[1] === undefined ? 0 : Number(match[1])
}

// docs/protocol.md §2, written out again here rather than taken from schema/ids.ts.
const PLATFORM_IDS = { microblog: 1, messenger: 2, codehost: 3, fedsocial: 4, community: 5 } as const
const expectedSalt = (platformId: number, userId: string): Hex =>
  `0x${createHmac("sha256", Buffer.from(PEPPER.slice(2), "hex"))
    .update(`${platformId}:${userId}`, "utf8")
    .digest("hex")}`
const expectedCommitment = (platformId: number, userId: string, nonce: Hex): Hex =>
  keccak256(
    encodeAbiParameters(
      [{ type: "uint8" }, { type: "bytes32" }, { type: "bytes32" }, { type: "bytes32" }],
      [platformId, keccak256(stringToHex(userId)), expectedSalt(platformId, userId), nonce]
    )
  )

interface Commitment {
  platform: string
  platformId: number
  userId: string
  userIdHash: Hex
  nonce: Hex
  attestorSalt: Hex
  handleCommitment: Hex
  kind: number
  attestor: string
  attestorPubKey: Hex
}

const expectCommitment = (body: Commitment, platform: keyof typeof PLATFORM_IDS, userId: string) => {
  const platformId = PLATFORM_IDS[platform]
  expect(() => Schema.decodeUnknownSync(CommitmentResponse)(body)).not.toThrow()
  expect(body).toMatchObject({
    platform,
    platformId,
    userId,
    userIdHash: keccak256(stringToHex(userId)),
    attestorSalt: expectedSalt(platformId, userId),
    kind: 2,
    attestor: ATTESTOR.address,
    attestorPubKey: ATTESTOR.publicKey
  })
  expect(body.nonce).toMatch(/^0x[0-9a-f]{64}$/)
  expect(body.handleCommitment).toBe(expectedCommitment(platformId, userId, body.nonce))
}

describe("POST /v1/commitment with a numeric userId", () => {
  it.each(Object.keys(PLATFORM_IDS) as Array<keyof typeof PLATFORM_IDS>)(
    "commits to a %s user id as docs/protocol.md §2 computes it",
    async (platform) => {
      const userId = "80351110224678912"
      const res = await post({ platform, userId })
      expect(res.status).toBe(200)
      expectCommitment((await res.json()) as Commitment, platform, userId)
    }
  )

  it("draws a fresh nonce each time: same salt and hash, different commitments", async () => {
    const [a, b] = (await Promise.all(
      [0, 1].map(async () => (await post({ platform: "microblog", userId: "42" })).json())
    )) as [Commitment, Commitment]
    expect(a.attestorSalt).toBe(b.attestorSalt)
    expect(a.userIdHash).toBe(b.userIdHash)
    expect(a.nonce).not.toBe(b.nonce)
    expect(a.handleCommitment).not.toBe(b.handleCommitment)
  })

  it("never repeats a nonce, across the refills of the nonce pool", async () => {
    // The pool holds 128 nonces; 300 draws cross two refills.
    const nonces = await Effect.runPromise(Effect.all(Array.from({ length: 300 }, () => freshNonce)))
    for (const nonce of nonces) {
      expect(nonce).toMatch(/^0x[0-9a-f]{64}$/)
      expect(nonce).not.toBe(`0x${"00".repeat(32)}`)
    }
    expect(new Set(nonces).size).toBe(nonces.length)
  })

  it("gives attestorPubKey as the uncompressed public key of the attestor address", async () => {
    const body = (await (await post({ platform: "codehost", userId: "583231" })).json()) as Commitment
    expect(body.attestorPubKey).toMatch(/^0x04[0-9a-f]{128}$/)
    expect(publicKeyToAddress(body.attestorPubKey)).toBe(body.attestor)
  })

  it("uses the userId and ignores the handle when both are given (no lookup, no handle rules)", async () => {
    const res = await post({ platform: "messenger", userId: "12345", handle: "@someone" })
    expect(res.status).toBe(200)
    expectCommitment((await res.json()) as Commitment, "messenger", "12345")
  })

  it("counts successes as ok", async () => {
    const before = await outcomes("ok")
    expect((await post({ platform: "community", userId: "7" })).status).toBe(200)
    expect(await outcomes("ok")).toBe(before + 1)
  })
})

describe("the commitment's answer, rendered without encoding it again (src/http/precomputed.ts)", () => {
  const keys = commitmentKeys(localSigner(SIGNING_KEY), Buffer.from(PEPPER.slice(2), "hex"))
  const encodedJson = (answer: CommitmentResponse) => encodedBody(commitmentAnswer, answer)

  it("is the schema's encoding byte for byte, for any platform, user id and nonce", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...(Object.keys(PLATFORM_IDS) as Array<keyof typeof PLATFORM_IDS>)),
        fc.stringMatching(/^[1-9][0-9]{0,31}$/),
        fc.uint8Array({ minLength: 32, maxLength: 32 }),
        (platform, userId, nonce) => {
          const answer = commitmentFor(keys, platform, userId, toHex(nonce))
          const response = commitmentAnswer.render(answer)
          expect(renderedBody(response)).toBe(encodedJson(answer))
          expect((response as HttpServerResponse.HttpServerResponse).status).toBe(200)
        }
      )
    )
  })

  it("leaves a user id that is not canonical to the schema's encoding, which refuses it", () => {
    const answer = commitmentFor(keys, "messenger", "0123", toHex(new Uint8Array(32)))
    expect(commitmentAnswer.render(answer)).toBe(answer)
    expect(() => Schema.encodeSync(CommitmentResponse)(answer)).toThrow()
  })

  it("goes out as application/json, the bytes the schema's encoding of its own decoding gives", async () => {
    const res = await post({ platform: "codehost", userId: "583231" })
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toBe("application/json")
    const text = await res.text()
    expect(encodedJson(Schema.decodeUnknownSync(CommitmentResponse)(JSON.parse(text)))).toBe(text)
  })
})

describe("POST /v1/commitment with a handle", () => {
  it.each([
    ["community", "80351110224678912"],
    ["fedsocial", "3"]
  ] as const)("takes a numeric %s id sent as handle as the userId, free", async (platform, id) => {
    const res = await post({ platform, handle: id })
    expect(res.status).toBe(200)
    expectCommitment((await res.json()) as Commitment, platform, id)
  })

  const refusals: ReadonlyArray<readonly [string, Record<string, unknown>, number, string, RegExp]> = [
    [
      "a messenger handle",
      { platform: "messenger", handle: "@someone" },
      400,
      "bad_request",
      /numeric user id/
    ],
    ["a numeric messenger handle", { platform: "messenger", handle: "12345" }, 400, "bad_request", /userId/],
    ["a community handle", { platform: "community", handle: "someone" }, 400, "bad_request", /Copy User ID/],
    ["a fedsocial .eth name", { platform: "fedsocial", handle: "vitalik.eth" }, 400, "bad_request", /\.eth/],
    [
      "an upper-case .ETH name",
      { platform: "fedsocial", handle: "@Someone.ETH" },
      400,
      "bad_request",
      /\.eth/
    ],
    [
      "a malformed microblog handle",
      { platform: "microblog", handle: "far-too-long-handle" },
      400,
      "bad_request",
      /microblog handle/
    ],
    [
      "a malformed codehost handle",
      { platform: "codehost", handle: "-leading" },
      400,
      "bad_request",
      /codehost handle/
    ],
    [
      "a malformed fedsocial name",
      { platform: "fedsocial", handle: "Upper_Case" },
      400,
      "bad_request",
      /fedsocial handle/
    ],
    [
      "a zero-padded community id",
      { platform: "community", handle: "0123" },
      400,
      "bad_request",
      /leading zeros/
    ],
    [
      "a 33-digit fedsocial id",
      { platform: "fedsocial", handle: "1".repeat(33) },
      400,
      "bad_request",
      /32 digits/
    ],
    [
      "a microblog handle (lookup off)",
      { platform: "microblog", handle: "@someone" },
      400,
      "unsupported",
      /numeric userId/
    ],
    [
      "a numeric microblog handle (lookup off)",
      { platform: "microblog", handle: "12345" },
      400,
      "unsupported",
      /numeric userId/
    ],
    [
      "a codehost handle (lookup off)",
      { platform: "codehost", handle: "some-one" },
      400,
      "unsupported",
      /numeric userId/
    ],
    [
      "a fedsocial name (lookup off)",
      { platform: "fedsocial", handle: "some-one" },
      400,
      "unsupported",
      /numeric userId/
    ]
  ]

  it.each(refusals)("refuses %s", async (_, body, status, code, message) => {
    const before = await outcomes(code)
    const res = await post(body)
    expect(res.status).toBe(status)
    const answer = (await res.json()) as { error: string; code: string }
    expect(answer.code).toBe(code)
    expect(answer.error).toMatch(message)
    expect(answer.error).not.toContain(String(body.handle))
    expect(await outcomes(code)).toBe(before + 1)
  })

  it("explains how to copy a community user id", () => {
    expect(COMMUNITY_HANDLE_REFUSAL).toMatch(/Developer Mode/)
  })
})

describe("POST /v1/commitment with a malformed body", () => {
  it.each([
    ["neither userId nor handle", { platform: "microblog" }],
    ["an unknown platform", { platform: "myspace", userId: "1" }],
    ["a platform id instead of a name", { platform: 1, userId: "1" }],
    ["a userId as a JSON number", { platform: "microblog", userId: 1 }],
    ["a non-numeric userId", { platform: "microblog", userId: "alice" }],
    ["a zero-padded userId", { platform: "microblog", userId: "007" }],
    ["a handle with whitespace", { platform: "microblog", handle: "some one" }],
    ["an empty handle", { platform: "microblog", handle: "" }]
  ])("refuses %s with 400 bad_request, counted", async (_, body) => {
    const before = await outcomes("bad_request")
    const res = await post(body)
    expect(res.status).toBe(400)
    expect(await res.json()).toMatchObject({ code: "bad_request" })
    expect(await outcomes("bad_request")).toBe(before + 1)
  })

  it("refuses a body that is not JSON with 400 bad_request", async () => {
    const res = await post("{not json")
    expect(res.status).toBe(400)
    expect(await res.json()).toMatchObject({ code: "bad_request" })
  })
})

describe("POST /v1/commitment rate limit", () => {
  it("charges each POST one token of the client's bucket and answers 429 with Retry-After", async () => {
    const client = "203.0.113.77"
    const statuses: Array<number> = []
    for (let i = 0; i < 40; i++)
      statuses.push((await post({ platform: "microblog", userId: "9" }, client)).status)
    expect(statuses.every((s) => s === 200)).toBe(true)
    const refused = await post({ platform: "microblog", userId: "9" }, client)
    expect(refused.status).toBe(429)
    expect(await refused.json()).toMatchObject({ code: "rate_limited" })
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0)
    // Another client is not affected.
    expect((await post({ platform: "microblog", userId: "9" }, "203.0.113.78")).status).toBe(200)
  })
})

describe("privacy", () => {
  it("writes no user id, handle, salt, nonce or commitment to a log line or metric", async () => {
    const userId = "918273645546372819"
    const handle = "privacy_probe"
    const body = (await (await post({ platform: "microblog", userId })).json()) as Commitment
    await post({ platform: "microblog", handle })
    await post({ platform: "community", handle: "probe.person" })
    const secrets = [
      userId,
      handle,
      "probe.person",
      body.attestorSalt,
      body.nonce,
      body.handleCommitment,
      body.userIdHash
    ]
    const text = `${logLines.join("\n")}\n${await metricsText()}`
    expect(logLines.some((line) => line.includes("/v1/commitment"))).toBe(true)
    for (const secret of secrets) expect(text).not.toContain(secret)
  })
})

describe("POST /v1/public-handle with lookups off", () => {
  it("is 400 unsupported; a malformed handle is 400 bad_request first", async () => {
    const publicHandle = (body: unknown) =>
      fetch(`${base}/v1/public-handle`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-forwarded-for": `198.51.100.${++clients}` },
        body: JSON.stringify(body)
      })
    const off = await publicHandle({ platform: "codehost", handle: "dev7" })
    expect(off.status).toBe(400)
    expect(await off.json()).toMatchObject({ code: "unsupported" })
    const malformed = await publicHandle({ platform: "microblog", handle: "not a handle!" })
    expect(malformed.status).toBe(400)
    expect(await malformed.json()).toMatchObject({ code: "bad_request" })
  })
})

describe("HANDLE_LOOKUP_MODE", () => {
  const load = (extra: Record<string, string>) =>
    Effect.runPromise(
      Effect.either(
        Effect.withConfigProvider(
          loadAttestorSettings,
          ConfigProvider.fromMap(new Map(Object.entries({ ...env, ...extra })))
        )
      )
    )

  const paid = {
    HANDLE_LOOKUP_MODE: "paid",
    FACILITATOR_URL: "https://facilitator.example/x402/",
    HANDLE_LOOKUP_PRICE: "10000000000000000",
    HANDLE_LOOKUP_PAY_TO: "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
    HANDLE_LOOKUP_ASSET_DECIMALS: "18",
    HANDLE_LOOKUP_ASSET_SYMBOL: "USDT"
  }

  it("accepts paid with a facilitator, a price and a payee, on any chain", async () => {
    for (const chainId of ["31337", "56"]) {
      const result = await load({ ...paid, CHAIN_ID: chainId })
      if (Either.isLeft(result)) throw new Error(formatConfigError(result.left))
      expect(result.right.handleLookupMode).toBe("paid")
      const settings = Option.getOrThrow(result.right.paidLookup)
      expect(settings).toMatchObject({
        facilitatorUrl: "https://facilitator.example/x402",
        amount: 10n ** 16n,
        payTo: "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
        maxTimeoutSeconds: 300,
        paymentRetentionDays: 30,
        decimals: 18,
        symbol: "USDT"
      })
    }
    const kept = await load({ ...paid, HANDLE_LOOKUP_PAYMENT_RETENTION_DAYS: "90" })
    if (Either.isLeft(kept)) throw new Error(formatConfigError(kept.left))
    expect(Option.getOrThrow(kept.right.paidLookup).paymentRetentionDays).toBe(90)
  })

  it.each([
    ["FACILITATOR_URL", undefined, /^FACILITATOR_URL/],
    ["FACILITATOR_URL", "ftp://facilitator.example", /^FACILITATOR_URL: expected an http\(s\) URL/],
    ["HANDLE_LOOKUP_PRICE", undefined, /^HANDLE_LOOKUP_PRICE/],
    ["HANDLE_LOOKUP_PRICE", "0", /^HANDLE_LOOKUP_PRICE: expected a positive whole number/],
    ["HANDLE_LOOKUP_PRICE", "0.01", /^HANDLE_LOOKUP_PRICE: expected a positive whole number/],
    ["HANDLE_LOOKUP_PAY_TO", "nobody", /^HANDLE_LOOKUP_PAY_TO: expected a 0x address/],
    ["HANDLE_LOOKUP_PAYMENT_RETENTION_DAYS", "0", /^HANDLE_LOOKUP_PAYMENT_RETENTION_DAYS/],
    [
      "HANDLE_LOOKUP_ASSET_DECIMALS",
      undefined,
      /^HANDLE_LOOKUP_ASSET_DECIMALS: set HANDLE_LOOKUP_ASSET_DECIMALS or give a DEPLOYMENT_FILE/
    ]
  ])("refuses paid with %s %s in one line naming it", async (name, value, reason) => {
    const { [name as keyof typeof paid]: _, ...others } = paid
    const result = await load(value === undefined ? others : { ...others, [name]: value })
    if (Either.isRight(result)) throw new Error("expected the settings to be refused")
    const line = formatConfigError(result.left)
    expect(line).toMatch(reason)
    expect(line).not.toContain("\n")
  })

  it("accepts free with a chain id known at start-up, and refuses it without one", async () => {
    const accepted = await load({ HANDLE_LOOKUP_MODE: "free", CHAIN_ID: "31337" })
    if (Either.isLeft(accepted)) throw new Error(formatConfigError(accepted.left))
    expect(accepted.right.handleLookupMode).toBe("free")
    const { CHAIN_ID: _, ...withoutChainId } = env
    const refused = await Effect.runPromise(
      Effect.either(
        Effect.withConfigProvider(
          loadAttestorSettings,
          ConfigProvider.fromMap(new Map(Object.entries({ ...withoutChainId, HANDLE_LOOKUP_MODE: "free" })))
        )
      )
    )
    if (Either.isRight(refused)) throw new Error("expected the settings to be refused")
    expect(formatConfigError(refused.left)).toMatch(
      /^HANDLE_LOOKUP_MODE: free handle lookups need the chain id/
    )
  })

  it("refuses free on chain id 56 for that reason", async () => {
    const result = await load({ HANDLE_LOOKUP_MODE: "free", CHAIN_ID: "56" })
    if (Either.isRight(result)) throw new Error("expected the settings to be refused")
    expect(formatConfigError(result.left)).toMatch(/^HANDLE_LOOKUP_MODE: .*refused on chain id 56/)
  })

  it("accepts off, the default", async () => {
    for (const extra of [{}, { HANDLE_LOOKUP_MODE: "off" }]) {
      const result = await load(extra)
      if (Either.isLeft(result)) throw new Error(formatConfigError(result.left))
      expect(result.right.handleLookupMode).toBe("off")
    }
  })
})
