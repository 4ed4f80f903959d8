/**
 * The typed client's login helpers (docs/attestor.md "Writing a client"): a fresh secret per login
 * whose challenge is its SHA-256, a landing read only for a login the client started, and binds
 * checked to be for the client's own key.
 */
import { createHash } from "node:crypto"
import { Effect, Exit, Schema } from "effect"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { describe, expect, it } from "vitest"
import { BindSignature } from "../../schema/attestor.js"
import { bindsFor, loginChallengeOf, loginLanding, newLoginSecret } from "../../src/client.js"

const TOKEN = "A".repeat(43)

describe("newLoginSecret", () => {
  it("draws 32 fresh bytes each time, and the challenge is their SHA-256", () => {
    const a = newLoginSecret()
    const b = newLoginSecret()
    expect(a.loginSecret).toMatch(/^0x[0-9a-f]{64}$/)
    expect(a.loginSecret).not.toBe(b.loginSecret)
    const digest = createHash("sha256")
      .update(Buffer.from(a.loginSecret.slice(2), "hex"))
      .digest("hex")
    expect(a.loginChallenge).toBe(`0x${digest}`)
    expect(loginChallengeOf(a.loginSecret)).toBe(a.loginChallenge)
  })
})

describe("loginLanding", () => {
  const pending = { ...newLoginSecret(), stealthOwner: privateKeyToAccount(generatePrivateKey()).address }

  it("reads nothing without a login this client started", () => {
    expect(loginLanding(`http://localhost:5173/after-login#attest=${TOKEN}`, undefined)).toBeUndefined()
  })

  it("gives the session, or the refusal's code, of a login it started", () => {
    expect(loginLanding(`http://localhost:5173/after-login#attest=${TOKEN}`, pending)).toEqual({
      _tag: "Session",
      session: TOKEN,
      login: pending
    })
    expect(loginLanding("http://localhost:5173/after-login#error=invalid_session", pending)).toEqual({
      _tag: "Refused",
      code: "invalid_session"
    })
    expect(loginLanding("http://localhost:5173/after-login#attest=not%20a%20token", pending)).toBeUndefined()
    expect(loginLanding("http://localhost:5173/after-login", pending)).toBeUndefined()
  })
})

describe("bindsFor", () => {
  const mine = privateKeyToAccount(generatePrivateKey()).address
  const theirs = privateKeyToAccount(generatePrivateKey()).address
  const bind = (newOwner: string) =>
    Schema.decodeUnknownSync(BindSignature)({
      beneficiaryId: `0x${"ab".repeat(32)}`,
      newOwner,
      bindNonce: "0",
      deadline: "1800000000",
      signature: `0x${"11".repeat(65)}`,
      attestor: theirs,
      register: null
    })

  it("passes binds that are all for the client's key, whatever the case of the address", () => {
    const binds = [bind(mine), bind(mine.toLowerCase())]
    expect(Effect.runSyncExit(bindsFor(binds, mine))).toEqual(Exit.succeed(binds))
  })

  it("fails the whole answer when one bind is for another key", () => {
    const exit = Effect.runSyncExit(bindsFor([bind(mine), bind(theirs)], mine))
    expect(exit).toEqual(Exit.fail(expect.objectContaining({ _tag: "ForeignBind", newOwner: theirs })))
  })
})
