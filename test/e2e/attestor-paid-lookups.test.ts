/**
 * Paid handle lookups on the devnet, through HTTP (docs/attestor.md §4 "Paid handle lookup flow";
 * docs/protocol.md §9 "x402", §10 "Paid lookups"): the attestor in `paid` mode at 0.01 of the settlement
 * asset paid to account #0, the facilitator stand-in settling real Permit2 witness transfers on
 * anvil, and a payer (account #5) that approved Permit2 once. Every refusal of the flow, the bytes
 * of the challenge, the money on chain, and what the facilitator was told: nothing of an
 * authorization that does not pay what the quote asks or that its payer did not sign (which also
 * takes no lease of the payer's), and one payment of a payer at a time.
 */
import { randomBytes } from "node:crypto"
import {
  decodePaymentRequiredHeader,
  decodePaymentResponseHeader,
  decodePaymentSignatureHeader,
  encodePaymentSignatureHeader
} from "@x402/core/http"
import type { PaymentRequirements } from "@x402/core/types"
import {
  type Address,
  erc20Abi,
  type Hex,
  maxUint256,
  parseEventLogs,
  parseUnits,
  recoverTypedDataAddress
} from "viem"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { testTokenAbi } from "../../contracts/abi.js"
import { devnetAccount } from "../../contracts/deploy.js"
import { publicHandleDomain, publicHandleTypes } from "../../schema/eip712.js"
import { PERMIT2_ADDRESS, X402_EXACT_PERMIT2_PROXY_ADDRESS } from "../../src/devnet/x402.js"
import { parsePrometheus } from "../support/prometheus.js"
import { type PaymentOverrides, signPermit2Payment } from "../support/x402Payer.js"
import { AttestorClient } from "./support/attestorClient.js"
import { VaultDevnet } from "./support/relayerDevnet.js"

const PAYER_INDEX = 5
const payer = devnetAccount(PAYER_INDEX)
const payTo = devnetAccount(0).address
const PRICE = parseUnits("0.01", 18)

let net: VaultDevnet
let attestor: AttestorClient

beforeAll(async () => {
  net = await VaultDevnet.start("attestor-paid-lookups")
  attestor = await AttestorClient.start(net, {}, { standIns: true, facilitator: true })
  // The payer holds the settlement asset and gives Permit2 its one-time approval (docs/attestor.md §4 step 2).
  await net.send(PAYER_INDEX, {
    address: net.settlementAsset,
    abi: testTokenAbi,
    functionName: "mint",
    args: [payer.address, parseUnits("1", 18)]
  })
  await net.send(PAYER_INDEX, {
    address: net.settlementAsset,
    abi: erc20Abi,
    functionName: "approve",
    args: [PERMIT2_ADDRESS, maxUint256]
  })
}, 300_000)

afterAll(async () => {
  await attestor?.stop()
  await net?.dispose()
})

const facilitator = () => {
  if (attestor.facilitator === undefined) throw new Error("started without a facilitator")
  return attestor.facilitator
}

const post = (path: string, body: unknown, paymentSignature?: string) =>
  fetch(`${attestor.url}${path}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(paymentSignature === undefined ? {} : { "payment-signature": paymentSignature })
    },
    body: JSON.stringify(body)
  })

/** The quote of a 402 without payment. */
const quote = async (path = "/v1/commitment", body: unknown = { platform: "microblog", handle: "dev42" }) => {
  const res = await post(path, body)
  expect(res.status).toBe(402)
  const header = res.headers.get("payment-required")
  if (header === null) throw new Error("no PAYMENT-REQUIRED header")
  const [requirements] = decodePaymentRequiredHeader(header).accepts
  if (requirements === undefined) throw new Error("no accepts entry")
  return requirements
}

/**
 * A payment as a client that may ask again makes it: with a fresh `payment-identifier` id, its
 * secret for replays (docs/protocol.md §10).
 */
const pay = async (requirements: PaymentRequirements, overrides: PaymentOverrides = {}) =>
  encodePaymentSignatureHeader(
    await signPermit2Payment(payer, requirements, {
      paymentId: `e2e-${randomBytes(12).toString("hex")}`,
      ...overrides
    })
  )

/**
 * A retry as a client makes it: while the payer's payment is still settling (or the lease of an
 * attestor that stopped has not lapsed), 429 `rate_limited` says when to ask again.
 */
const untilNotRateLimited = async (send: () => Promise<Response>): Promise<Response> => {
  for (;;) {
    const res = await send()
    if (res.status !== 429) return res
    const seconds = Number(res.headers.get("retry-after") ?? "1")
    await new Promise((resolve) => setTimeout(resolve, Math.max(seconds, 1) * 1000))
  }
}

const balances = async () => ({
  payer: await net.tokenBalance(net.settlementAsset, payer.address),
  payTo: await net.tokenBalance(net.settlementAsset, payTo)
})

const settlements = () =>
  facilitator()
    .received()
    .filter((r) => r.path === "/settle").length

describe("paid handle lookups", () => {
  it("/v1/info shows the mode, the platforms and the price", async () => {
    const info = (await (await fetch(`${attestor.url}/v1/info`)).json()) as { handleLookup: unknown }
    expect(info.handleLookup).toEqual({
      mode: "paid",
      platforms: ["microblog", "codehost", "fedsocial"],
      price: {
        network: "eip155:31337",
        asset: net.settlementAsset,
        amount: PRICE.toString(),
        decimals: 18,
        symbol: expect.any(String),
        payTo,
        assetTransferMethod: "permit2-exact"
      }
    })
  })

  it("a handle without payment: 402 payment_required, the challenge of docs/protocol.md §10, not cached", async () => {
    const res = await post("/v1/commitment", { platform: "microblog", handle: "dev42" })
    expect(res.status).toBe(402)
    expect(res.headers.get("cache-control")).toBe("no-store")
    const body = (await res.json()) as Record<string, unknown>
    expect(Object.keys(body).sort()).toEqual(["code", "error"])
    expect(body.code).toBe("payment_required")
    const header = res.headers.get("payment-required") ?? ""
    const challenge = JSON.parse(Buffer.from(header, "base64").toString("utf8"))
    expect(challenge).toEqual({
      x402Version: 2,
      resource: {
        url: `${attestor.url}/v1/commitment`,
        description: expect.any(String),
        mimeType: "application/json"
      },
      accepts: [
        {
          scheme: "exact",
          network: "eip155:31337",
          asset: net.settlementAsset,
          amount: PRICE.toString(),
          payTo,
          maxTimeoutSeconds: 300,
          extra: {
            assetTransferMethod: "permit2-exact",
            name: expect.any(String),
            version: "1",
            signerAddress: facilitator().signerAddress,
            spenderAddress: X402_EXACT_PERMIT2_PROXY_ADDRESS
          }
        }
      ],
      extensions: { "payment-identifier": { info: { required: false }, schema: expect.any(Object) } }
    })
    // The same bytes whatever the platform and handle: the challenge names neither.
    for (const other of [
      { platform: "codehost", handle: "dev7" },
      { platform: "fedsocial", handle: "somebody" }
    ]) {
      const again = await post("/v1/commitment", other)
      expect(again.headers.get("payment-required")).toBe(header)
    }
    const publicHandle = await post("/v1/public-handle", { platform: "codehost", handle: "dev7" })
    expect(publicHandle.status).toBe(402)
    expect(publicHandle.headers.get("payment-required")).toBe(header)
  })

  it("a numeric userId stays free: no challenge, nothing asked of the facilitator", async () => {
    const before = facilitator().received().length
    const res = await post("/v1/commitment", { platform: "microblog", userId: "42" })
    expect(res.status).toBe(200)
    expect(res.headers.get("payment-response")).toBeNull()
    expect(facilitator().received().length).toBe(before)
  })

  it("pays for dev42 on microblog: 200 with the commitment for user 42 and PAYMENT-RESPONSE naming a mined transfer to payTo; the same authorization for the same request is given the same answer, for another request 402, and moves nothing", {
    timeout: 60_000
  }, async () => {
    const requirements = await quote()
    const before = await balances()
    const signature = await pay(requirements)
    const res = await post("/v1/commitment", { platform: "microblog", handle: "dev42" }, signature)
    expect(res.status).toBe(200)
    expect(res.headers.get("cache-control")).toBe("no-store")
    const body = (await res.json()) as { platform: string; userId: string; attestorSalt: Hex }
    expect(body).toMatchObject({ platform: "microblog", userId: "42" })
    // The commitment of a numeric request: the hint a creator seals for it opens.
    const direct = (await (await post("/v1/commitment", { platform: "microblog", userId: "42" })).json()) as {
      attestorSalt: Hex
    }
    expect(body.attestorSalt).toBe(direct.attestorSalt)

    const response = decodePaymentResponseHeader(res.headers.get("payment-response") ?? "")
    expect(response).toMatchObject({ success: true, network: "eip155:31337" })
    expect(response.payer?.toLowerCase()).toBe(payer.address.toLowerCase())
    const receipt = await net.publicClient().getTransactionReceipt({ hash: response.transaction as Hex })
    expect(receipt.status).toBe("success")
    const transfers = parseEventLogs({ abi: erc20Abi, eventName: "Transfer", logs: receipt.logs })
    expect(transfers).toEqual([
      expect.objectContaining({
        address: net.settlementAsset.toLowerCase(),
        args: { from: payer.address, to: payTo, value: PRICE }
      })
    ])
    const after = await balances()
    expect(after.payer).toBe(before.payer - PRICE)
    expect(after.payTo).toBe(before.payTo + PRICE)

    const settled = settlements()
    const replayed = await post("/v1/commitment", { platform: "microblog", handle: "dev42" }, signature)
    expect(replayed.status).toBe(200)
    expect(await replayed.json()).toEqual(body)
    expect(replayed.headers.get("payment-response")).toBe(res.headers.get("payment-response"))
    const other = await post("/v1/commitment", { platform: "microblog", handle: "dev43" }, signature)
    expect(other.status).toBe(402)
    expect(await other.json()).toMatchObject({ code: "payment_failed" })
    // Rebuilt from the settlement's public calldata (no payment-identifier id): refused alike.
    const { x402Version, accepted, payload } = decodePaymentSignatureHeader(signature)
    const rebuilt = await post(
      "/v1/commitment",
      { platform: "microblog", handle: "dev42" },
      encodePaymentSignatureHeader({ x402Version, accepted, payload })
    )
    expect(rebuilt.status).toBe(402)
    expect(await rebuilt.json()).toMatchObject({ code: "payment_failed" })
    expect(await balances()).toEqual(after)
    expect(settlements()).toBe(settled)
  })

  it("a paid lookup whose connection is cut after settlement, sent again: the same commitment, one settlement on chain, the payer charged once", {
    timeout: 60_000
  }, async () => {
    const requirements = await quote()
    const before = await balances()
    const signature = await pay(requirements)
    const settledBefore = settlements()
    const held = facilitator().holdSettlementAnswers()
    const aborted = new AbortController()
    const cut = fetch(`${attestor.url}/v1/commitment`, {
      method: "POST",
      headers: { "content-type": "application/json", "payment-signature": signature },
      body: JSON.stringify({ platform: "microblog", handle: "dev42" }),
      signal: aborted.signal
    }).catch((error: unknown) => error)
    // Settled on chain; the connection is cut before the attestor hears of it.
    await held.settled
    aborted.abort()
    expect(await cut).toBeInstanceOf(Error)
    held.release()
    const retried = await untilNotRateLimited(() =>
      post("/v1/commitment", { platform: "microblog", handle: "dev42" }, signature)
    )
    expect(retried.status).toBe(200)
    const body = (await retried.json()) as { userId: string; handleCommitment: Hex }
    expect(body.userId).toBe("42")
    const response = decodePaymentResponseHeader(retried.headers.get("payment-response") ?? "")
    expect(response).toMatchObject({ success: true, network: "eip155:31337" })
    const receipt = await net.publicClient().getTransactionReceipt({ hash: response.transaction as Hex })
    expect(receipt.status).toBe("success")
    // Once more: the very same answer and PAYMENT-RESPONSE.
    const again = await post("/v1/commitment", { platform: "microblog", handle: "dev42" }, signature)
    expect(await again.json()).toEqual(body)
    expect(again.headers.get("payment-response")).toBe(retried.headers.get("payment-response"))
    expect(settlements()).toBe(settledBefore + 1)
    const after = await balances()
    expect(after.payer).toBe(before.payer - PRICE)
    expect(after.payTo).toBe(before.payTo + PRICE)
  })

  it("an unknown handle with a valid payment: 404, the payer's balance unchanged, the authorization spent", {
    timeout: 60_000
  }, async () => {
    const requirements = await quote()
    const before = await balances()
    const signature = await pay(requirements)
    const res = await post("/v1/commitment", { platform: "microblog", handle: "nosuchuser" }, signature)
    expect(res.status).toBe(404)
    expect(await res.json()).toMatchObject({ code: "not_found" })
    expect(await balances()).toEqual(before)
    // The same request again is told the same; another request with this authorization is refused.
    const replayed = await post("/v1/commitment", { platform: "microblog", handle: "nosuchuser" }, signature)
    expect(replayed.status).toBe(404)
    const spent = await post("/v1/commitment", { platform: "microblog", handle: "dev42" }, signature)
    expect(spent.status).toBe(402)
    expect(await spent.json()).toMatchObject({ code: "payment_failed" })
    expect(await balances()).toEqual(before)
  })

  it("a payment for another amount or network, to someone else, or unreadable: 402 payment_failed, nothing moved", {
    timeout: 60_000
  }, async () => {
    const requirements = await quote()
    const before = await balances()
    const wrong = [
      await pay(requirements, {
        amount: PRICE / 2n,
        accepted: { ...requirements, amount: (PRICE / 2n).toString() }
      }),
      await pay(requirements, { accepted: { ...requirements, network: "eip155:1" } }),
      await pay(requirements, { amount: PRICE / 2n }),
      await pay(requirements, { to: devnetAccount(6).address, signedTo: devnetAccount(6).address }),
      "not base64 json",
      Buffer.from(JSON.stringify({ x402Version: 1 })).toString("base64")
    ]
    for (const signature of wrong) {
      const res = await post("/v1/commitment", { platform: "microblog", handle: "dev42" }, signature)
      expect(res.status).toBe(402)
      expect(res.headers.get("cache-control")).toBe("no-store")
      expect(await res.json()).toMatchObject({ code: "payment_failed" })
    }
    expect(await balances()).toEqual(before)
  })

  it("an authorization for another spender, payee, amount or token, or with a far deadline: 402 payment_failed, the facilitator received nothing", {
    timeout: 60_000
  }, async () => {
    const requirements = await quote()
    const before = await balances()
    const asked = facilitator().received().length
    const other = devnetAccount(6).address
    const wrong = [
      await pay(requirements, { spender: other }),
      await pay(requirements, { to: other, signedTo: other }),
      await pay(requirements, { amount: PRICE * 2n }),
      await pay(requirements, { token: other }),
      await pay(requirements, { deadlineIn: requirements.maxTimeoutSeconds + 3_600 })
    ]
    for (const signature of wrong) {
      const res = await post("/v1/commitment", { platform: "microblog", handle: "dev42" }, signature)
      expect(res.status).toBe(402)
      expect(await res.json()).toMatchObject({ code: "payment_failed" })
    }
    expect(facilitator().received().length).toBe(asked)
    expect(await balances()).toEqual(before)
  })

  it("two concurrent lookups by one payer reach the facilitator once: the second is 429 rate_limited, and its authorization pays once the first has ended", {
    timeout: 90_000
  }, async () => {
    const requirements = await quote()
    const before = await balances()
    const verifications = () =>
      facilitator()
        .received()
        .filter((r) => r.path === "/verify").length
    const asked = verifications()
    const first = await pay(requirements)
    const second = await pay(requirements)
    const release = facilitator().holdVerifications()
    let firstAnswer: Promise<Response> | undefined
    try {
      firstAnswer = post("/v1/commitment", { platform: "microblog", handle: "dev42" }, first)
      while (verifications() === asked) await new Promise((resolve) => setTimeout(resolve, 20))
      const res = await post("/v1/commitment", { platform: "codehost", handle: "dev7" }, second)
      expect(res.status).toBe(429)
      expect(res.headers.get("retry-after")).toBe("1")
      expect(await res.json()).toMatchObject({ code: "rate_limited" })
      expect(verifications()).toBe(asked + 1)
    } finally {
      release()
    }
    expect((await firstAnswer).status).toBe(200)
    // The refused authorization was not spent: sent again, it pays for its lookup.
    const again = await post("/v1/commitment", { platform: "codehost", handle: "dev7" }, second)
    expect(again.status).toBe(200)
    expect(verifications()).toBe(asked + 2)
    expect((await balances()).payer).toBe(before.payer - 2n * PRICE)
  })

  it("a forged authorization naming the payer, unsigned or signed by another key, with the nonce of the payer's own payment sent beside it: 402 payment_failed before the facilitator hears of it; the payer's own payment pays", {
    timeout: 90_000
  }, async () => {
    const requirements = await quote()
    const verifications = () =>
      facilitator()
        .received()
        .filter((r) => r.path === "/verify").length
    const forgeries: ReadonlyArray<{ readonly signature?: Hex; readonly signedBy?: typeof payer }> = [
      { signature: `0x${"11".repeat(65)}` },
      { signedBy: devnetAccount(7) }
    ]
    for (const forgery of forgeries) {
      const before = await balances()
      const asked = verifications()
      const nonce = BigInt(Date.now()) * 1_000n + 7n
      const forged = encodePaymentSignatureHeader(
        await signPermit2Payment(forgery.signedBy ?? payer, requirements, {
          from: payer.address,
          nonce,
          ...(forgery.signature === undefined ? {} : { signature: forgery.signature })
        })
      )
      const own = await pay(requirements, { nonce })
      // Held at the facilitator, a forged payment that took the payer's lease would keep it.
      const release = facilitator().holdVerifications()
      let forgedAnswer: Response | undefined
      let ownAnswer: Promise<Response> | undefined
      try {
        forgedAnswer = await Promise.race([
          post("/v1/commitment", { platform: "microblog", handle: "dev42" }, forged),
          new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 2_000))
        ])
        ownAnswer = post("/v1/commitment", { platform: "microblog", handle: "dev42" }, own)
        while (verifications() === asked && forgedAnswer !== undefined)
          await new Promise((resolve) => setTimeout(resolve, 20))
      } finally {
        release()
      }
      // The forged authorization took no lease and was not recorded: the payer's own payment, with
      // the same nonce, is neither 429 nor "presented before".
      expect((await ownAnswer)?.status).toBe(200)
      expect(forgedAnswer?.status).toBe(402)
      expect(await forgedAnswer?.json()).toMatchObject({
        code: "payment_failed",
        error: expect.stringMatching(/not signed by its payer/)
      })
      expect(verifications()).toBe(asked + 1)
      expect((await balances()).payer).toBe(before.payer - PRICE)
    }
  })

  it("the facilitator stopped: 503 unavailable; a settlement it refuses: 402 payment_failed; nothing moved", {
    timeout: 60_000
  }, async () => {
    const requirements = await quote()
    const before = await balances()
    facilitator().setFault("down")
    try {
      const res = await post(
        "/v1/commitment",
        { platform: "microblog", handle: "dev42" },
        await pay(requirements)
      )
      expect(res.status).toBe(503)
      expect(await res.json()).toMatchObject({ code: "unavailable" })
    } finally {
      facilitator().setFault(undefined)
    }
    facilitator().setFault("settle_error")
    try {
      const res = await post(
        "/v1/commitment",
        { platform: "microblog", handle: "dev42" },
        await pay(requirements)
      )
      expect(res.status).toBe(402)
      expect(await res.json()).toMatchObject({ code: "payment_failed" })
    } finally {
      facilitator().setFault(undefined)
    }
    expect(await balances()).toEqual(before)
  })

  it("/v1/public-handle for dev7 on codehost is paid like a lookup; its attestation recovers to the attestor", {
    timeout: 60_000
  }, async () => {
    const requirements = await quote("/v1/public-handle", { platform: "codehost", handle: "dev7" })
    const before = await balances()
    const res = await post(
      "/v1/public-handle",
      { platform: "codehost", handle: "dev7" },
      await pay(requirements)
    )
    expect(res.status).toBe(200)
    const attested = (await res.json()) as {
      platformId: number
      userId: string
      handle: string
      issuedAt: string
      attestation: Hex
      attestor: Address
    }
    expect(attested).toMatchObject({ platformId: 3, userId: "7", handle: "dev7" })
    const signer = await recoverTypedDataAddress({
      domain: publicHandleDomain(31337),
      types: publicHandleTypes,
      primaryType: "PublicHandle",
      message: { platformId: 3, userId: "7", handle: "dev7", issuedAt: BigInt(attested.issuedAt) },
      signature: attested.attestation
    })
    expect(signer).toBe(attested.attestor)
    expect(decodePaymentResponseHeader(res.headers.get("payment-response") ?? "").success).toBe(true)
    expect((await balances()).payer).toBe(before.payer - PRICE)
  })

  it("the facilitator was never told a handle or a platform, and got only the quote and the authorization", () => {
    const received = facilitator().received()
    expect(received.filter((r) => r.path === "/verify").length).toBeGreaterThan(0)
    const text = JSON.stringify(received)
    for (const secret of ["dev42", "dev7", "nosuchuser", "microblog", "codehost", "fedsocial"])
      expect(text).not.toContain(secret)
    for (const request of received.filter((r) => r.path !== "/supported")) {
      const body = request.body as {
        paymentPayload: { resource: { url: string }; payload: Record<string, unknown> }
        paymentRequirements: unknown
      }
      expect(body.paymentPayload.resource.url).toBe(`${attestor.url}/v1/commitment`)
      expect(Object.keys(body.paymentPayload).sort()).toEqual([
        "accepted",
        "payload",
        "resource",
        "x402Version"
      ])
      expect(Object.keys(body.paymentPayload.payload).sort()).toEqual(["permit2Authorization", "signature"])
    }
  })

  it("metrics count outcomes without naming a handle", async () => {
    const text = await (
      await fetch(`${attestor.url}/v1/metrics`, { headers: { authorization: "Bearer devnet" } })
    ).text()
    expect(text).toMatch(/attestor_commitments_total\{[^}]*outcome="payment_required"[^}]*\} [1-9]/)
    expect(text).toMatch(/attestor_public_handles_total\{[^}]*outcome="ok"[^}]*\} 1/)
    for (const outcome of ["settled", "reused", "failed", "in_flight"])
      expect(text).toMatch(
        new RegExp(`attestor_lookup_payments_total\\{[^}]*outcome="${outcome}"[^}]*\\} [1-9]`)
      )
    for (const secret of ["dev42", "dev7", "nosuchuser"]) expect(text).not.toContain(secret)
    // And a scraper reads all of it.
    expect(parsePrometheus(text).get("attestor_lookup_payments_total")?.type).toBe("counter")
  })
})
