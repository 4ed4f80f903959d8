/**
 * OAuth logins end to end on the devnet (docs/attestor.md §3, §4 "OAuth start / callback / verify
 * rules"; docs/protocol.md §9 stand-ins, §10 OAuth start and callback): for microblog, codehost and
 * community, start → the provider URL → the callback → a session for the user chosen with
 * `devnet_user`, its token revoked at the provider, the user's launched escrow listed and a bind
 * signed for the stealth owner fixed at start. Then every refusal, each with its status and code
 * and no session made: replayed, unknown and expired states, a wrong PKCE verifier, a refused code,
 * a user who declines, a provider down, slow or answering garbage, a redirect off the allow-list,
 * ids in the legacy query, the legacy start disabled, a platform without an app; a login started
 * before the user's contest, completed after it.
 */
import { Effect } from "effect"
import type { Address, Hex } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { DEVNET_METRICS_TOKEN, DEVNET_REDIRECT_ALLOWLIST, DEVNET_SAMPLE_USER } from "../../layers/devnet.js"
import type { OAuthCallbackPlatform } from "../../schema/attestor.js"
import { loginLanding, newLoginSecret } from "../../src/client.js"
import type { StandInPlatform } from "../../src/devnet/oauthStandIns.js"
import { AttestorClient } from "./support/attestorClient.js"
import { VaultDevnet } from "./support/relayerDevnet.js"

let net: VaultDevnet
/** The devnet's attestor, with every OAuth app at the stand-ins. */
let attestor: AttestorClient
const STRICT_STATE_TTL_SECONDS = 5
/**
 * One with 5-second states, a 500 ms provider timeout, no legacy GET start and no community app.
 * The states outlive a login's own steps on a loaded machine (the slow provider's test needs its
 * state valid until the callback); the expired state's test waits them out.
 */
let strict: AttestorClient
/** One taking the specs' wire unchanged: `LOGIN_CHALLENGE=optional`. */
let lenient: AttestorClient

/** Every request comes from loopback: one client address, whose unfinished starts pile up here. */
const common = {
  RATE_LIMIT_BURST: "1000",
  RATE_LIMIT_PER_MINUTE: "1000",
  OAUTH_STATES_PER_CLIENT: "1000",
  INDEXER_POLL_INTERVAL_MS: "200"
}

beforeAll(async () => {
  net = await VaultDevnet.start("attestor-oauth")
  attestor = await AttestorClient.start(net, common, { standIns: true })
  strict = await AttestorClient.start(
    net,
    {
      ...common,
      OAUTH_STATE_TTL_SECONDS: String(STRICT_STATE_TTL_SECONDS),
      OAUTH_PROVIDER_TIMEOUT_MS: "500",
      OAUTH_GET_START: "false",
      DATA_DIR: `${net.chain.dir}/data/attestor-strict`
    },
    { standIns: true, oauthPlatforms: ["microblog", "codehost"] }
  )
  lenient = await AttestorClient.start(
    net,
    { ...common, LOGIN_CHALLENGE: "optional", DATA_DIR: `${net.chain.dir}/data/attestor-lenient` },
    { standIns: true, oauthPlatforms: ["codehost"] }
  )
}, 300_000)

afterAll(async () => {
  await attestor?.stop()
  await strict?.stop()
  await lenient?.stop()
  await net?.dispose()
})

const newOwner = (): Address => privateKeyToAccount(generatePrivateKey()).address

const json = async (res: Response) => (await res.json()) as Record<string, unknown>

const expectRefusal = async (res: Response, status: number, code: string) => {
  expect(res.status).toBe(status)
  expect(await json(res)).toMatchObject({ code })
}

/** POST /v1/oauth/:platform/start; the raw answer. */
const startRaw = (on: AttestorClient, platform: string, body: unknown) =>
  on.post(`/v1/oauth/${platform}/start`, body)

/**
 * Starts a login through the typed client, as a client does: a fresh login secret kept, its
 * challenge sent (unless `loginChallenge: false`). The provider URL, the state and the secret.
 */
const start = async (
  on: AttestorClient,
  platform: OAuthCallbackPlatform,
  stealthOwner: Address,
  extra: {
    readonly redirect?: string
    readonly ids?: ReadonlyArray<Hex>
    readonly loginChallenge?: false
  } = {}
) => {
  const { loginChallenge: withChallenge, ...rest } = extra
  const { loginSecret, loginChallenge } = newLoginSecret()
  const started = await Effect.runPromise(
    on.client.logins
      .oauthStart({
        path: { platform },
        payload: { stealthOwner, ...rest, ...(withChallenge === false ? {} : { loginChallenge }) } as never
      })
      .pipe(
        Effect.flatMap((started) =>
          "url" in started
            ? Effect.succeed(started)
            : Effect.dieMessage("an OAuth start answers { url, state }")
        )
      )
  )
  return { ...started, loginSecret: withChallenge === false ? undefined : loginSecret }
}

/** Fetches the provider URL (as the browser does) and returns where it sends the browser back. */
const authorize = async (url: string, params: Record<string, string> = {}) => {
  const target = new URL(url)
  for (const [k, v] of Object.entries(params)) target.searchParams.set(k, v)
  const res = await fetch(target, { redirect: "manual" })
  expect(res.status).toBe(302)
  const location = res.headers.get("location")
  expect(location).not.toBeNull()
  return location as string
}

/** The browser arriving at the attestor's callback. */
const callback = (location: string) => fetch(location, { redirect: "manual" })

const metric = async (on: AttestorClient, name: string, labels: Record<string, string>) => {
  const text = await Effect.runPromise(
    on.client.operator.metrics({ headers: { authorization: `Bearer ${DEVNET_METRICS_TOKEN}` } })
  )
  for (const line of text.split("\n")) {
    if (Object.keys(labels).length === 0 && line.startsWith(`${name} `))
      return Number(line.slice(line.lastIndexOf(" ") + 1))
    if (!line.startsWith(`${name}{`)) continue
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`)))
      return Number(line.slice(line.lastIndexOf(" ") + 1))
  }
  return 0
}

const okLogins = (on: AttestorClient, platform: string) =>
  metric(on, "attestor_logins_total", { platform, outcome: "ok" })

const standIns = (on: AttestorClient) => {
  if (on.standIns === undefined) throw new Error("started without stand-ins")
  return on.standIns
}

const users: Record<StandInPlatform, string> = {
  microblog: "2000011",
  codehost: "2000013",
  community: "2000015"
}

describe.each(["microblog", "codehost", "community"] as const)("%s login on the devnet", (platform) => {
  let escrowId: Hex

  beforeAll(async () => {
    const commitment = await attestor.commit(users[platform], platform)
    escrowId = (await attestor.launchTo(commitment, `OA${platform.slice(0, 3).toUpperCase()}`)).id
    await attestor.indexed(await attestor.head())
  }, 120_000)

  it("start → provider → callback: a session for the devnet user, the token revoked, escrows listed, a bind for the stealth owner of start", {
    timeout: 60_000
  }, async () => {
    const stealthOwner = newOwner()
    const before = await okLogins(attestor, platform)
    const { url, state, loginSecret } = await start(attestor, platform, stealthOwner)
    // Only what docs/protocol.md §10 lists travels in the provider URL: never the stealth owner.
    const query = new URL(url).searchParams
    const pkce = platform !== "codehost"
    expect([...query.keys()].sort()).toEqual(
      [
        "response_type",
        "client_id",
        "redirect_uri",
        "state",
        ...(platform === "codehost" ? [] : ["scope"]),
        ...(pkce ? ["code_challenge", "code_challenge_method"] : [])
      ].sort()
    )
    expect(query.get("state")).toBe(state)
    expect(url.toLowerCase()).not.toContain(stealthOwner.slice(2).toLowerCase())
    if (pkce) expect(query.get("code_challenge_method")).toBe("S256")

    const location = await authorize(url, { devnet_user: users[platform] })
    expect(location.startsWith(`${attestor.url}/v1/oauth/${platform}/callback?`)).toBe(true)
    const res = await callback(location)
    expect(res.status).toBe(200)
    const session = (await res.json()) as {
      session: string
      platform: string
      userId: string
      stealthOwner: string
      ids: Array<string>
    }
    expect(session).toMatchObject({ platform, userId: users[platform], stealthOwner, ids: [] })
    expect(await okLogins(attestor, platform)).toBe(before + 1)

    // The attestor keeps no access to the account: the token it got is revoked at the provider.
    const issued = standIns(attestor).issued(platform)
    expect(standIns(attestor).revoked(platform)).toContain(issued[issued.length - 1])

    const escrows = (
      await json(await attestor.post("/v1/escrows", { session: session.session, loginSecret }))
    ).escrows as Array<{
      id: string
    }>
    expect(escrows.map((e) => e.id)).toEqual([escrowId])
    const binds = (await json(await attestor.post("/v1/bind", { session: session.session, loginSecret })))
      .binds as Array<{
      beneficiaryId: string
      newOwner: string
    }>
    expect(binds).toHaveLength(1)
    expect(binds[0]).toMatchObject({ beneficiaryId: escrowId, newOwner: stealthOwner })
  })

  it("a start with a redirect ends at <redirect>#attest=<session>", { timeout: 30_000 }, async () => {
    const stealthOwner = newOwner()
    const redirect = DEVNET_REDIRECT_ALLOWLIST
    const { url, loginSecret } = await start(attestor, platform, stealthOwner, { redirect })
    const res = await callback(await authorize(url, { devnet_user: users[platform] }))
    expect(res.status).toBe(302)
    const back = new URL(res.headers.get("location") ?? "")
    expect(`${back.origin}${back.pathname}`).toBe(redirect)
    const token = new URLSearchParams(back.hash.slice(1)).get("attest") ?? ""
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect((await attestor.post("/v1/escrows", { session: token, loginSecret })).status).toBe(200)
  })
})

describe("the devnet's sample launch", () => {
  it("is found by logging in as its microblog user", { timeout: 60_000 }, async () => {
    const { url, loginSecret } = await start(attestor, "microblog", newOwner())
    // No devnet_user: the stand-in's default microblog user is the sample launch's.
    const res = await callback(await authorize(url))
    const session = (await res.json()) as { session: string; userId: string }
    expect(session.userId).toBe(DEVNET_SAMPLE_USER.userId)
    const escrows = (
      await json(await attestor.post("/v1/escrows", { session: session.session, loginSecret }))
    ).escrows as Array<{
      id: string
    }>
    expect(escrows.map((e) => e.id)).toContain(net.chain.sampleBeneficiaryId)
  })
})

describe("OAuth refusals: each its status and code, and no session", () => {
  it("a replayed state is 400 bad_request", async () => {
    const { url } = await start(attestor, "microblog", newOwner())
    const location = await authorize(url)
    expect((await callback(location)).status).toBe(200)
    const before = await okLogins(attestor, "microblog")
    await expectRefusal(await callback(location), 400, "bad_request")
    expect(await okLogins(attestor, "microblog")).toBe(before)
  })

  it("an unknown state is 400 bad_request", async () => {
    await expectRefusal(
      await callback(`${attestor.url}/v1/oauth/microblog/callback?code=abc&state=${"u".repeat(43)}`),
      400,
      "bad_request"
    )
  })

  it("a state used on another platform's callback is 400 bad_request", async () => {
    const { url } = await start(attestor, "microblog", newOwner())
    const location = new URL(await authorize(url))
    location.pathname = "/v1/oauth/codehost/callback"
    await expectRefusal(await callback(location.toString()), 400, "bad_request")
  })

  it("an expired state is 400 bad_request", { timeout: 20_000 }, async () => {
    const { url } = await start(strict, "microblog", newOwner())
    const location = await authorize(url)
    await new Promise((resolve) => setTimeout(resolve, STRICT_STATE_TTL_SECONDS * 1_000 + 1_100))
    await expectRefusal(await callback(location), 400, "bad_request")
  })

  it("a code issued for another PKCE challenge is 401 invalid_session", async () => {
    const before = await okLogins(attestor, "community")
    const { url, state } = await start(attestor, "community", newOwner())
    // The same login, but the provider was shown another challenge: the verifier the attestor
    // holds does not match it.
    const forged = new URL(url)
    forged.searchParams.set("code_challenge", "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
    const location = await authorize(forged.toString())
    expect(new URL(location).searchParams.get("state")).toBe(state)
    await expectRefusal(await callback(location), 401, "invalid_session")
    expect(await okLogins(attestor, "community")).toBe(before)
  })

  it("a code the provider refuses is 401 invalid_session (codehost answers 200 with an error)", async () => {
    for (const platform of ["microblog", "codehost", "community"] as const) {
      const { url } = await start(attestor, platform, newOwner())
      const location = new URL(await authorize(url))
      location.searchParams.set("code", "not-a-code-the-provider-issued")
      await expectRefusal(await callback(location.toString()), 401, "invalid_session")
    }
  })

  it("a user who declines is 401 access_denied; with a redirect, <redirect>#error=access_denied", async () => {
    const { url } = await start(attestor, "microblog", newOwner())
    const declined = await callback(await authorize(url, { devnet_deny: "1" }))
    expect(declined.status).toBe(401)
    expect(await declined.json()).toEqual({
      error: "the login was declined at the provider: log in again and authorize it",
      code: "access_denied"
    })
    const redirect = DEVNET_REDIRECT_ALLOWLIST
    const withRedirect = await start(attestor, "codehost", newOwner(), { redirect })
    const res = await callback(await authorize(withRedirect.url, { devnet_deny: "1" }))
    expect(res.status).toBe(302)
    expect(res.headers.get("location")).toBe(`${redirect}#error=access_denied`)
    expect(
      await metric(attestor, "attestor_logins_total", { platform: "codehost", outcome: "access_denied" })
    ).toBeGreaterThan(0)
  })

  it("a provider that is down is 503 unavailable", async () => {
    const provider = standIns(attestor)
    const { url } = await start(attestor, "microblog", newOwner())
    const location = await authorize(url)
    provider.setFault("microblog", "token", "down")
    try {
      await expectRefusal(await callback(location), 503, "unavailable")
    } finally {
      provider.setFault("microblog", "token", undefined)
    }
  })

  it("a slow provider is 503 unavailable within the provider timeout", { timeout: 20_000 }, async () => {
    const provider = standIns(strict)
    const { url } = await start(strict, "codehost", newOwner())
    const location = await authorize(url)
    provider.setFault("codehost", "token", "slow")
    try {
      const started = Date.now()
      await expectRefusal(await callback(location), 503, "unavailable")
      expect(Date.now() - started).toBeLessThan(10_000)
    } finally {
      provider.setFault("codehost", "token", undefined)
    }
  })

  it.each(["huge", "missing_id", "non_numeric_id", "server_error"] as const)(
    "a user answer that is %s is 503 unavailable, and the token is still revoked",
    async (fault) => {
      const provider = standIns(attestor)
      const before = await okLogins(attestor, "community")
      const { url } = await start(attestor, "community", newOwner())
      const location = await authorize(url)
      provider.setFault("community", "user", fault)
      try {
        await expectRefusal(await callback(location), 503, "unavailable")
      } finally {
        provider.setFault("community", "user", undefined)
      }
      const issued = provider.issued("community")
      expect(provider.revoked("community")).toContain(issued[issued.length - 1])
      expect(await okLogins(attestor, "community")).toBe(before)
    }
  )

  it("a redirect that is not exactly an allow-list entry is 400 bad_request naming redirect", async () => {
    const entry = new URL(DEVNET_REDIRECT_ALLOWLIST)
    for (const redirect of [
      "https://elsewhere.example/x",
      "http://localhost:5174/after-login",
      // The allowed origin, another path.
      `${entry.origin}/`,
      `${entry.origin}/after-login/x`,
      `${entry.origin}/other`,
      // The entry with a query or a fragment of its own.
      `${DEVNET_REDIRECT_ALLOWLIST}?next=https://elsewhere.example`,
      `${DEVNET_REDIRECT_ALLOWLIST}#x`,
      // Read as host evil.com by RFC 3986 parsers; as a path of the allowed origin by WHATWG.
      `${entry.origin}\\@evil.com`,
      `http://user@${entry.host}${entry.pathname}`
    ]) {
      for (const platform of ["microblog", "codehost"] as const) {
        const res = await startRaw(attestor, platform, {
          stealthOwner: newOwner(),
          redirect,
          loginChallenge: newLoginSecret().loginChallenge
        })
        expect(res.status, redirect).toBe(400)
        const body = await json(res)
        expect(body.code).toBe("bad_request")
        expect(String(body.error)).toMatch(/^redirect: /)
      }
    }
  })

  it("the callback's Location is the allow-list entry, not the redirect as sent", {
    timeout: 30_000
  }, async () => {
    // Same scheme, host, port and path, written differently: accepted, and sent back as the entry.
    const entry = new URL(DEVNET_REDIRECT_ALLOWLIST)
    const written = `HTTP://LOCALHOST:${entry.port}/x/..${entry.pathname}`
    const { url } = await start(attestor, "microblog", newOwner(), { redirect: written })
    const res = await callback(await authorize(url))
    expect(res.status).toBe(302)
    const location = res.headers.get("location") ?? ""
    expect(location.startsWith(`${DEVNET_REDIRECT_ALLOWLIST}#attest=`)).toBe(true)
  })

  it("a platform without an app is 400 unsupported, and /v1/info does not list it", async () => {
    await expectRefusal(await startRaw(strict, "community", { stealthOwner: newOwner() }), 400, "unsupported")
    await expectRefusal(
      await startRaw(attestor, "messenger", { stealthOwner: newOwner() }),
      400,
      "unsupported"
    )
    const info = await Effect.runPromise(strict.client.info.info())
    expect(info.platforms).toEqual(["microblog", "messenger", "codehost", "fedsocial"])
    const full = await Effect.runPromise(attestor.client.info.info())
    expect(full.platforms).toEqual(["microblog", "messenger", "codehost", "fedsocial", "community"])
  })
})

describe("the legacy GET start", () => {
  const owner = newOwner()
  const legacy = (on: AttestorClient, query: string) =>
    fetch(`${on.url}/v1/oauth/microblog/start?${query}`, { redirect: "manual" })

  it("302 to the provider, or { url, state } with format=json; the login completes", async () => {
    const res = await legacy(
      attestor,
      `stealthOwner=${owner}&loginChallenge=${newLoginSecret().loginChallenge}`
    )
    expect(res.status).toBe(302)
    const provider = res.headers.get("location") ?? ""
    expect(provider.startsWith(standIns(attestor).endpoints("microblog").authorize)).toBe(true)
    const { loginSecret, loginChallenge } = newLoginSecret()
    const asJson = await legacy(
      attestor,
      `stealthOwner=${owner}&format=json&loginChallenge=${loginChallenge}`
    )
    expect(asJson.status).toBe(200)
    const { url } = (await asJson.json()) as { url: string }
    const session = (await (await callback(await authorize(url))).json()) as {
      session: string
      stealthOwner: string
    }
    expect(session.stealthOwner).toBe(owner)
    // The query's challenge binds the session like the body's does.
    await expectRefusal(
      await attestor.post("/v1/escrows", { session: session.session }),
      401,
      "invalid_session"
    )
    expect((await attestor.post("/v1/escrows", { session: session.session, loginSecret })).status).toBe(200)
  })

  it("without a loginChallenge is 400 bad_request naming it (LOGIN_CHALLENGE=required)", async () => {
    const res = await legacy(attestor, `stealthOwner=${owner}`)
    expect(res.status).toBe(400)
    expect(await json(res)).toMatchObject({
      code: "bad_request",
      error: expect.stringMatching(/^loginChallenge: /)
    })
  })

  it("refuses ids in the query with 400 bad_request", async () => {
    const id = `0x${"11".repeat(32)}`
    await expectRefusal(await legacy(attestor, `stealthOwner=${owner}&id=${id}`), 400, "bad_request")
    await expectRefusal(
      await legacy(attestor, `stealthOwner=${owner}&ids=${id}&ids=${id}`),
      400,
      "bad_request"
    )
  })

  it("answers 404 not_found with OAUTH_GET_START=false", async () => {
    await expectRefusal(await legacy(strict, `stealthOwner=${owner}`), 404, "not_found")
  })

  it("is marked deprecated in the OpenAPI document", async () => {
    const document = (await (await fetch(`${attestor.url}/v1/openapi.json`)).json()) as {
      paths: Record<string, Record<string, { deprecated?: boolean }>>
    }
    expect(document.paths["/v1/oauth/{platform}/start"]?.get?.deprecated).toBe(true)
    expect(document.paths["/v1/oauth/{platform}/start"]?.post?.deprecated).toBeUndefined()
  })
})

describe("login CSRF: a session answers only to the client that started its login", () => {
  const victim = "2000021"
  let escrowId: Hex

  beforeAll(async () => {
    escrowId = (await attestor.launchTo(await attestor.commit(victim, "codehost"), "CSRF")).id
    await attestor.indexed(await attestor.head())
  }, 120_000)

  const bindSignatures = (on: AttestorClient) => metric(on, "attestor_bind_signatures_total", {})

  it("the attacker's start, completed at the provider as the victim: the redirect's token is 401 without the attacker's secret", {
    timeout: 60_000
  }, async () => {
    // The attacker starts with its own key and its own challenge, and hands the provider URL out.
    const attackerKey = newOwner()
    const attack = await start(attestor, "codehost", attackerKey, { redirect: DEVNET_REDIRECT_ALLOWLIST })
    // The victim opens it; codehost asks no consent of an app it authorised: straight back.
    const res = await callback(await authorize(attack.url, { devnet_user: victim }))
    expect(res.status).toBe(302)
    const landing = res.headers.get("location") ?? ""
    const token = new URLSearchParams(new URL(landing).hash.slice(1)).get("attest") ?? ""
    expect(token).not.toBe("")
    // The victim's client started no login: it ignores the fragment.
    expect(loginLanding(landing, undefined)).toBeUndefined()
    // A client that does pick the token up has only its own secret, or none.
    const signedBefore = await bindSignatures(attestor)
    const victimsOwnSecret = newLoginSecret().loginSecret
    for (const extra of [{}, { loginSecret: victimsOwnSecret }]) {
      await expectRefusal(
        await attestor.post("/v1/escrows", { session: token, ...extra }),
        401,
        "invalid_session"
      )
      await expectRefusal(
        await attestor.post("/v1/bind", { session: token, ...extra }),
        401,
        "invalid_session"
      )
      await expectRefusal(
        await attestor.post("/v1/bind", { session: token, ids: [escrowId], ...extra }),
        401,
        "invalid_session"
      )
    }
    expect(await bindSignatures(attestor)).toBe(signedBefore)
    // The same token with the secret of the start is the session: here the attacker's own, which
    // is what the redirect keeps out of its hands.
    const listed = await json(
      await attestor.post("/v1/escrows", { session: token, loginSecret: attack.loginSecret })
    )
    expect((listed.escrows as Array<{ id: string }>).map((e) => e.id)).toContain(escrowId)
    // And it signs: the counter read above moves when a signature leaves, so its standing still
    // while the token was refused means none did.
    const signed = await json(
      await attestor.post("/v1/bind", { session: token, loginSecret: attack.loginSecret, ids: [escrowId] })
    )
    expect(signed.binds).toHaveLength(1)
    expect(await bindSignatures(attestor)).toBe(signedBefore + 1)
  })

  it("a codehost start without a challenge is 400 bad_request (LOGIN_CHALLENGE=required), for every redirect platform", async () => {
    for (const platform of ["microblog", "codehost", "community"] as const) {
      const res = await startRaw(attestor, platform, {
        stealthOwner: newOwner(),
        redirect: DEVNET_REDIRECT_ALLOWLIST
      })
      expect(res.status).toBe(400)
      expect(await json(res)).toMatchObject({
        code: "bad_request",
        error: expect.stringMatching(/^loginChallenge: /)
      })
    }
  })

  it("LOGIN_CHALLENGE=optional: the specs' flow works unchanged, and a client's secret still refuses a session it did not start", {
    timeout: 60_000
  }, async () => {
    const stealthOwner = newOwner()
    const plain = await start(lenient, "codehost", stealthOwner, {
      redirect: DEVNET_REDIRECT_ALLOWLIST,
      loginChallenge: false
    })
    const res = await callback(await authorize(plain.url, { devnet_user: victim }))
    expect(res.status).toBe(302)
    const token =
      new URLSearchParams(new URL(res.headers.get("location") ?? "").hash.slice(1)).get("attest") ?? ""
    const escrows = await json(await lenient.post("/v1/escrows", { session: token }))
    expect((escrows.escrows as Array<{ id: string }>).map((e) => e.id)).toContain(escrowId)
    const binds = (await json(await lenient.post("/v1/bind", { session: token, ids: [escrowId] })))
      .binds as Array<{
      newOwner: string
    }>
    expect(binds).toEqual([expect.objectContaining({ newOwner: stealthOwner })])
    // A client that always sends a challenge presents its secret: a session started without one
    // (an attacker's, under this mode) is refused.
    await expectRefusal(
      await lenient.post("/v1/escrows", { session: token, loginSecret: newLoginSecret().loginSecret }),
      401,
      "invalid_session"
    )
    // A challenge sent under this mode binds the session as it does under `required`.
    const bound = await start(lenient, "codehost", newOwner(), { redirect: DEVNET_REDIRECT_ALLOWLIST })
    const landed = await callback(await authorize(bound.url, { devnet_user: victim }))
    const boundToken = new URLSearchParams(new URL(landed.headers.get("location") ?? "").hash.slice(1)).get(
      "attest"
    )
    await expectRefusal(await lenient.post("/v1/escrows", { session: boundToken }), 401, "invalid_session")
    expect(
      (await lenient.post("/v1/escrows", { session: boundToken, loginSecret: bound.loginSecret })).status
    ).toBe(200)
  })
})

describe("a contest: an OAuth login started before it makes no session after it", () => {
  const victim = "2000023"
  let escrowId: Hex

  beforeAll(async () => {
    escrowId = (await attestor.launchTo(await attestor.commit(victim, "codehost"), "CNTO")).id
    await attestor.indexed(await attestor.head())
  }, 120_000)

  it("the attacker's start, made before the victim contests, completed at the provider as the victim afterwards: 401 invalid_session, no session", {
    timeout: 60_000
  }, async () => {
    // The attacker starts with its own key and challenge, and keeps the provider URL.
    const attack = await start(attestor, "codehost", newOwner())
    // The victim logs in on its own, in a later second (a login counts as started before the
    // contest when it started in an earlier second), and contests.
    await new Promise((resolve) => setTimeout(resolve, 1_100))
    const own = await start(attestor, "codehost", newOwner())
    const landed = await callback(await authorize(own.url, { devnet_user: victim }))
    expect(landed.status).toBe(200)
    const session = ((await json(landed)) as { session: string }).session
    const contested = await attestor.post("/v1/bind", {
      session,
      loginSecret: own.loginSecret,
      ids: [escrowId],
      contest: true
    })
    expect({ status: contested.status, body: await json(contested) }).toEqual({
      status: 200,
      body: { binds: [] }
    })
    // The victim's browser then completes the attacker's login.
    const okBefore = await okLogins(attestor, "codehost")
    const res = await callback(await authorize(attack.url, { devnet_user: victim }))
    expect({ status: res.status, body: await json(res) }).toEqual({
      status: 401,
      body: {
        code: "invalid_session",
        error: "this login was started before the account's last contest: log in again"
      }
    })
    expect(await okLogins(attestor, "codehost")).toBe(okBefore)
    // A login started after the contest makes a session.
    const after = await start(attestor, "codehost", newOwner())
    expect((await callback(await authorize(after.url, { devnet_user: victim }))).status).toBe(200)
  })
})
