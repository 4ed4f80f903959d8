import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { newLoginSecret } from "../../src/client.js"
import { serverUrl } from "../../src/http/server.js"
import { embeddedAttestor, offlineAttestorEnv } from "../support/embeddedAttestor.js"

const STEALTH_OWNER = "0x90F79bf6EB2c4f870365E785982E1f101E93b906"
const BURST = 2

const baseEnv = {
  ...offlineAttestorEnv,
  HOST: "127.0.0.1",
  PORT: "0",
  TRUST_PROXY: "1",
  RATE_LIMIT_BURST: String(BURST),
  RATE_LIMIT_PER_MINUTE: "1",
  // A codehost app whose provider is never called here: starts only build its URL.
  CODEHOST_CLIENT_ID: "codehost-client",
  CODEHOST_CLIENT_SECRET: "codehost-secret",
  CODEHOST_AUTHORIZE_URL: "http://127.0.0.1:9/login/oauth/authorize",
  CODEHOST_TOKEN_URL: "http://127.0.0.1:9/login/oauth/access_token",
  CODEHOST_REVOKE_URL: "http://127.0.0.1:9/applications/{client_id}/token",
  CODEHOST_USER_URL: "http://127.0.0.1:9/user",
  FEDSOCIAL_DOMAIN: "wallet.example",
  FEDSOCIAL_URI: "https://wallet.example/login"
}

/** The attestor's server on an embedded database, no indexer; its log lines into `lines`. */
const serve = embeddedAttestor

/** fedsocial on Optimism's public RPC (the default), the legacy GET start served. */
const publicRpcLines: Array<string> = []
const served = serve(baseEnv, publicRpcLines)
/** fedsocial on a private RPC, the legacy GET start off, and no community app. */
const privateRpcLines: Array<string> = []
const disabled = serve(
  { ...baseEnv, OAUTH_GET_START: "false", FEDSOCIAL_RPC_URL: "http://127.0.0.1:9/optimism" },
  privateRpcLines
)
/** Small OAuth state bounds, and a per-IP bucket that never empties first. */
const PER_CLIENT = 3
const bounded = serve(
  {
    ...baseEnv,
    RATE_LIMIT_BURST: "1000",
    OAUTH_STATES_PER_CLIENT: String(PER_CLIENT),
    OAUTH_STATES_MAX: "8"
  },
  []
)
let base = ""
let off = ""
let capped = ""
beforeAll(async () => {
  base = await served.runPromise(serverUrl)
  off = await disabled.runPromise(serverUrl)
  capped = await bounded.runPromise(serverUrl)
}, 120_000)
afterAll(async () => {
  await Promise.all([served.dispose(), disabled.dispose(), bounded.dispose()])
})

let clients = 0
/** A client address of its own: every test starts with a full bucket. */
const newClient = () => `198.51.100.${++clients}`

const get = (url: string, client: string) =>
  fetch(url, { headers: { "x-forwarded-for": client }, redirect: "manual" })

const legacyQuery = () =>
  new URLSearchParams({
    stealthOwner: STEALTH_OWNER,
    loginChallenge: newLoginSecret().loginChallenge,
    format: "json"
  }).toString()

const expectRateLimited = async (res: Response) => {
  expect(res.status).toBe(429)
  expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0)
  expect(await res.json()).toEqual({ error: "too many requests, retry later", code: "rate_limited" })
}

describe("the OAuth routes count against the per-IP limit", () => {
  it("the legacy GET start: each costs a token, then 429 rate_limited with Retry-After", async () => {
    const client = newClient()
    for (let i = 0; i < BURST; i++) {
      const res = await get(`${base}/v1/oauth/codehost/start?${legacyQuery()}`, client)
      expect(res.status).toBe(200)
      expect(await res.json()).toMatchObject({ url: expect.stringContaining("client_id=codehost-client") })
    }
    await expectRateLimited(await get(`${base}/v1/oauth/codehost/start?${legacyQuery()}`, client))
    // Other reads are free: the empty bucket does not hold them up.
    expect((await get(`${base}/v1/info`, client)).status).toBe(200)
    // Another client's bucket is its own.
    expect((await get(`${base}/v1/oauth/codehost/start?${legacyQuery()}`, newClient())).status).toBe(200)
  })

  it("the callback: each costs a token, then 429 rate_limited with Retry-After", async () => {
    const client = newClient()
    for (let i = 0; i < BURST; i++) {
      const res = await get(`${base}/v1/oauth/codehost/callback?code=c0de&state=unknown-state-${i}`, client)
      expect(res.status).toBe(400)
      expect(await res.json()).toMatchObject({ code: "bad_request" })
    }
    await expectRateLimited(await get(`${base}/v1/oauth/codehost/callback?code=c0de&state=another`, client))
    expect((await get(`${base}/v1/info`, client)).status).toBe(200)
  })
})

const postStart = (on: string, platform: string, client: string) =>
  fetch(`${on}/v1/oauth/${platform}/start`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-forwarded-for": client },
    body: JSON.stringify({ stealthOwner: STEALTH_OWNER, loginChallenge: newLoginSecret().loginChallenge })
  })

const expectStatesFull = async (res: Response, message: string) => {
  expect(res.status).toBe(429)
  // Every state counted was made in this file's last seconds: the first expires in about 600 s.
  expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(500)
  expect(await res.json()).toEqual({ error: message, code: "rate_limited" })
}

const CLIENT_FULL =
  "too many logins started from this address and not finished: finish one, or retry once one has expired"
const ALL_FULL = "too many logins started and not finished on this attestor: retry later"

describe("live login states are bounded (OAUTH_STATES_PER_CLIENT, OAUTH_STATES_MAX)", () => {
  it("an address holding its bound of unfinished starts gets 429 rate_limited, for OAuth and fedsocial alike", async () => {
    const client = newClient()
    for (const platform of ["codehost", "fedsocial", "codehost"])
      expect((await postStart(capped, platform, client)).status).toBe(200)
    await expectStatesFull(await postStart(capped, "codehost", client), CLIENT_FULL)
    await expectStatesFull(await postStart(capped, "fedsocial", client), CLIENT_FULL)
    const legacy = await get(`${capped}/v1/oauth/codehost/start?${legacyQuery()}`, client)
    await expectStatesFull(legacy, CLIENT_FULL)
    // Another address is counted apart.
    expect((await postStart(capped, "codehost", newClient())).status).toBe(200)
  })

  it("all addresses together are bounded too", async () => {
    // 4 states from the test above, then 4 more from addresses of their own: 8, the total.
    for (let i = 0; i < 4; i++) expect((await postStart(capped, "codehost", newClient())).status).toBe(200)
    await expectStatesFull(await postStart(capped, "fedsocial", newClient()), ALL_FULL)
  })
})

describe("OAUTH_GET_START=false", () => {
  const id = `0x${"11".repeat(32)}`
  const queries = [
    ["a good query", () => legacyQuery()],
    ["an empty query", () => ""],
    ["a bad stealth owner", () => "stealthOwner=0x1234&format=json"],
    ["an id", () => `${legacyQuery()}&id=${id}`],
    ["ids", () => `${legacyQuery()}&ids=${id}&ids=${id}`],
    ["an unknown format and a stray field", () => `${legacyQuery()}&format=xml&extra=1`]
  ] as const

  it.each(queries)(
    "the legacy GET start answers 404 not_found for %s, on every platform",
    async (_, query) => {
      // codehost has an app, community none, and "bogus" is no platform: the same answer for each.
      for (const platform of ["codehost", "community", "bogus"]) {
        const res = await get(`${off}/v1/oauth/${platform}/start?${query()}`, newClient())
        expect({ platform, status: res.status }).toEqual({ platform, status: 404 })
        expect(await res.json()).toEqual({
          error: "GET /v1/oauth/:platform/start is disabled: use POST",
          code: "not_found"
        })
      }
    }
  )

  it("the POST start still answers", async () => {
    const res = await fetch(`${off}/v1/oauth/codehost/start`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-forwarded-for": newClient() },
      body: JSON.stringify({ stealthOwner: STEALTH_OWNER, loginChallenge: newLoginSecret().loginChallenge })
    })
    expect(res.status).toBe(200)
    expect(await res.json()).toMatchObject({ url: expect.stringContaining("client_id=codehost-client") })
  })
})

describe("fedsocial's registry RPC at start-up", () => {
  const rpcLines = (lines: ReadonlyArray<string>) =>
    lines.filter((line) => line.includes("FEDSOCIAL_RPC_URL"))

  it("Optimism's public endpoint (the default): exactly one warning line, naming the setting and not the URL", () => {
    const warned = rpcLines(publicRpcLines)
    expect(warned).toHaveLength(1)
    expect(warned[0]).toContain("level=WARN")
    expect(warned[0]).toContain("rate-limited")
    expect(publicRpcLines.join("\n")).not.toContain("optimism.io")
  })

  it("a private RPC: no warning", () => {
    expect(privateRpcLines.length).toBeGreaterThan(0)
    expect(rpcLines(privateRpcLines)).toEqual([])
  })
})
