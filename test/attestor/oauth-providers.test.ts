/**
 * What the attestor takes from an OAuth provider's user answer (src/attestor/logins/oauth/providers.ts):
 * the immutable numeric id at each provider's own place, as a canonical decimal string, and
 * nothing else; and the revocation request each provider wants.
 */
import { Redacted } from "effect"
import { describe, expect, it } from "vitest"
import { canonicalUserId, type OAuthApp, oauthProviders } from "../../src/attestor/logins/oauth/providers.js"

describe("the user id of a provider's answer", () => {
  it("is read where each provider puts it", () => {
    expect(
      canonicalUserId(oauthProviders.microblog.userId({ data: { id: "2244994945", username: "x" } }))
    ).toBe("2244994945")
    expect(canonicalUserId(oauthProviders.codehost.userId({ id: 583231, login: "octocat" }))).toBe("583231")
    // Discord snowflakes exceed 2^53: a string, kept as sent.
    expect(canonicalUserId(oauthProviders.community.userId({ id: "80351110224678912" }))).toBe(
      "80351110224678912"
    )
  })

  it("is refused when missing, not numeric, not canonical, or a number past 2^53", () => {
    for (const value of [
      undefined,
      null,
      "",
      "abc",
      "0",
      "012",
      "-5",
      "1.5",
      1.5,
      0,
      -1,
      2 ** 53,
      "1".repeat(33),
      {}
    ])
      expect(canonicalUserId(value), String(value)).toBeUndefined()
    expect(canonicalUserId(oauthProviders.microblog.userId({ id: "1" }))).toBeUndefined()
    expect(canonicalUserId(oauthProviders.codehost.userId({ login: "octocat" }))).toBeUndefined()
  })
})

describe("revocation requests", () => {
  const app = (revoke: string): OAuthApp => ({
    clientId: "client id",
    clientSecret: Redacted.make("secret"),
    endpoints: { authorize: "https://p/a", token: "https://p/t", revoke, user: "https://p/u" }
  })

  it("microblog: a form POST with token_type_hint=access_token and Basic client auth", () => {
    const request = oauthProviders.microblog.revokeRequest(app("https://p/revoke"), "tok", "YmFzaWM=")
    expect(request.url).toBe("https://p/revoke")
    expect(request.method).toBe("POST")
    expect(new URLSearchParams(String(request.body)).get("token_type_hint")).toBe("access_token")
    expect((request.headers as Record<string, string>).authorization).toBe("Basic YmFzaWM=")
  })

  it("codehost: DELETE /applications/{client_id}/token with the token in a JSON body", () => {
    const request = oauthProviders.codehost.revokeRequest(
      app("https://api.example/applications/{client_id}/token"),
      "tok",
      "YmFzaWM="
    )
    expect(request.url).toBe("https://api.example/applications/client%20id/token")
    expect(request.method).toBe("DELETE")
    expect(JSON.parse(String(request.body))).toEqual({ access_token: "tok" })
  })

  it("a public client (no secret) names itself in the body instead", () => {
    const request = oauthProviders.community.revokeRequest(app("https://p/revoke"), "tok", undefined)
    expect(new URLSearchParams(String(request.body)).get("client_id")).toBe("client id")
    expect((request.headers as Record<string, string>).authorization).toBeUndefined()
  })
})
