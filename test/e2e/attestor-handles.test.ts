/**
 * Handle lookups in `free` mode (local development; docs/attestor.md §2, §4 "POST /v1/commitment"
 * rules 1 and 3) on the devnet, against the stand-in directories (docs/protocol.md §9: `dev<n>` is user n):
 * a handle alone commits to the resolved numeric id, an unknown handle is 404 `not_found`, a
 * directory that does not answer is 503 `unavailable`, and `/v1/info` says which platforms can be
 * looked up. `/v1/public-handle` attests a handle publicly: its escrows are `public`, and a bind
 * for private escrows does not sign them.
 */
import { Effect } from "effect"
import { type Address, type Hex, recoverTypedDataAddress } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { publicHandleDomain, publicHandleTypes } from "../../schema/eip712.js"
import { newLoginSecret } from "../../src/client.js"
import { AttestorClient, type Commitment } from "./support/attestorClient.js"
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

describe("POST /v1/public-handle", () => {
  it("attests dev7 on codehost: the signature recovers to the attestor, and its escrow is public", {
    timeout: 120_000
  }, async () => {
    const res = await attestor.post("/v1/public-handle", { platform: "codehost", handle: "dev7" })
    expect(res.status).toBe(200)
    const attested = (await res.json()) as Commitment & {
      platform: string
      handle: string
      issuedAt: string
      attestation: Hex
      attestor: Address
    }
    expect(attested).toMatchObject({
      platform: "codehost",
      platformId: 3,
      userId: "7",
      handle: "dev7",
      kind: 2
    })
    const signer = await recoverTypedDataAddress({
      domain: publicHandleDomain(31337),
      types: publicHandleTypes,
      primaryType: "PublicHandle",
      message: { platformId: 3, userId: "7", handle: "dev7", issuedAt: BigInt(attested.issuedAt) },
      signature: attested.attestation
    })
    expect(signer).toBe(attested.attestor)

    const { id } = await attestor.launchTo(attested, "PUB7")
    await attestor.indexed(await attestor.head())
    // A codehost login as user 7 at the stand-in provider.
    const stealthOwner = privateKeyToAccount(generatePrivateKey()).address
    const { loginSecret, loginChallenge } = newLoginSecret()
    const started = (await (
      await attestor.post("/v1/oauth/codehost/start", { stealthOwner, loginChallenge })
    ).json()) as {
      url: string
    }
    const consent = await fetch(`${started.url}&devnet_user=7`, { redirect: "manual" })
    const login = await fetch(consent.headers.get("location") ?? "", { redirect: "manual" })
    const { session } = (await login.json()) as { session: string }
    const escrows = (await (await attestor.post("/v1/escrows", { session, loginSecret })).json()) as {
      escrows: Array<{ id: string; visibility: string }>
    }
    expect(escrows.escrows).toEqual([expect.objectContaining({ id, visibility: "public" })])
    const privateOnly = (await (
      await attestor.post("/v1/bind", { session, loginSecret, visibility: "private" })
    ).json()) as {
      binds: Array<unknown>
    }
    expect(privateOnly.binds).toEqual([])
    const publicOnes = (await (
      await attestor.post("/v1/bind", { session, loginSecret, visibility: "public" })
    ).json()) as {
      binds: Array<{ beneficiaryId: string }>
    }
    expect(publicOnes.binds.map((b) => b.beneficiaryId)).toEqual([id])
  })

  it("an unknown handle is 404 not_found; a community handle is 400 bad_request", async () => {
    const unknown = await attestor.post("/v1/public-handle", { platform: "microblog", handle: "nosuchuser" })
    expect(unknown.status).toBe(404)
    const community = await attestor.post("/v1/public-handle", { platform: "community", handle: "dev7" })
    expect(community.status).toBe(400)
    expect(await community.json()).toMatchObject({ code: "bad_request" })
  })
})
