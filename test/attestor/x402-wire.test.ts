/**
 * The x402 wire of paid lookups (src/attestor/payments/x402.ts; docs/protocol.md §10 "Paid lookups"): the
 * quoted requirements with the permit2-exact `extra`, a challenge that names neither handle nor
 * platform, and the reading of a `PAYMENT-SIGNATURE`: version 2, exactly the quoted requirements,
 * and the Permit2 payer and nonce that identify the authorization.
 */
import { decodePaymentRequiredHeader, encodePaymentSignatureHeader } from "@x402/core/http"
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import {
  type LookupPrice,
  lookupRequirements,
  paymentRequiredHeader,
  readPaymentSignature
} from "../../src/attestor/payments/x402.js"

const price: LookupPrice = {
  chainId: 31337,
  asset: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
  assetName: "Tether USD",
  assetVersion: "1",
  amount: 10_000_000_000_000_000n,
  payTo: "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
  maxTimeoutSeconds: 60,
  signerAddress: "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
  spenderAddress: "0x402085c248EeA27D92E8b30b2C58ed07f9E20001"
}
const quoted = lookupRequirements(price)

const signature = (
  overrides: { accepted?: unknown; version?: number; from?: unknown; nonce?: unknown } = {}
) =>
  encodePaymentSignatureHeader({
    x402Version: overrides.version ?? 2,
    accepted: (overrides.accepted ?? quoted) as never,
    payload: {
      signature: `0x${"11".repeat(65)}`,
      permit2Authorization: {
        from: "from" in overrides ? overrides.from : "0x90f79bf6eb2c4f870365e785982e1f101e93b906",
        permitted: { token: price.asset, amount: price.amount.toString() },
        spender: price.spenderAddress,
        nonce: "nonce" in overrides ? overrides.nonce : "123456789",
        deadline: "1900000000",
        witness: { to: price.payTo, validAfter: "0" }
      }
    }
  })

describe("the quote and the challenge", () => {
  it("quotes exact on eip155:<chainId> with the permit2-exact extra", () => {
    expect(quoted).toEqual({
      scheme: "exact",
      network: "eip155:31337",
      asset: price.asset,
      amount: "10000000000000000",
      payTo: price.payTo,
      maxTimeoutSeconds: 60,
      extra: {
        assetTransferMethod: "permit2-exact",
        name: "Tether USD",
        version: "1",
        signerAddress: price.signerAddress,
        spenderAddress: price.spenderAddress
      }
    })
  })

  it("challenges with a constant resource: the same header whatever was asked", () => {
    const header = paymentRequiredHeader(quoted, "http://127.0.0.1:8081")
    expect(decodePaymentRequiredHeader(header)).toEqual({
      x402Version: 2,
      resource: {
        url: "http://127.0.0.1:8081/v1/commitment",
        description: expect.any(String),
        mimeType: "application/json"
      },
      accepts: [quoted]
    })
    expect(Buffer.from(header, "base64").toString("utf8")).not.toMatch(
      /microblog|codehost|fedsocial|"handle"/
    )
  })
})

describe("reading a PAYMENT-SIGNATURE", () => {
  it("gives the payload and the authorization's payer and nonce", () => {
    const read = readPaymentSignature(signature(), quoted)
    expect(Either.isRight(read) && read.right.authorization).toEqual({
      payer: "0x90F79bf6EB2c4f870365E785982E1f101E93b906",
      nonce: 123456789n
    })
  })

  it("takes the quoted requirements with addresses in any case", () => {
    const lower = { ...quoted, asset: quoted.asset.toLowerCase(), payTo: quoted.payTo.toLowerCase() }
    expect(Either.isRight(readPaymentSignature(signature({ accepted: lower }), quoted))).toBe(true)
  })

  it("refuses another amount, network, payee or extra", () => {
    for (const accepted of [
      { ...quoted, amount: "1" },
      { ...quoted, network: "eip155:56" },
      { ...quoted, payTo: "0x0000000000000000000000000000000000000001" },
      { ...quoted, extra: { ...quoted.extra, spenderAddress: "0x0000000000000000000000000000000000000002" } }
    ])
      expect(readPaymentSignature(signature({ accepted }), quoted)).toEqual(Either.left("requirements"))
  })

  it("refuses another version, a malformed header and an authorization without payer or nonce", () => {
    expect(readPaymentSignature(signature({ version: 1 }), quoted)).toEqual(Either.left("version"))
    expect(readPaymentSignature("not base64 json", quoted)).toEqual(Either.left("malformed"))
    expect(readPaymentSignature(signature({ from: "nobody" }), quoted)).toEqual(Either.left("malformed"))
    expect(readPaymentSignature(signature({ nonce: "-1" }), quoted)).toEqual(Either.left("malformed"))
    expect(readPaymentSignature(signature({ nonce: 5 }), quoted)).toEqual(Either.left("malformed"))
  })
})
