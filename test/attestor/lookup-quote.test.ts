/**
 * The paid lookup's quote (src/attestor/lookups/payments/paymentQuote.ts): the facilitator's signer and spender
 * taken only from an x402 v2 `exact` kind on this chain's network with `permit2-exact`; `permit2`
 * offered by a v2 `exact` kind there naming no other method; the start-up check that stops on a
 * facilitator not listing the configured method, naming what it lists; the token's
 * EIP-712 name and version from the settings, its EIP-5267 domain or its `name()`; and the quote
 * read once it succeeds, retried after a failure, never while nobody asks.
 */
import { describe, expect, it } from "@effect/vitest"
import type { FacilitatorClient } from "@x402/core/http"
import type { SupportedResponse } from "@x402/core/types"
import { ConfigError, Effect, Either, Option } from "effect"
import {
  facilitatorListsMethod,
  facilitatorTerms,
  listedKinds,
  lookupQuote,
  offersMethod,
  offersPermit2
} from "../../src/attestor/lookups/payments/paymentQuote.js"
import { ChainReverted } from "../../src/chain/errors.js"
import { makeMockChainClient } from "../../src/chain/MockChainClient.js"
import type { PaidLookupSettings } from "../../src/config/attestor.js"

const SIGNER = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
const SPENDER = "0x402085c248EeA27D92E8b30b2C58ed07f9E20001"
const ASSET = "0x5FbDB2315678afecb367f032d93F642f64180aa3"

const kind = (overrides: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) => ({
  x402Version: 2,
  scheme: "exact",
  network: "eip155:31337",
  extra: { assetTransferMethod: "permit2-exact", signerAddress: SIGNER, spenderAddress: SPENDER, ...extra },
  ...overrides
})

const supported = (...kinds: Array<ReturnType<typeof kind>>) =>
  ({ kinds, extensions: [], signers: {} }) as unknown as SupportedResponse

describe("facilitatorTerms", () => {
  it("takes the signer and spender of the v2 exact permit2-exact kind on this network", () => {
    expect(
      facilitatorTerms(
        supported(kind({ network: "eip155:1" }), kind({ x402Version: 1 }), kind()),
        "eip155:31337"
      )
    ).toEqual(Option.some({ signerAddress: SIGNER, spenderAddress: SPENDER }))
  })

  it.each([
    ["another network", kind({ network: "eip155:56" })],
    ["x402 version 1", kind({ x402Version: 1 })],
    ["another scheme", kind({ scheme: "upto" })],
    ["another transfer method", kind({}, { assetTransferMethod: "eip3009" })],
    ["no spender", kind({}, { spenderAddress: undefined })],
    ["a signer that is no address", kind({}, { signerAddress: "facilitator" })]
  ])("offers nothing for %s", (_, offered) => {
    expect(facilitatorTerms(supported(offered), "eip155:31337")).toEqual(Option.none())
  })

  it("offers nothing for an answer without kinds", () => {
    expect(facilitatorTerms({} as SupportedResponse, "eip155:31337")).toEqual(Option.none())
  })
})

/** The kind `@x402/evm`'s facilitator announces: no `extra`. */
const libraryKind = (overrides: Record<string, unknown> = {}) =>
  ({ x402Version: 2, scheme: "exact", network: "eip155:31337", ...overrides }) as unknown as ReturnType<
    typeof kind
  >

describe("offersPermit2 and offersMethod", () => {
  it("permit2: a v2 exact kind on this network without a transfer method, or naming permit2", () => {
    expect(offersPermit2(supported(libraryKind()), "eip155:31337")).toBe(true)
    expect(offersPermit2(supported(kind({}, { assetTransferMethod: "permit2" })), "eip155:31337")).toBe(true)
    expect(offersMethod(supported(kind(), libraryKind()), "eip155:31337", "permit2")).toBe(true)
    expect(offersMethod(supported(kind(), libraryKind()), "eip155:31337", "permit2-exact")).toBe(true)
  })

  it.each([
    ["only permit2-exact", supported(kind())],
    ["another network", supported(libraryKind({ network: "eip155:8453" }))],
    ["x402 version 1", supported(libraryKind({ x402Version: 1 }))],
    ["another scheme", supported(libraryKind({ scheme: "upto" }))],
    ["nothing", {} as SupportedResponse]
  ])("permit2 is not offered by %s", (_, answer) => {
    expect(offersMethod(answer, "eip155:31337", "permit2")).toBe(false)
  })

  it("permit2-exact is not offered by the library's kind alone", () => {
    expect(offersMethod(supported(libraryKind()), "eip155:31337", "permit2-exact")).toBe(false)
  })

  it("lists kinds for a start-up line: short, printable, at most eight", () => {
    expect(listedKinds(supported(kind(), libraryKind({ network: "eip155:8453" })))).toBe(
      "v2 exact eip155:31337 permit2-exact, v2 exact eip155:8453"
    )
    expect(listedKinds({} as SupportedResponse)).toBe("nothing")
    expect(listedKinds(supported(libraryKind({ network: "eip155:1\n\u001b[31mred" })))).toBe(
      "v2 exact eip155:1??[31mred"
    )
    const many = supported(...Array.from({ length: 10 }, (_, i) => libraryKind({ network: `eip155:${i}` })))
    expect(listedKinds(many)).toMatch(/eip155:7 and 2 more$/)
  })
})

describe("facilitatorListsMethod", () => {
  const check = (method: "permit2-exact" | "permit2", answer: SupportedResponse | Error) =>
    Effect.either(
      facilitatorListsMethod({
        method,
        chainId: Effect.succeed(31337),
        facilitator: facilitatorAnswering([answer]).client
      })
    )

  it.effect("stops on a facilitator that answers without the method, naming what it lists", () =>
    Effect.gen(function* () {
      const refused = yield* check("permit2", supported(kind()))
      expect(Either.isLeft(refused) && ConfigError.isConfigError(refused.left)).toBe(true)
      expect(Either.isLeft(refused) && refused.left._op === "InvalidData" && refused.left).toMatchObject({
        path: ["HANDLE_LOOKUP_TRANSFER_METHOD"],
        message:
          "the facilitator (FACILITATOR_URL) does not list x402 v2 exact permit2 payments on eip155:31337; it lists v2 exact eip155:31337 permit2-exact"
      })
      const other = yield* check("permit2-exact", supported(libraryKind()))
      expect(Either.isLeft(other) && other.left._op === "InvalidData" && other.left.message).toMatch(
        /does not list x402 v2 exact permit2-exact payments on eip155:31337; it lists v2 exact eip155:31337$/
      )
    })
  )

  it.effect("passes a facilitator that lists it, and one that does not answer", () =>
    Effect.gen(function* () {
      expect(Either.isRight(yield* check("permit2", supported(libraryKind())))).toBe(true)
      expect(Either.isRight(yield* check("permit2-exact", supported(kind())))).toBe(true)
      expect(Either.isRight(yield* check("permit2", new Error("down")))).toBe(true)
    })
  )
})

const settings = (overrides: Partial<PaidLookupSettings> = {}): PaidLookupSettings => ({
  facilitatorUrl: "http://127.0.0.1:9",
  facilitatorToken: Option.none(),
  facilitatorTimeoutMs: 1_000,
  amount: 10n ** 16n,
  payTo: SIGNER,
  maxTimeoutSeconds: 300,
  transferMethod: "permit2-exact",
  paymentRetentionDays: 30,
  answerRetentionSeconds: 86_400,
  decimals: 18,
  symbol: "USDT",
  assetName: Option.none(),
  assetVersion: Option.none(),
  ...overrides
})

/** A facilitator whose `/supported` answers in turn from `answers` (an Error is thrown). */
const facilitatorAnswering = (answers: Array<SupportedResponse | Error>) => {
  let calls = 0
  const client = {
    getSupported: async () => {
      const answer = answers[Math.min(calls, answers.length - 1)]
      calls++
      if (answer instanceof Error || answer === undefined) throw answer ?? new Error("no answer")
      return answer
    }
  } as unknown as FacilitatorClient
  return { client, calls: () => calls }
}

describe("lookupQuote", () => {
  it.effect("answers 503 while the facilitator is down, then quotes and keeps the quote", () =>
    Effect.gen(function* () {
      const facilitator = facilitatorAnswering([new Error("down"), supported(kind())])
      let domainReads = 0
      const chain = makeMockChainClient({
        readContract: ((request: { functionName: string }) => {
          domainReads++
          return request.functionName === "eip712Domain"
            ? Effect.succeed(["0x0f", "Tether USD", "2", 31337n, ASSET, `0x${"00".repeat(32)}`, []])
            : Effect.die("unexpected read")
        }) as never
      })
      const quote = yield* lookupQuote({
        settings: settings(),
        asset: ASSET,
        chain,
        chainId: Effect.succeed(31337),
        facilitator: facilitator.client
      })
      expect(facilitator.calls()).toBe(0)
      const down = yield* Effect.flip(quote)
      expect(down._tag).toBe("Unavailable")
      const quoted = yield* quote
      expect(quoted).toEqual({
        scheme: "exact",
        network: "eip155:31337",
        asset: ASSET,
        amount: "10000000000000000",
        payTo: SIGNER,
        maxTimeoutSeconds: 300,
        extra: {
          assetTransferMethod: "permit2-exact",
          name: "Tether USD",
          version: "2",
          signerAddress: SIGNER,
          spenderAddress: SPENDER
        }
      })
      yield* quote
      expect(facilitator.calls()).toBe(2)
      expect(domainReads).toBe(1)
    })
  )

  it.effect("a facilitator that offers no permit2-exact payment here: 503, asked again next time", () =>
    Effect.gen(function* () {
      const facilitator = facilitatorAnswering([supported(kind({ network: "eip155:8453" }))])
      const quote = yield* lookupQuote({
        settings: settings({ assetName: Option.some("Tether USD"), assetVersion: Option.some("1") }),
        asset: ASSET,
        chain: makeMockChainClient({}),
        chainId: Effect.succeed(31337),
        facilitator: facilitator.client
      })
      expect((yield* Effect.flip(quote))._tag).toBe("Unavailable")
      expect((yield* Effect.flip(quote))._tag).toBe("Unavailable")
      expect(facilitator.calls()).toBe(2)
    })
  )

  it.effect("permit2: quotes @x402/evm's extra once the facilitator lists the library's kind", () =>
    Effect.gen(function* () {
      const quote = yield* lookupQuote({
        settings: settings({
          transferMethod: "permit2",
          assetName: Option.some("Tether USD"),
          assetVersion: Option.some("1")
        }),
        asset: ASSET,
        chain: makeMockChainClient({}),
        chainId: Effect.succeed(31337),
        facilitator: facilitatorAnswering([supported(kind()), supported(kind(), libraryKind())]).client
      })
      expect((yield* Effect.flip(quote))._tag).toBe("Unavailable")
      expect((yield* quote).extra).toEqual({
        assetTransferMethod: "permit2",
        name: "Tether USD",
        version: "1"
      })
    })
  )

  it.effect("a token without an EIP-712 domain: its name() and version 1; the settings win", () =>
    Effect.gen(function* () {
      const chain = makeMockChainClient({
        readContract: ((request: { functionName: string }) =>
          request.functionName === "eip712Domain"
            ? Effect.fail(new ChainReverted({ message: "no such function" } as never))
            : Effect.succeed("Test Dollar")) as never
      })
      const quoteWith = (overrides: Partial<PaidLookupSettings>) =>
        Effect.flatMap(
          lookupQuote({
            settings: settings(overrides),
            asset: ASSET,
            chain,
            chainId: Effect.succeed(31337),
            facilitator: facilitatorAnswering([supported(kind())]).client
          }),
          (quote) => quote
        )
      expect((yield* quoteWith({})).extra).toMatchObject({ name: "Test Dollar", version: "1" })
      expect((yield* quoteWith({ assetVersion: Option.some("3") })).extra).toMatchObject({
        name: "Test Dollar",
        version: "3"
      })
    })
  )
})
