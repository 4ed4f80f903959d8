/**
 * Redirects match an allow-list entry exactly (docs/protocol.md §10 "Redirects"): scheme, host,
 * port and path, no user info, query or fragment; an entry without a path means `/`; what is
 * kept is the entry.
 */
import { describe, expect, it } from "vitest"
import { allowListEntry, matchRedirect } from "../../src/attestor/logins/oauth/redirectAllowList.js"

const entries = (...raw: Array<string>) =>
  new Set(
    raw.map((e) => {
      const parsed = allowListEntry(e)
      if ("refusal" in parsed) throw new Error(parsed.refusal)
      return parsed.entry
    })
  )

describe("allow-list entries", () => {
  it("are kept in one canonical form; an entry without a path is /", () => {
    expect(allowListEntry("http://localhost:5173")).toEqual({ entry: "http://localhost:5173/" })
    expect(allowListEntry("https://Wallet.Example:443/after-login")).toEqual({
      entry: "https://wallet.example/after-login"
    })
  })

  it.each([
    "ftp://files.example/",
    "not a url",
    "https://wallet.example/after-login?x=1",
    "https://wallet.example/after-login?",
    "https://wallet.example/after-login#",
    "https://user:pass@wallet.example/after-login"
  ])("refuses %s", (entry) => {
    expect(allowListEntry(entry)).toHaveProperty("refusal")
  })
})

describe("matching a redirect", () => {
  const allowed = entries("http://localhost:5173/after-login", "https://wallet.example")

  it("gives the entry a redirect equals", () => {
    expect(matchRedirect(allowed, "http://localhost:5173/after-login")).toBe(
      "http://localhost:5173/after-login"
    )
    expect(matchRedirect(allowed, "https://wallet.example")).toBe("https://wallet.example/")
    expect(matchRedirect(allowed, "https://wallet.example/")).toBe("https://wallet.example/")
    expect(matchRedirect(allowed, "https://WALLET.example:443/")).toBe("https://wallet.example/")
  })

  it.each([
    // The allowed origin at another path.
    "http://localhost:5173/",
    "http://localhost:5173/after-login/",
    "http://localhost:5173/after-loginx",
    "https://wallet.example/other",
    // Another scheme, host or port.
    "https://localhost:5173/after-login",
    "http://localhost:5174/after-login",
    "http://127.0.0.1:5173/after-login",
    // A query or fragment of its own, even empty.
    "http://localhost:5173/after-login?next=https://evil.example",
    "http://localhost:5173/after-login?",
    "http://localhost:5173/after-login#attest=x",
    "https://wallet.example/#",
    // User info, and the backslash trick (RFC 3986 parsers read the host as evil.com).
    "http://evil.com@localhost:5173/after-login",
    "http://localhost:5173\\@evil.com",
    "https://wallet.example\\@evil.com",
    "http://localhost:5173/after%2Dlogin",
    "not a url"
  ])("matches nothing for %s", (redirect) => {
    expect(matchRedirect(allowed, redirect)).toBeUndefined()
  })
})
