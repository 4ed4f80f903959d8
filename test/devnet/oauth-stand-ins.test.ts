/**
 * The devnet's OAuth provider stand-ins (src/devnet/oauthStandIns.ts, docs/protocol.md §9): for each of
 * microblog, codehost and community the whole authorize → token → user → revoke flow, every refusal
 * the real provider makes in its own shape (GitHub's 200-with-error included), the handle
 * directories, the faults a test can switch on, arctic's OAuth2Client against them, and the scoped
 * Effect flavour.
 */
import { createHash, randomBytes } from "node:crypto"
import { get as httpGet } from "node:http"
import { CodeChallengeMethod, generateCodeVerifier, generateState, OAuth2Client } from "arctic"
import { Effect } from "effect"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import {
  DEFAULT_DEVNET_USERS,
  type OAuthStandIns,
  oauthStandIns,
  type StandInClient,
  type StandInPlatform,
  startOAuthStandIns
} from "../../src/devnet/oauthStandIns.js"

const PLATFORMS: ReadonlyArray<StandInPlatform> = ["microblog", "codehost", "community"]
const PKCE: Record<StandInPlatform, boolean> = { microblog: true, codehost: false, community: true }

// The callbacks carry a query of their own, which the redirect must keep.
const clients: Record<StandInPlatform, StandInClient> = {
  microblog: {
    clientId: "mb-client",
    clientSecret: "mb-secret",
    redirectUri: "http://127.0.0.1:9/v1/oauth/microblog/callback?from=devnet"
  },
  codehost: {
    clientId: "Iv1.codehost",
    clientSecret: "ch-secret",
    redirectUri: "http://127.0.0.1:9/v1/oauth/codehost/callback"
  },
  community: {
    clientId: "1234567890",
    clientSecret: "cm-secret",
    redirectUri: "http://127.0.0.1:9/v1/oauth/community/callback"
  }
}

const SCOPES: Record<StandInPlatform, string> = {
  microblog: "users.read tweet.read",
  codehost: "",
  community: "identify"
}

let standIns: OAuthStandIns

beforeAll(async () => {
  standIns = await startOAuthStandIns({ clients })
})

afterAll(async () => {
  await standIns.close()
})

afterEach(() => {
  for (const platform of PLATFORMS)
    for (const endpoint of ["authorize", "token", "revoke", "user", "handle"] as const)
      standIns.setFault(platform, endpoint, undefined)
})

const challengeOf = (verifier: string) => createHash("sha256").update(verifier).digest("base64url")
const newVerifier = () => randomBytes(32).toString("base64url")
const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString("base64")}`

interface AuthorizeOptions {
  readonly verifier?: string
  readonly state?: string
  readonly query?: Record<string, string>
  readonly omit?: ReadonlyArray<string>
}

const authorizeUrl = (platform: StandInPlatform, options: AuthorizeOptions = {}): URL => {
  const url = new URL(standIns.endpoints(platform).authorize)
  const params: Record<string, string> = {
    response_type: "code",
    client_id: clients[platform].clientId,
    redirect_uri: clients[platform].redirectUri,
    state: options.state ?? "state-1",
    scope: SCOPES[platform]
  }
  if (PKCE[platform] && options.verifier !== undefined) {
    params.code_challenge = challengeOf(options.verifier)
    params.code_challenge_method = "S256"
  }
  Object.assign(params, options.query)
  for (const key of options.omit ?? []) delete params[key]
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v)
  return url
}

const get = (url: URL | string, headers: Record<string, string> = {}) =>
  fetch(url, { redirect: "manual", headers })

/** A browser's navigation (`fetch` may not send `Sec-Fetch-Mode`): status, content type, body. */
const navigate = (url: URL) =>
  new Promise<{ status: number; contentType: string; body: string }>((resolve, reject) => {
    const req = httpGet(url, { headers: { "sec-fetch-mode": "navigate", accept: "text/html" } }, (res) => {
      let body = ""
      res.setEncoding("utf8")
      res.on("data", (chunk: string) => {
        body += chunk
      })
      res.on("end", () =>
        resolve({ status: res.statusCode ?? 0, contentType: res.headers["content-type"] ?? "", body })
      )
    })
    req.on("error", reject)
  })

/** A code from the authorize endpoint (its 302 checked on the way). */
const authorizeCode = async (platform: StandInPlatform, options: AuthorizeOptions = {}) => {
  const response = await get(authorizeUrl(platform, options))
  expect(response.status).toBe(302)
  const location = new URL(response.headers.get("location")!)
  const registered = new URL(clients[platform].redirectUri)
  expect(location.origin + location.pathname).toBe(registered.origin + registered.pathname)
  for (const [k, v] of registered.searchParams) expect(location.searchParams.get(k)).toBe(v)
  expect(location.searchParams.get("state")).toBe(options.state ?? "state-1")
  const code = location.searchParams.get("code")
  expect(code).toMatch(/^[A-Za-z0-9_-]{16,}$/)
  return code!
}

interface TokenOptions {
  readonly verifier?: string
  readonly secret?: string
  readonly redirectUri?: string
  /** Client credentials in the body instead of Basic. */
  readonly inBody?: boolean
  readonly accept?: string
}

const exchange = (platform: StandInPlatform, code: string, options: TokenOptions = {}) => {
  const client = clients[platform]
  const body = new URLSearchParams({
    grant_type: "authorization_code",
    code,
    redirect_uri: options.redirectUri ?? client.redirectUri
  })
  if (options.verifier !== undefined) body.set("code_verifier", options.verifier)
  const secret = options.secret ?? client.clientSecret
  const headers: Record<string, string> = {
    "content-type": "application/x-www-form-urlencoded",
    accept: options.accept ?? "application/json"
  }
  if (options.inBody) {
    body.set("client_id", client.clientId)
    body.set("client_secret", secret)
  } else headers.authorization = basic(client.clientId, secret)
  return fetch(standIns.endpoints(platform).token, { method: "POST", headers, body, redirect: "manual" })
}

/** A fresh access token of `user` (or the default user). */
const login = async (platform: StandInPlatform, user?: string) => {
  const verifier = newVerifier()
  const code = await authorizeCode(platform, {
    verifier,
    ...(user === undefined ? {} : { query: { devnet_user: user } })
  })
  const response = await exchange(platform, code, PKCE[platform] ? { verifier } : {})
  expect(response.status).toBe(200)
  const body = (await response.json()) as { access_token: string }
  return body.access_token
}

const readUser = (platform: StandInPlatform, token: string | undefined) =>
  get(standIns.endpoints(platform).user, token === undefined ? {} : { authorization: `Bearer ${token}` })

const idOf = (platform: StandInPlatform, body: unknown): unknown => {
  const record = body as Record<string, unknown>
  return platform === "microblog" ? (record.data as Record<string, unknown> | undefined)?.id : record.id
}

const revoke = (platform: StandInPlatform, token: string, secret = clients[platform].clientSecret) => {
  const client = clients[platform]
  if (platform === "codehost")
    return fetch(standIns.endpoints(platform).revoke, {
      method: "DELETE",
      headers: {
        authorization: basic(client.clientId, secret),
        "content-type": "application/json",
        accept: "application/vnd.github+json"
      },
      body: JSON.stringify({ access_token: token })
    })
  return fetch(standIns.endpoints(platform).revoke, {
    method: "POST",
    headers: {
      authorization: basic(client.clientId, secret),
      "content-type": "application/x-www-form-urlencoded"
    },
    body: new URLSearchParams({ token, token_type_hint: "access_token" })
  })
}

const UNAUTHORIZED: Record<StandInPlatform, unknown> = {
  microblog: { title: "Unauthorized", type: "about:blank", status: 401, detail: "Unauthorized" },
  codehost: { message: "Bad credentials", documentation_url: expect.any(String), status: "401" },
  community: { message: "401: Unauthorized", code: 0 }
}

const CODE_REFUSED: Record<StandInPlatform, { status: number; body: unknown }> = {
  microblog: {
    status: 400,
    body: {
      error: "invalid_request",
      error_description: "Value passed for the authorization code was invalid."
    }
  },
  codehost: {
    status: 200,
    body: {
      error: "bad_verification_code",
      error_description: "The code passed is incorrect or expired.",
      error_uri: expect.stringMatching(/^https:\/\/docs\.github\.com\//)
    }
  },
  community: {
    status: 400,
    body: { error: "invalid_grant", error_description: 'Invalid "code" in request.' }
  }
}

describe.each(PLATFORMS)("%s stand-in", (platform) => {
  it("runs authorize → token → user → revoke, and a revoked token no longer reads the user", async () => {
    const verifier = newVerifier()
    const code = await authorizeCode(platform, { verifier, state: "abc_123" })
    const response = await exchange(platform, code, PKCE[platform] ? { verifier } : {})
    expect(response.status).toBe(200)
    const tokens = (await response.json()) as Record<string, unknown>
    const accessToken = tokens.access_token as string
    expect(accessToken).toMatch(/^[0-9a-f]{40}$/)
    if (platform === "microblog")
      expect(tokens).toEqual({
        token_type: "bearer",
        expires_in: 7200,
        access_token: accessToken,
        scope: "users.read tweet.read"
      })
    else if (platform === "community")
      expect(tokens).toEqual({
        access_token: accessToken,
        token_type: "Bearer",
        expires_in: 604800,
        refresh_token: expect.stringMatching(/^[0-9a-f]{40}$/),
        scope: "identify"
      })
    else expect(tokens).toEqual({ access_token: accessToken, token_type: "bearer", scope: "" })
    expect(standIns.issued(platform)).toContain(accessToken)

    const user = await readUser(platform, accessToken)
    expect(user.status).toBe(200)
    const n = DEFAULT_DEVNET_USERS[platform]
    expect(await user.json()).toEqual(
      platform === "microblog"
        ? { data: { id: n, name: `Dev ${n}`, username: `dev${n}` } }
        : platform === "codehost"
          ? { login: `dev${n}`, id: Number(n), type: "User" }
          : { id: n, username: `dev${n}`, global_name: null, discriminator: "0" }
    )

    const revoked = await revoke(platform, accessToken)
    if (platform === "codehost") expect(revoked.status).toBe(204)
    else {
      expect(revoked.status).toBe(200)
      expect(await revoked.json()).toEqual(platform === "microblog" ? { revoked: true } : {})
    }
    expect(standIns.revoked(platform)).toContain(accessToken)

    const after = await readUser(platform, accessToken)
    expect(after.status).toBe(401)
    expect(await after.json()).toEqual(UNAUTHORIZED[platform])
  })

  it("logs in the user named by devnet_user, ids beyond 2^53 written exactly", async () => {
    const big = "18446744073709551615"
    const token = await login(platform, big)
    const response = await readUser(platform, token)
    expect(response.status).toBe(200)
    const text = await response.text()
    // codehost's id is a JSON number with every digit; the others' are strings.
    expect(text).toContain(platform === "codehost" ? `"id":${big}` : `"id":"${big}"`)
    const small = await login(platform, "7")
    expect(idOf(platform, await (await readUser(platform, small)).json())).toBe(
      platform === "codehost" ? 7 : "7"
    )
  })

  it("refuses a missing or unknown bearer token in the provider's shape", async () => {
    for (const token of [undefined, "f".repeat(40)]) {
      const response = await readUser(platform, token)
      expect(response.status).toBe(401)
      expect(await response.json()).toEqual(UNAUTHORIZED[platform])
    }
  })

  it("answers a page, never a redirect, for an unknown client or an unregistered redirect_uri", async () => {
    const cases: Array<AuthorizeOptions> = [
      { query: { client_id: "someone-else" } },
      { omit: ["client_id"] },
      { query: { redirect_uri: "http://evil.example/callback" } },
      { query: { redirect_uri: clients[platform].redirectUri + "/" } },
      { query: { devnet_user: "0123" } },
      { query: { devnet_user: "dev5" } },
      { query: { response_type: "token" } }
    ]
    for (const options of cases) {
      const response = await get(authorizeUrl(platform, { verifier: newVerifier(), ...options }))
      expect(response.status).toBe(400)
      expect(response.headers.get("location")).toBeNull()
      expect(response.headers.get("content-type")).toMatch(/^text\/html/)
      await response.body?.cancel()
    }
  })

  it("shows a browser's visit a consent page whose form comes back with the picked user", async () => {
    const verifier = newVerifier()
    const url = authorizeUrl(platform, { verifier, state: "state-consent" })
    const page = await navigate(url)
    expect(page.status).toBe(200)
    expect(page.contentType).toMatch(/^text\/html/)
    const html = page.body
    expect(html).toContain('id="authorize"')
    // The form repeats the request: every parameter rides along, escaped, and the user is picked.
    const hidden = new Map(
      [...html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)].map((m) => [m[1], m[2]])
    )
    expect(Object.fromEntries(hidden)).toEqual(Object.fromEntries(url.searchParams))
    const code = await authorizeCode(platform, {
      verifier,
      state: "state-consent",
      query: { devnet_user: "4242" }
    })
    const token = await exchange(platform, code, PKCE[platform] ? { verifier } : {})
    const access = ((await token.json()) as { access_token: string }).access_token
    expect(idOf(platform, await (await readUser(platform, access)).json())).toBe(
      platform === "codehost" ? 4242 : "4242"
    )
    // Scripts are never shown the page: without the navigation header consent is implied.
    expect((await get(url)).status).toBe(302)
  })

  it("answers devnet_deny=1 like a user who refused", async () => {
    const response = await get(
      authorizeUrl(platform, { verifier: newVerifier(), query: { devnet_deny: "1" } })
    )
    expect(response.status).toBe(302)
    const location = new URL(response.headers.get("location")!)
    expect(location.searchParams.get("error")).toBe("access_denied")
    expect(location.searchParams.get("state")).toBe("state-1")
    expect(location.searchParams.get("code")).toBeNull()
    expect(location.searchParams.has("error_description")).toBe(platform !== "codehost")
  })

  it("uses a code once", async () => {
    const verifier = newVerifier()
    const code = await authorizeCode(platform, { verifier })
    const options = PKCE[platform] ? { verifier } : {}
    expect((await exchange(platform, code, options)).status).toBe(200)
    const again = await exchange(platform, code, options)
    expect(again.status).toBe(CODE_REFUSED[platform].status)
    expect(await again.json()).toEqual(CODE_REFUSED[platform].body)
    const unknown = await exchange(platform, "not-a-code", options)
    expect(await unknown.json()).toEqual(CODE_REFUSED[platform].body)
  })

  it("refuses wrong client credentials in the provider's shape", async () => {
    const verifier = newVerifier()
    const code = await authorizeCode(platform, { verifier })
    const response = await exchange(platform, code, { verifier, secret: "wrong" })
    if (platform === "microblog") {
      expect(response.status).toBe(401)
      expect(await response.json()).toEqual({
        error: "unauthorized_client",
        error_description: "Missing valid authorization header"
      })
    } else if (platform === "community") {
      expect(response.status).toBe(401)
      expect(await response.json()).toEqual({ error: "invalid_client" })
    } else {
      expect(response.status).toBe(200)
      expect(await response.json()).toEqual({
        error: "incorrect_client_credentials",
        error_description: "The client_id and/or client_secret passed are incorrect.",
        error_uri: expect.stringMatching(/^https:\/\/docs\.github\.com\//)
      })
    }
    const revoked = await revoke(platform, "f".repeat(40), "wrong")
    expect(revoked.status).toBe(platform === "codehost" ? 404 : 401)
  })

  it("refuses a code exchanged with another redirect_uri", async () => {
    const verifier = newVerifier()
    const code = await authorizeCode(platform, { verifier })
    const response = await exchange(platform, code, { verifier, redirectUri: "http://127.0.0.1:9/other" })
    const body = (await response.json()) as { error: string }
    if (platform === "codehost") {
      expect(response.status).toBe(200)
      expect(body.error).toBe("redirect_uri_mismatch")
    } else {
      expect(response.status).toBe(CODE_REFUSED[platform].status)
      expect(body).toEqual(CODE_REFUSED[platform].body)
    }
  })
})

describe.each(["microblog", "community"] as const)("%s PKCE", (platform) => {
  it("requires an S256 challenge at the authorize endpoint", async () => {
    const verifier = newVerifier()
    for (const options of [
      { omit: ["code_challenge", "code_challenge_method"] },
      { omit: ["code_challenge_method"] },
      { query: { code_challenge_method: "plain", code_challenge: verifier } }
    ]) {
      const response = await get(authorizeUrl(platform, { verifier, ...options }))
      expect(response.status).toBe(400)
      expect(response.headers.get("location")).toBeNull()
      await response.body?.cancel()
    }
  })

  it("refuses a wrong or missing verifier", async () => {
    const verifier = newVerifier()
    for (const wrong of [newVerifier(), undefined]) {
      const code = await authorizeCode(platform, { verifier })
      const response = await exchange(platform, code, wrong === undefined ? {} : { verifier: wrong })
      expect(response.status).toBe(400)
      expect(await response.json()).toEqual(CODE_REFUSED[platform].body)
    }
  })
})

describe("client authentication and answer formats", () => {
  it("codehost and community take the client credentials in the body, microblog does not", async () => {
    for (const platform of PLATFORMS) {
      const verifier = newVerifier()
      const code = await authorizeCode(platform, { verifier })
      const response = await exchange(platform, code, { verifier, inBody: true })
      const body = (await response.json()) as Record<string, unknown>
      if (platform === "microblog") {
        expect(response.status).toBe(401)
        expect(body.error).toBe("unauthorized_client")
      } else {
        expect(response.status).toBe(200)
        expect(body.access_token).toMatch(/^[0-9a-f]{40}$/)
      }
    }
  })

  it("codehost answers form-encoded without Accept: application/json, like GitHub", async () => {
    const code = await authorizeCode("codehost")
    const response = await exchange("codehost", code, { accept: "*/*" })
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toMatch(/^application\/x-www-form-urlencoded/)
    const form = new URLSearchParams(await response.text())
    expect(form.get("access_token")).toMatch(/^[0-9a-f]{40}$/)
    expect(form.get("token_type")).toBe("bearer")
    const refused = await exchange("codehost", code, { accept: "*/*" })
    expect(new URLSearchParams(await refused.text()).get("error")).toBe("bad_verification_code")
  })

  it("codehost revocation of an unknown token is 404, and needs the client id in the path", async () => {
    const unknown = await revoke("codehost", "f".repeat(40))
    expect(unknown.status).toBe(404)
    expect(await unknown.json()).toMatchObject({ message: "Not Found" })
    const token = await login("codehost")
    const otherPath = await fetch(standIns.endpoints("codehost").revoke.replace("Iv1.codehost", "other"), {
      method: "DELETE",
      headers: { authorization: basic("Iv1.codehost", "ch-secret"), "content-type": "application/json" },
      body: JSON.stringify({ access_token: token })
    })
    expect(otherPath.status).toBe(404)
    expect(standIns.revoked("codehost")).not.toContain(token)
    expect((await readUser("codehost", token)).status).toBe(200)
  })

  it("community revokes the access token when given its refresh token", async () => {
    const verifier = newVerifier()
    const code = await authorizeCode("community", { verifier })
    const tokens = (await (await exchange("community", code, { verifier })).json()) as Record<string, string>
    const response = await fetch(standIns.endpoints("community").revoke, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        token: tokens.refresh_token!,
        token_type_hint: "refresh_token",
        client_id: clients.community.clientId,
        client_secret: clients.community.clientSecret
      })
    })
    expect(response.status).toBe(200)
    expect(standIns.revoked("community")).toContain(tokens.access_token)
    expect((await readUser("community", tokens.access_token)).status).toBe(401)
  })

  it("refuses an oversized request body", async () => {
    const response = await fetch(standIns.endpoints("microblog").token, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "code=" + "a".repeat(100 * 1024)
    })
    expect(response.status).toBe(413)
    await response.body?.cancel()
  })
})

describe("handle directories", () => {
  it("microblog: dev<n> is user n, others are not found (200 with errors), a bearer is needed", async () => {
    const prefix = standIns.endpoints("microblog").handles
    const auth = { authorization: "Bearer app-token" }
    const found = await get(`${prefix}/dev42`, auth)
    expect(found.status).toBe(200)
    expect(await found.json()).toEqual({ data: { id: "42", name: "Dev 42", username: "dev42" } })
    for (const handle of ["nobody", "dev042", "dev0", "dev123456789012345678901"]) {
      const missing = await get(`${prefix}/${handle}`, auth)
      expect(missing.status).toBe(200)
      expect(await missing.json()).toEqual({
        errors: [
          {
            value: handle,
            detail: `Could not find user with username: [${handle}].`,
            title: "Not Found Error",
            resource_type: "user",
            parameter: "username",
            resource_id: handle,
            type: "https://api.twitter.com/2/problems/resource-not-found"
          }
        ]
      })
    }
    const anonymous = await get(`${prefix}/dev42`)
    expect(anonymous.status).toBe(401)
    await anonymous.body?.cancel()
  })

  it("codehost: dev<n> is user n, others are 404; community has no directory", async () => {
    const prefix = standIns.endpoints("codehost").handles
    const found = await get(`${prefix}/dev12345678901234567890`)
    expect(found.status).toBe(200)
    expect(await found.text()).toBe(
      '{"login":"dev12345678901234567890","id":12345678901234567890,"type":"User"}'
    )
    const missing = await get(`${prefix}/octocat`)
    expect(missing.status).toBe(404)
    expect(await missing.json()).toEqual({
      message: "Not Found",
      documentation_url: expect.any(String),
      status: "404"
    })
    const community = await get(`${standIns.endpoints("community").handles}/dev5`)
    expect(community.status).toBe(404)
    await community.body?.cancel()
  })
})

describe("faults", () => {
  it("down: the connection is dropped without an answer", async () => {
    standIns.setFault("microblog", "token", "down")
    await expect(exchange("microblog", "any")).rejects.toThrow()
    standIns.setFault("codehost", "user", "down")
    await expect(readUser("codehost", "x")).rejects.toThrow()
  })

  it("server_error: 503, then normal again once cleared", async () => {
    standIns.setFault("community", "user", "server_error")
    const token = await login("community")
    const failed = await readUser("community", token)
    expect(failed.status).toBe(503)
    expect(await failed.json()).toEqual({ message: "Service Unavailable" })
    standIns.setFault("community", "user", undefined)
    expect((await readUser("community", token)).status).toBe(200)

    standIns.setFault("microblog", "authorize", "server_error")
    const authorize = await get(authorizeUrl("microblog", { verifier: newVerifier() }))
    expect(authorize.status).toBe(503)
    await authorize.body?.cancel()
  })

  it("missing_id and non_numeric_id: a 200 user answer without a usable id", async () => {
    for (const platform of PLATFORMS) {
      const token = await login(platform)
      standIns.setFault(platform, "user", "missing_id")
      const missing = await readUser(platform, token)
      expect(missing.status).toBe(200)
      const body = await missing.json()
      expect(idOf(platform, body)).toBeUndefined()
      expect(JSON.stringify(body)).toContain(`dev${DEFAULT_DEVNET_USERS[platform]}`)
      standIns.setFault(platform, "user", "non_numeric_id")
      expect(idOf(platform, await (await readUser(platform, token)).json())).toBe("abc")
    }
  })

  it("huge: a valid 8 MiB JSON answer whose id is still right", async () => {
    const token = await login("codehost", "99")
    standIns.setFault("codehost", "user", "huge")
    const response = await readUser("codehost", token)
    expect(response.status).toBe(200)
    const text = await response.text()
    expect(text.length).toBeGreaterThan(8 * 1024 * 1024)
    expect(idOf("codehost", JSON.parse(text))).toBe(99)
  })

  it("slow: no answer in time, and close() does not wait for it", async () => {
    standIns.setFault("microblog", "user", "slow")
    const started = Date.now()
    await expect(
      fetch(standIns.endpoints("microblog").user, { signal: AbortSignal.timeout(300) })
    ).rejects.toThrow()
    expect(Date.now() - started).toBeLessThan(5_000)

    // A request still waiting when the server closes: close() ends it instead of waiting 30 s.
    const own = await startOAuthStandIns({ clients })
    own.setFault("codehost", "handle", "slow")
    const pending = fetch(`${own.endpoints("codehost").handles}/dev1`)
    await new Promise((resolve) => setTimeout(resolve, 100))
    const closing = Date.now()
    await own.close()
    expect(Date.now() - closing).toBeLessThan(5_000)
    await expect(pending).rejects.toThrow()
  })
})

describe("arctic's OAuth2Client", () => {
  it("logs in on microblog with PKCE and revokes on community", async () => {
    const client = new OAuth2Client(
      clients.microblog.clientId,
      clients.microblog.clientSecret,
      clients.microblog.redirectUri
    )
    const state = generateState()
    const verifier = generateCodeVerifier()
    const url = client.createAuthorizationURLWithPKCE(
      standIns.endpoints("microblog").authorize,
      state,
      CodeChallengeMethod.S256,
      verifier,
      ["users.read", "tweet.read"]
    )
    const response = await get(url)
    expect(response.status).toBe(302)
    const location = new URL(response.headers.get("location")!)
    expect(location.searchParams.get("state")).toBe(state)
    const tokens = await client.validateAuthorizationCode(
      standIns.endpoints("microblog").token,
      location.searchParams.get("code")!,
      verifier
    )
    expect(tokens.accessToken()).toMatch(/^[0-9a-f]{40}$/)
    expect(tokens.accessTokenExpiresInSeconds()).toBe(7200)
    const user = await readUser("microblog", tokens.accessToken())
    expect(idOf("microblog", await user.json())).toBe(DEFAULT_DEVNET_USERS.microblog)

    const community = new OAuth2Client(
      clients.community.clientId,
      clients.community.clientSecret,
      clients.community.redirectUri
    )
    const communityVerifier = generateCodeVerifier()
    const communityUrl = community.createAuthorizationURLWithPKCE(
      standIns.endpoints("community").authorize,
      generateState(),
      CodeChallengeMethod.S256,
      communityVerifier,
      ["identify"]
    )
    const code = new URL((await get(communityUrl)).headers.get("location")!).searchParams.get("code")!
    const communityTokens = await community.validateAuthorizationCode(
      standIns.endpoints("community").token,
      code,
      communityVerifier
    )
    await community.revokeToken(standIns.endpoints("community").revoke, communityTokens.accessToken())
    expect(standIns.revoked("community")).toContain(communityTokens.accessToken())
  })

  it("gets GitHub's 200-with-error from codehost for a bad code, and a refusal from microblog", async () => {
    const client = new OAuth2Client(
      clients.codehost.clientId,
      clients.codehost.clientSecret,
      clients.codehost.redirectUri
    )
    const tokens = await client.validateAuthorizationCode(standIns.endpoints("codehost").token, "bad", null)
    expect(tokens.data).toMatchObject({ error: "bad_verification_code" })
    expect(() => tokens.accessToken()).toThrow()

    const microblog = new OAuth2Client(
      clients.microblog.clientId,
      clients.microblog.clientSecret,
      clients.microblog.redirectUri
    )
    await expect(
      microblog.validateAuthorizationCode(
        standIns.endpoints("microblog").token,
        "bad",
        generateCodeVerifier()
      )
    ).rejects.toMatchObject({ code: "invalid_request" })
  })
})

describe("oauthStandIns (Effect)", () => {
  it("serves while its scope is open and closes with it", async () => {
    const url = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const scoped = yield* oauthStandIns({ clients })
          const response = yield* Effect.promise(() => get(scoped.endpoints("codehost").handles + "/dev3"))
          expect(response.status).toBe(200)
          yield* Effect.promise(() => response.json())
          return scoped.url
        })
      )
    )
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
    await expect(fetch(`${url}/codehost/users/dev3`)).rejects.toThrow()
  })
})

describe("several OAuth apps per platform (a committee's members)", () => {
  const apps = [1, 2].map((k) => ({
    clientId: `member-${k}-client`,
    clientSecret: `member-${k}-secret`,
    redirectUri: `http://127.0.0.1:${9000 + k}/v1/oauth/microblog/callback`
  }))
  const codehostApps = [1, 2].map((k) => ({
    clientId: `member-${k}-codehost`,
    clientSecret: `member-${k}-codehost-secret`,
    redirectUri: `http://127.0.0.1:${9000 + k}/v1/oauth/codehost/callback`
  }))

  /** A microblog code issued to `app`, with its verifier. */
  const codeFor = async (shared: OAuthStandIns, app: StandInClient) => {
    const verifier = newVerifier()
    const url = new URL(shared.endpoints("microblog").authorize)
    for (const [k, v] of Object.entries({
      response_type: "code",
      client_id: app.clientId,
      redirect_uri: app.redirectUri,
      state: "s",
      code_challenge: challengeOf(verifier),
      code_challenge_method: "S256"
    }))
      url.searchParams.set(k, v)
    const res = await get(url)
    expect(res.status).toBe(302)
    const location = new URL(res.headers.get("location")!)
    expect(`${location.origin}${location.pathname}`).toBe(app.redirectUri)
    return { code: location.searchParams.get("code")!, verifier }
  }

  const redeem = (shared: OAuthStandIns, app: StandInClient, grant: { code: string; verifier: string }) =>
    fetch(shared.endpoints("microblog").token, {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        authorization: basic(app.clientId, app.clientSecret)
      },
      body: new URLSearchParams({
        grant_type: "authorization_code",
        code: grant.code,
        redirect_uri: app.redirectUri,
        code_verifier: grant.verifier
      })
    })

  it("sends each app's logins to its own callback; a code is redeemed only by its own app", async () => {
    const shared = await startOAuthStandIns({
      clients: { ...clients, microblog: apps, codehost: codehostApps }
    })
    try {
      const [first, second] = apps as [StandInClient, StandInClient]
      expect((await redeem(shared, first, await codeFor(shared, first))).status).toBe(200)
      expect((await redeem(shared, second, await codeFor(shared, second))).status).toBe(200)
      // Another app's code, redeemed with this app's own credentials and callback: refused.
      const stolen = await codeFor(shared, first)
      expect((await redeem(shared, second, stolen)).status).toBe(400)
      // One app's callback is not registered for the other.
      const crossed = new URL(shared.endpoints("microblog").authorize)
      crossed.searchParams.set("client_id", first.clientId)
      crossed.searchParams.set("redirect_uri", second.redirectUri)
      crossed.searchParams.set("response_type", "code")
      crossed.searchParams.set("code_challenge", challengeOf(newVerifier()))
      crossed.searchParams.set("code_challenge_method", "S256")
      const refused = await get(crossed)
      expect({ status: refused.status, body: await refused.text() }).toMatchObject({
        status: 400,
        body: expect.stringContaining("not registered for this client")
      })
      // Codehost's revoke URL names the app.
      expect(shared.endpoints("codehost", "member-2-codehost").revoke).toContain(
        "/applications/member-2-codehost/"
      )
      expect(shared.endpoints("codehost").revoke).toContain("/applications/member-1-codehost/")
    } finally {
      await shared.close()
    }
  })

  it("refuses two apps of one platform with the same client id", async () => {
    await expect(
      startOAuthStandIns({
        clients: { ...clients, microblog: [apps[0]!, { ...apps[1]!, clientId: apps[0]!.clientId }] }
      })
    ).rejects.toThrow("share a client id")
  })
})
