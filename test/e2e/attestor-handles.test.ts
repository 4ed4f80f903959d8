/**
 * Handle lookups in `free` mode (local development; spec/attestor.md §2, §4 "POST /v1/commitment"
 * rules 1 and 3) on the devnet, against the stand-in directories (PROTOCOL §9: `dev<n>` is user n):
 * a handle alone commits to the resolved numeric id, an unknown handle is 404 `not_found`, a
 * directory that does not answer is 503 `unavailable`, and `/v1/info` says which platforms can be
 * looked up.
 */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AttestorClient } from "./support/attestorClient.js"
import { VaultDevnet } from "./support/relayerDevnet.js"

let net: VaultDevnet
let attestor: AttestorClient

beforeAll(async () => {
  net = await VaultDevnet.start("attestor-handles")
  attestor = await AttestorClient.start(
    net,
    { RATE_LIMIT_BURST: "1000", RATE_LIMIT_PER_MINUTE: "1000", HANDLE_LOOKUP_MODE: "free" },
    { standIns: true }
  )
}, 300_000)

afterAll(async () => {
  await attestor?.stop()
  await net?.dispose()
})

const commit = (body: unknown) => attestor.post("/v1/commitment", body)

describe("free handle lookups", () => {
  it("/v1/info names the mode and the platforms, with no price", async () => {
    const info = await Effect.runPromise(attestor.client.info.info())
    expect(info.handleLookup).toEqual({
      mode: "free",
      platforms: ["microblog", "codehost", "fedsocial"],
      price: null
    })
  })

  it.each([
    ["microblog", "dev42", "42"],
    ["codehost", "@dev7", "7"],
    ["fedsocial", "dev1005", "1005"]
  ] as const)("a %s handle commits to its numeric id", async (platform, handle, userId) => {
    const res = await commit({ platform, handle })
    expect(res.status).toBe(200)
    const body = (await res.json()) as { platform: string; userId: string }
    expect(body).toMatchObject({ platform, userId })
    // The same commitment inputs as a numeric userId request, so the hint the creator seals opens.
    const direct = (await (await commit({ platform, userId })).json()) as { attestorSalt: string }
    expect(direct.attestorSalt).toBe((body as unknown as { attestorSalt: string }).attestorSalt)
  })

  it("an unknown handle is 404 not_found", async () => {
    for (const platform of ["microblog", "codehost", "fedsocial"] as const) {
      const res = await commit({ platform, handle: "nosuchuser" })
      expect(res.status).toBe(404)
      expect(await res.json()).toMatchObject({ code: "not_found" })
    }
  })

  it("a directory that does not answer is 503 unavailable", async () => {
    const standIns = attestor.standIns
    if (standIns === undefined) throw new Error("started without stand-ins")
    standIns.setFault("codehost", "handle", "down")
    try {
      const res = await commit({ platform: "codehost", handle: "dev7" })
      expect(res.status).toBe(503)
      expect(await res.json()).toMatchObject({ code: "unavailable" })
    } finally {
      standIns.setFault("codehost", "handle", undefined)
    }
  })

  it("rules 3-4 still refuse before any lookup: a messenger handle is 400 bad_request", async () => {
    const res = await commit({ platform: "messenger", handle: "someone" })
    expect(res.status).toBe(400)
    expect(await res.json()).toMatchObject({ code: "bad_request" })
  })
})
