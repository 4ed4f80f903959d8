/**
 * The x402 wire of paid lookups (src/attestor/lookups/payments/x402.ts; docs/protocol.md §10 "Paid lookups"): the
 * quoted requirements with the permit2-exact `extra`, a challenge that names neither handle nor
 * platform, and the reading of a `PAYMENT-SIGNATURE`: version 2, exactly the quoted requirements,
 * a Permit2 authorization for the quoted token, amount, spender and payee whose deadline is within
 * `maxTimeoutSeconds` and not passed, and the payer and nonce that identify it; in both transfer
 * methods, the `permit2` one quoting `@x402/evm`'s extra and taking only the canonical proxy as
 * spender. The payer's Permit2 signature recovered as each method's clients sign it: the devnet's
 * payer for `permit2-exact`, a stock `@x402/evm` client for `permit2`.
 */
import { decodePaymentRequiredHeader, encodePaymentSignatureHeader } from "@x402/core/http"
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types"
import { Effect, Either } from "effect"
import { type Hex, parseSignature, serializeCompactSignature, signatureToCompactSignature, size } from "viem"
import { describe, expect, it } from "vitest"
import { devnetAccount } from "../../contracts/deploy.js"
import {
  CANONICAL_PERMIT2,
  type LookupPrice,
  lookupRequirements,
  PAYMENT_CLOCK_SKEW_SECONDS,
  type PaymentRefusal,
  payerSigned,
  paymentRequiredHeader,
  readPaymentSignature,
  recoverPayer,
  X402_EXACT_PERMIT2_PROXY
} from "../../src/attestor/lookups/payments/x402.js"
import { signPermit2Payment, stockClientPayment } from "../support/x402Payer.js"

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
/** The time of reading: the authorizations below end exactly `maxTimeoutSeconds` later. */
const NOW = 1_900_000_000 - price.maxTimeoutSeconds

interface Overrides {
  readonly accepted?: unknown
  readonly version?: number
  readonly from?: unknown
  readonly nonce?: unknown
  readonly token?: unknown
  readonly amount?: unknown
  readonly spender?: unknown
  readonly to?: unknown
  readonly deadline?: unknown
}

const signature = (overrides: Overrides = {}) =>
  encodePaymentSignatureHeader({
    x402Version: overrides.version ?? 2,
    accepted: (overrides.accepted ?? quoted) as never,
    payload: {
      signature: `0x${"11".repeat(65)}`,
      permit2Authorization: {
        from: "from" in overrides ? overrides.from : "0x90f79bf6eb2c4f870365e785982e1f101e93b906",
        permitted: {
          token: "token" in overrides ? overrides.token : price.asset,
          amount: "amount" in overrides ? overrides.amount : price.amount.toString()
        },
        spender: "spender" in overrides ? overrides.spender : price.spenderAddress,
        nonce: "nonce" in overrides ? overrides.nonce : "123456789",
        deadline: "deadline" in overrides ? overrides.deadline : "1900000000",
        witness: { to: "to" in overrides ? overrides.to : price.payTo, validAfter: "0" }
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

  it("challenges with a constant resource and the optional payment-identifier extension: the same header whatever was asked", () => {
    const header = paymentRequiredHeader(quoted, "http://127.0.0.1:8081")
    expect(decodePaymentRequiredHeader(header)).toEqual({
      x402Version: 2,
      resource: {
        url: "http://127.0.0.1:8081/v1/commitment",
        description: expect.any(String),
        mimeType: "application/json"
      },
      accepts: [quoted],
      extensions: { "payment-identifier": { info: { required: false }, schema: expect.any(Object) } }
    })
    expect(Buffer.from(header, "base64").toString("utf8")).not.toMatch(
      /microblog|codehost|fedsocial|"handle"/
    )
  })
})

describe("reading a PAYMENT-SIGNATURE", () => {
  it("gives the payload and the authorization's payer and nonce", () => {
    const read = readPaymentSignature(signature(), quoted, NOW)
    expect(Either.isRight(read) && read.right.authorization).toEqual({
      payer: "0x90F79bf6EB2c4f870365E785982E1f101E93b906",
      nonce: 123456789n
    })
  })

  it("takes the quoted requirements with addresses in any case", () => {
    const lower = { ...quoted, asset: quoted.asset.toLowerCase(), payTo: quoted.payTo.toLowerCase() }
    expect(Either.isRight(readPaymentSignature(signature({ accepted: lower }), quoted, NOW))).toBe(true)
  })

  it("refuses another amount, network, payee or extra", () => {
    for (const accepted of [
      { ...quoted, amount: "1" },
      { ...quoted, network: "eip155:56" },
      { ...quoted, payTo: "0x0000000000000000000000000000000000000001" },
      { ...quoted, extra: { ...quoted.extra, spenderAddress: "0x0000000000000000000000000000000000000002" } }
    ])
      expect(readPaymentSignature(signature({ accepted }), quoted, NOW)).toEqual(Either.left("requirements"))
  })

  it("refuses another version, a malformed header and an authorization without payer or nonce", () => {
    expect(readPaymentSignature(signature({ version: 1 }), quoted, NOW)).toEqual(Either.left("version"))
    expect(readPaymentSignature("not base64 json", quoted, NOW)).toEqual(Either.left("malformed"))
    expect(readPaymentSignature(signature({ from: "nobody" }), quoted, NOW)).toEqual(Either.left("malformed"))
    expect(readPaymentSignature(signature({ nonce: "-1" }), quoted, NOW)).toEqual(Either.left("malformed"))
    expect(readPaymentSignature(signature({ nonce: 5 }), quoted, NOW)).toEqual(Either.left("malformed"))
  })

  it("takes the authorization's addresses in any case", () => {
    const lower = {
      token: price.asset.toLowerCase(),
      spender: price.spenderAddress.toLowerCase(),
      to: price.payTo.toLowerCase()
    }
    expect(Either.isRight(readPaymentSignature(signature(lower), quoted, NOW))).toBe(true)
  })

  it("refuses an authorization for another token, amount, spender or payee than the quote's", () => {
    const other = "0x0000000000000000000000000000000000000003"
    for (const overrides of [
      { token: other },
      { amount: (price.amount - 1n).toString() },
      { amount: (price.amount + 1n).toString() },
      { spender: other },
      { to: other }
    ])
      expect(readPaymentSignature(signature(overrides), quoted, NOW)).toEqual(Either.left("authorization"))
  })

  it("refuses a deadline later than maxTimeoutSeconds (and the clock skew allowed) from now; an earlier one is read", () => {
    const latest = 1_900_000_000 + PAYMENT_CLOCK_SKEW_SECONDS
    expect(readPaymentSignature(signature({ deadline: String(latest + 1) }), quoted, NOW)).toEqual(
      Either.left("deadline")
    )
    expect(readPaymentSignature(signature(), quoted, NOW - PAYMENT_CLOCK_SKEW_SECONDS - 1)).toEqual(
      Either.left("deadline")
    )
    // A payer whose clock runs a few seconds ahead of the attestor's is read.
    expect(Either.isRight(readPaymentSignature(signature({ deadline: String(latest) }), quoted, NOW))).toBe(
      true
    )
    expect(Either.isRight(readPaymentSignature(signature(), quoted, NOW - 5))).toBe(true)
    expect(Either.isRight(readPaymentSignature(signature({ deadline: "1899999999" }), quoted, NOW))).toBe(
      true
    )
  })

  it("refuses an authorization whose token, amount, spender, payee or deadline cannot be read", () => {
    for (const overrides of [
      { token: "nothing" },
      { amount: 10_000_000_000_000_000 },
      { amount: "-1" },
      { spender: undefined },
      { to: 5 },
      { deadline: "soon" },
      { deadline: 1900000000 }
    ])
      expect(readPaymentSignature(signature(overrides), quoted, NOW)).toEqual(Either.left("malformed"))
  })
})

describe("the permit2 transfer method", () => {
  const permit2Price: LookupPrice = {
    chainId: price.chainId,
    asset: price.asset,
    assetName: price.assetName,
    assetVersion: price.assetVersion,
    amount: price.amount,
    payTo: price.payTo,
    maxTimeoutSeconds: price.maxTimeoutSeconds,
    transferMethod: "permit2"
  }
  const permit2Quoted = lookupRequirements(permit2Price)

  it("quotes exact with @x402/evm's permit2 extra: no signer, no spender", () => {
    expect(permit2Quoted).toEqual({
      ...quoted,
      extra: { assetTransferMethod: "permit2", name: "Tether USD", version: "1" }
    })
  })

  it("reads a payment to the canonical proxy, whatever the facilitator's signer", () => {
    expect(X402_EXACT_PERMIT2_PROXY).toBe("0x402085c248EeA27D92E8b30b2C58ed07f9E20001")
    const read = readPaymentSignature(
      signature({ accepted: permit2Quoted, spender: X402_EXACT_PERMIT2_PROXY.toLowerCase() }),
      permit2Quoted,
      NOW
    )
    expect(Either.isRight(read) && read.right.authorization.nonce).toBe(123456789n)
  })

  it("refuses another spender, token, amount or payee, a late deadline, and the other method's requirements", () => {
    for (const overrides of [
      { spender: price.signerAddress },
      { token: price.payTo },
      { amount: "1" },
      { to: "0x0000000000000000000000000000000000000003" }
    ])
      expect(
        readPaymentSignature(signature({ ...overrides, accepted: permit2Quoted }), permit2Quoted, NOW)
      ).toEqual(Either.left("authorization"))
    expect(
      readPaymentSignature(
        signature({ accepted: permit2Quoted, deadline: String(1_900_000_001 + PAYMENT_CLOCK_SKEW_SECONDS) }),
        permit2Quoted,
        NOW
      )
    ).toEqual(Either.left("deadline"))
    expect(readPaymentSignature(signature({ accepted: quoted }), permit2Quoted, NOW)).toEqual(
      Either.left("requirements")
    )
    expect(readPaymentSignature(signature({ accepted: permit2Quoted }), quoted, NOW)).toEqual(
      Either.left("requirements")
    )
  })
})

describe("the payer's signature", () => {
  const payer = devnetAccount(3)
  const other = devnetAccount(7)
  const permit2Quoted = lookupRequirements({ ...price, transferMethod: "permit2" })
  const now = () => Math.floor(Date.now() / 1000)

  /** Reads `payment` against `quoted` and checks its signature: the refusal, if any. */
  const check = async (
    payment: PaymentPayload,
    quoted: PaymentRequirements
  ): Promise<PaymentRefusal | undefined> => {
    const read = readPaymentSignature(encodePaymentSignatureHeader(payment), quoted, now())
    if (Either.isLeft(read)) return read.left
    const signed = await Effect.runPromise(Effect.either(payerSigned(read.right, quoted)))
    return Either.isLeft(signed) ? signed.left : undefined
  }

  /** A stock `@x402/evm` client's payment of the `permit2` quote. */
  const stockPayment = (quoted: PaymentRequirements) => stockClientPayment(payer, quoted)

  it("permit2-exact: a payment signed by its payer recovers to it", async () => {
    const payment = await signPermit2Payment(payer, quoted)
    const read = readPaymentSignature(encodePaymentSignatureHeader(payment), quoted, now())
    if (Either.isLeft(read)) throw new Error(read.left)
    expect(await Effect.runPromise(recoverPayer(read.right, quoted))).toBe(payer.address)
    expect(await check(payment, quoted)).toBeUndefined()
  })

  it("permit2: a stock @x402/evm client's payment recovers to its payer, under the canonical Permit2", async () => {
    expect(CANONICAL_PERMIT2).toBe("0x000000000022D473030F116dDEE9F6B43aC78BA3")
    const payment = await stockPayment(permit2Quoted)
    expect(await check(payment, permit2Quoted)).toBeUndefined()
  })

  it("an EIP-2098 compact signature (64 bytes, which Permit2 takes on chain) recovers to its payer too", async () => {
    const payment = await signPermit2Payment(payer, quoted)
    const full = (payment.payload as { signature: Hex }).signature
    const compact = serializeCompactSignature(signatureToCompactSignature(parseSignature(full)))
    expect(size(compact)).toBe(64)
    const withCompact = { ...payment, payload: { ...payment.payload, signature: compact } }
    expect(await check(withCompact, quoted)).toBeUndefined()
  })

  it("refuses an authorization naming a payer that another key signed, or nobody", async () => {
    for (const quote of [quoted, permit2Quoted]) {
      const spender = quote === quoted ? price.spenderAddress : X402_EXACT_PERMIT2_PROXY
      const byOther = await signPermit2Payment(other, quote, { from: payer.address, spender })
      expect(await check(byOther, quote)).toBe("signature")
      for (const forged of [`0x${"11".repeat(65)}`, `0x${"00".repeat(65)}`, "0x00"] as const) {
        const unsigned = await signPermit2Payment(payer, quote, { spender, signature: forged })
        expect(await check(unsigned, quote)).toBe("signature")
      }
    }
  })

  it("refuses a signature over other terms than the quote's: another chain, another payee signed", async () => {
    const otherChain = await signPermit2Payment(
      payer,
      { ...quoted, network: "eip155:1" },
      { accepted: quoted }
    )
    expect(await check(otherChain, quoted)).toBe("signature")
    const otherPayee = await signPermit2Payment(payer, quoted, { signedTo: other.address })
    expect(await check(otherPayee, quoted)).toBe("signature")
    // A facilitator with a spender of its own: the stock client's payment to the proxy is not one.
    const ownSpender = lookupRequirements({ ...price, spenderAddress: other.address })
    const stock = await stockPayment(permit2Quoted)
    expect(await check({ ...stock, accepted: ownSpender }, ownSpender)).toBe("authorization")
  })

  it("marks an authorization whose deadline has passed expired (only a replay takes it), before its signature is looked at", () => {
    const late = readPaymentSignature(signature({ deadline: String(NOW - 1) }), quoted, NOW)
    expect(Either.isRight(late) && late.right.expired).toBe(true)
    const onTime = readPaymentSignature(signature({ deadline: String(NOW) }), quoted, NOW)
    expect(Either.isRight(onTime) && onTime.right.expired).toBe(false)
  })
})
