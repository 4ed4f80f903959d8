/**
 * Pre-rendered answers (src/http/precomputed.ts): the relayer's quote, encoded once per quote, is
 * the bytes of `QuoteResponse`'s own encoding for any quote; a value the encoding refuses is
 * handed back for HttpApiBuilder to refuse; a value `isEncoded` does not vouch for is encoded by
 * HttpApiBuilder, not written as it is. (The commitment's answer: test/attestor/commitment.test.ts.)
 */
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc, Schema } from "effect"
import { getAddress, toHex } from "viem"
import { AddressFromSelf } from "../../schema/primitives.js"
import { QuoteAction, type QuoteResponse } from "../../schema/relayer.js"
import { encodedBody, precomputed, renderedBody } from "../../src/http/precomputed.js"
import { quoteAnswer } from "../../src/relayer/handlers/quote.js"

const address = fc
  .uint8Array({ minLength: 20, maxLength: 20 })
  .map((bytes) => AddressFromSelf.make(getAddress(toHex(bytes))))
const uint256 = fc.bigInt({ min: 0n, max: 2n ** 256n - 1n })

const quote: fc.Arbitrary<QuoteResponse> = fc.record({
  chainId: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
  vault: address,
  asset: address,
  adapter: address,
  action: fc.constantFrom(...QuoteAction.literals),
  relayer: address,
  relayerFee: uint256,
  gasEstimate: uint256,
  gasPrice: uint256,
  validUntil: fc.integer({ min: 0, max: 2 ** 40 })
}) as fc.Arbitrary<QuoteResponse>

describe("a pre-rendered quote", () => {
  it("is the schema's encoding byte for byte, as JSON with status 200, for any quote", () => {
    fc.assert(
      fc.property(quote, (answer) => {
        const response = quoteAnswer.render(answer)
        expect(renderedBody(response)).toBe(encodedBody(quoteAnswer, answer))
        expect((response as HttpServerResponse.HttpServerResponse).status).toBe(200)
        expect((response as HttpServerResponse.HttpServerResponse).body).toMatchObject({
          contentType: "application/json"
        })
      })
    )
  })

  it("hands back a quote the encoding refuses, for HttpApiBuilder to refuse as it would", () => {
    const [answer] = fc.sample(quote, 1) as [QuoteResponse]
    const negative = { ...answer, relayerFee: -1n }
    expect(quoteAnswer.render(negative)).toBe(negative)
    expect(renderedBody(quoteAnswer.render(negative))).toBeUndefined()
  })
})

describe("a value that is its own encoding", () => {
  const Pair = Schema.Struct({ a: Schema.String, n: Schema.NumberFromString })
  const answer = precomputed(Schema.Struct({ a: Schema.String, b: Schema.Number }), {
    isEncoded: (value) => value.a.length > 0
  })

  it("is written as it is when vouched for, and handed back otherwise", () => {
    expect(renderedBody(answer.render({ a: "x", b: 1 }))).toBe('{"a":"x","b":1}')
    const unvouched = { a: "", b: 1 }
    expect(answer.render(unvouched)).toBe(unvouched)
  })

  it("without `isEncoded`, every value is encoded by the schema", () => {
    expect(renderedBody(precomputed(Pair).render({ a: "x", n: 5 }))).toBe('{"a":"x","n":"5"}')
    expect(HttpServerResponse.isServerResponse(precomputed(Pair).render({ a: "x", n: 5 }))).toBe(true)
  })
})
