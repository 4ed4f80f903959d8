/**
 * Handle resolution against the devnet's stand-in directories (src/devnet/oauthStandIns.ts): the
 * handle `dev<n>` is user n on microblog, codehost and fedsocial; any other handle is not found
 * (X's 200-with-errors, GitHub's 404, the fname registry's 404); a directory that is down, slow,
 * answering 5xx, too much, or without a canonical id is unavailable, never a guess.
 */
import { Effect, Exit, Option, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { LookupPlatform } from "../../schema/attestor.js"
import { handleResolvers, type ResolverSettings } from "../../src/attestor/lookups/handleResolvers.js"
import { type OAuthStandIns, startOAuthStandIns } from "../../src/devnet/oauthStandIns.js"

let standIns: OAuthStandIns
let settings: ResolverSettings

beforeAll(async () => {
  const client = (name: string) => ({
    clientId: name,
    clientSecret: `${name}-secret`,
    redirectUri: "http://127.0.0.1:1/cb"
  })
  standIns = await startOAuthStandIns({
    clients: { microblog: client("m"), codehost: client("c"), community: client("d") }
  })
  settings = {
    microblog: { apiUrl: `${standIns.url}/microblog`, bearerToken: Redacted.make("app-token") },
    codehost: { apiUrl: `${standIns.url}/codehost`, token: undefined },
    fedsocial: { fnamesUrl: standIns.fnames },
    timeoutMs: 1_000
  }
})

afterAll(() => standIns?.close())

const resolve = (platform: LookupPlatform, handle: string, with_ = settings) => {
  const resolver = handleResolvers(with_)[platform]
  if (resolver === undefined) throw new Error(`no ${platform} resolver`)
  return Effect.runPromiseExit(resolver(handle))
}

describe.each(["microblog", "codehost", "fedsocial"] as const)("%s", (platform) => {
  it("resolves dev<n> to n, and another handle to none", async () => {
    expect(await resolve(platform, "dev42")).toEqual(Exit.succeed(Option.some("42")))
    expect(await resolve(platform, "dev80351110224678")).toEqual(Exit.succeed(Option.some("80351110224678")))
    expect(await resolve(platform, "octocat")).toEqual(Exit.succeed(Option.none()))
  })
})

describe("a directory that cannot say", () => {
  it("microblog without the app's bearer token is not offered", () => {
    expect(
      Object.keys(
        handleResolvers({ ...settings, microblog: { ...settings.microblog, bearerToken: undefined } })
      ).sort()
    ).toEqual(["codehost", "fedsocial"])
  })

  it.each(["down", "server_error", "missing_id", "non_numeric_id", "huge"] as const)(
    "%s is unavailable",
    async (fault) => {
      for (const platform of ["microblog", "codehost"] as const) {
        standIns.setFault(platform, "handle", fault)
        try {
          const exit = await resolve(platform, "dev42")
          expect(Exit.isFailure(exit) && JSON.stringify(exit.cause)).toContain("LookupUnavailable")
        } finally {
          standIns.setFault(platform, "handle", undefined)
        }
      }
    }
  )

  it("a slow directory is unavailable at the timeout", async () => {
    standIns.setFault("codehost", "handle", "slow")
    try {
      const started = Date.now()
      const exit = await resolve("codehost", "dev42", { ...settings, timeoutMs: 300 })
      expect(Exit.isFailure(exit)).toBe(true)
      expect(Date.now() - started).toBeLessThan(5_000)
    } finally {
      standIns.setFault("codehost", "handle", undefined)
    }
  })

  it("a fname registry that is not there is unavailable", async () => {
    const exit = await resolve("fedsocial", "dev42", {
      ...settings,
      fedsocial: { fnamesUrl: "http://127.0.0.1:9" }
    })
    expect(Exit.isFailure(exit)).toBe(true)
  })
})
