import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Schema } from "effect"
import {
  AttestorHealthResponse,
  AttestorInfo,
  BindRequest,
  BindResponse,
  CommitmentRequest,
  CommitmentResponse,
  Escrow,
  EscrowsRequest,
  EscrowsResponse,
  FedsocialStartResponse,
  FedsocialVerifyRequest,
  Hint,
  LegacyOAuthStartQuery,
  MessengerVerifyRequest,
  networkOf,
  OAuthCallbackQuery,
  OAuthStartRequest,
  OAuthStartResponse,
  PaymentRequiredHeader,
  Platform,
  PublicHandleRequest,
  PublicHandleResponse,
  platformIdOf,
  platformOf,
  SessionResponse
} from "../../schema/attestor.js"
import { platformIds } from "../../schema/ids.js"
import { addr, attestor as examples, id, sig65 } from "./fixtures.js"

type AnySchema = Schema.Schema.AnyNoContext

const refuses = (schema: AnySchema, input: unknown) =>
  Either.isLeft(Schema.decodeUnknownEither(schema)(input))

const roundTrip = (schema: AnySchema, input: unknown) =>
  Effect.gen(function* () {
    const value = yield* Schema.decodeUnknown(schema)(input)
    return yield* Schema.encode(schema)(value)
  })

const bodies: ReadonlyArray<readonly [string, AnySchema, unknown]> = [
  ["AttestorInfo (paid lookups)", AttestorInfo, examples.AttestorInfo],
  ["AttestorInfo (lookups off)", AttestorInfo, examples.AttestorInfoOff],
  ["CommitmentRequest", CommitmentRequest, examples.CommitmentRequest],
  ["CommitmentResponse", CommitmentResponse, examples.CommitmentResponse],
  ["Hint", Hint, examples.Hint],
  ["PublicHandleRequest", PublicHandleRequest, examples.PublicHandleRequest],
  ["PublicHandleResponse", PublicHandleResponse, examples.PublicHandleResponse],
  ["OAuthStartRequest", OAuthStartRequest, examples.OAuthStartRequest],
  ["OAuthStartResponse", OAuthStartResponse, examples.OAuthStartResponse],
  ["FedsocialStartResponse", FedsocialStartResponse, examples.FedsocialStartResponse],
  ["LegacyOAuthStartQuery", LegacyOAuthStartQuery, examples.LegacyOAuthStartQuery],
  ["OAuthCallbackQuery", OAuthCallbackQuery, examples.OAuthCallbackQuery],
  ["MessengerVerifyRequest", MessengerVerifyRequest, examples.MessengerVerifyRequest],
  ["FedsocialVerifyRequest", FedsocialVerifyRequest, examples.FedsocialVerifyRequest],
  ["SessionResponse", SessionResponse, examples.SessionResponse],
  ["EscrowsRequest", EscrowsRequest, examples.EscrowsRequest],
  ["EscrowsResponse", EscrowsResponse, examples.EscrowsResponse],
  ["BindRequest", BindRequest, examples.BindRequest],
  ["BindResponse", BindResponse, examples.BindResponse],
  ["PaymentRequiredHeader", PaymentRequiredHeader, examples.PaymentRequiredHeader],
  ["PaymentRequiredHeader (permit2)", PaymentRequiredHeader, examples.PaymentRequiredHeaderPermit2],
  ["AttestorHealthResponse", AttestorHealthResponse, examples.AttestorHealthResponse]
]

describe("attestor bodies round-trip", () => {
  for (const [name, schema, input] of bodies) {
    it.effect(`${name}: decode then encode gives the same JSON`, () =>
      Effect.gen(function* () {
        expect(yield* roundTrip(schema, input)).toStrictEqual(input)
      })
    )
  }

  it.effect("a lowercase stealth owner and uppercase ids come back canonical", () =>
    Effect.gen(function* () {
      const sloppy = {
        ...examples.OAuthStartRequest,
        stealthOwner: addr.c.toLowerCase(),
        ids: [id.toUpperCase().replace("0X", "0x")]
      }
      expect(yield* roundTrip(OAuthStartRequest, sloppy)).toStrictEqual(examples.OAuthStartRequest)
    })
  )

  it("the hint plaintext keeps the protocol's key order", () => {
    const { fallbackRecipient: _, fallbackDelay: __, ...bare } = examples.Hint
    const encoded = Schema.encodeSync(Hint)(Schema.decodeUnknownSync(Hint)(bare))
    expect(JSON.stringify(encoded)).toBe(
      `{"platformId":4,"userId":"3","nonce":"${bare.nonce}","attestorSalt":"${bare.attestorSalt}"}`
    )
    expect(Object.keys(Schema.encodeSync(Hint)(Schema.decodeUnknownSync(Hint)(examples.Hint)))).toStrictEqual(
      ["platformId", "userId", "nonce", "attestorSalt", "fallbackRecipient", "fallbackDelay"]
    )
  })

  it("a commitment can be asked for by user id alone", () => {
    const body = { platform: "community", userId: "80351110224678912" }
    expect(
      Schema.encodeSync(CommitmentRequest)(Schema.decodeUnknownSync(CommitmentRequest)(body))
    ).toStrictEqual(body)
  })

  it("a bind request can be just the session", () => {
    expect(Schema.decodeUnknownSync(BindRequest)({ session: examples.EscrowsRequest.session })).toStrictEqual(
      {
        session: examples.EscrowsRequest.session
      }
    )
  })
})

describe("platforms", () => {
  it("map to ids and back as docs/protocol.md §2 numbers them", () => {
    for (const platform of Platform.literals) {
      expect(platformIdOf(platform)).toBe(platformIds[platform])
      expect(platformOf(platformIdOf(platform))).toBe(platform)
    }
    expect(platformIdOf("microblog")).toBe(1)
    expect(platformOf(5)).toBe("community")
  })

  it("networks are CAIP-2 eip155 names", () => {
    expect(networkOf(56)).toBe("eip155:56")
  })
})

const without = (o: object, key: string) => Object.fromEntries(Object.entries(o).filter(([k]) => k !== key))
const ids = (n: number) => Array.from({ length: n }, (_, i) => `0x${i.toString(16).padStart(64, "0")}`)
const [escrow] = examples.EscrowsResponse.escrows
const [accepts] = examples.PaymentRequiredHeader.accepts

/** [description, schema, input]: every row must be refused. */
const malformed: ReadonlyArray<readonly [string, AnySchema, unknown]> = [
  ["commitment for an unknown platform", CommitmentRequest, { platform: "myspace", userId: "1" }],
  ["commitment with neither userId nor handle", CommitmentRequest, { platform: "microblog" }],
  ["commitment with a non-numeric userId", CommitmentRequest, { platform: "messenger", userId: "alice" }],
  ["commitment with a zero-padded userId", CommitmentRequest, { platform: "messenger", userId: "007" }],
  ["commitment with a numeric userId as a number", CommitmentRequest, { platform: "messenger", userId: 7 }],
  ["commitment with an empty handle", CommitmentRequest, { platform: "microblog", handle: "" }],
  [
    "commitment with a handle containing a space",
    CommitmentRequest,
    { platform: "microblog", handle: "a b" }
  ],
  [
    "commitment response whose platformId does not match",
    CommitmentResponse,
    { ...examples.CommitmentResponse, platformId: 1 }
  ],
  ["commitment response of kind 1", CommitmentResponse, { ...examples.CommitmentResponse, kind: 1 }],
  ["public handle for messenger", PublicHandleRequest, { platform: "messenger", handle: "alice" }],
  ["public handle for an unknown platform", PublicHandleRequest, { platform: "friendster", handle: "alice" }],
  [
    "public handle response with issuedAt as a number",
    PublicHandleResponse,
    { ...examples.PublicHandleResponse, issuedAt: 1700000000 }
  ],
  [
    "public handle response with a 64-byte attestation",
    PublicHandleResponse,
    { ...examples.PublicHandleResponse, attestation: `0x${"ab".repeat(64)}` }
  ],
  ["oauth start with 65 ids", OAuthStartRequest, { ...examples.OAuthStartRequest, ids: ids(65) }],
  ["oauth start with 0 ids", OAuthStartRequest, { ...examples.OAuthStartRequest, ids: [] }],
  [
    "oauth start with a 31-byte id",
    OAuthStartRequest,
    { ...examples.OAuthStartRequest, ids: [`0x${"11".repeat(31)}`] }
  ],
  [
    "oauth start without a stealth owner",
    OAuthStartRequest,
    without(examples.OAuthStartRequest, "stealthOwner")
  ],
  [
    "oauth start with a stealth owner with a bad checksum",
    OAuthStartRequest,
    { ...examples.OAuthStartRequest, stealthOwner: "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6Fb" }
  ],
  [
    "oauth start with a relative redirect",
    OAuthStartRequest,
    { ...examples.OAuthStartRequest, redirect: "/after-login" }
  ],
  [
    "oauth start with a javascript: redirect",
    OAuthStartRequest,
    { ...examples.OAuthStartRequest, redirect: "javascript:alert(1)" }
  ],
  ["legacy start with an id in the query", LegacyOAuthStartQuery, { ...examples.LegacyOAuthStartQuery, id }],
  [
    "legacy start with ids in the query",
    LegacyOAuthStartQuery,
    { ...examples.LegacyOAuthStartQuery, ids: id }
  ],
  [
    "legacy start with a repeated id",
    LegacyOAuthStartQuery,
    { ...examples.LegacyOAuthStartQuery, id: [id, id] }
  ],
  ["legacy start with an empty id", LegacyOAuthStartQuery, { ...examples.LegacyOAuthStartQuery, id: "" }],
  [
    "legacy start with format=xml",
    LegacyOAuthStartQuery,
    { ...examples.LegacyOAuthStartQuery, format: "xml" }
  ],
  ["callback without a state", OAuthCallbackQuery, { code: "a-code-from-the-provider" }],
  [
    "messenger verify without auth.hash",
    MessengerVerifyRequest,
    { ...examples.MessengerVerifyRequest, auth: without(examples.MessengerVerifyRequest.auth, "hash") }
  ],
  [
    "messenger verify with an uppercase auth.hash",
    MessengerVerifyRequest,
    {
      ...examples.MessengerVerifyRequest,
      auth: { ...examples.MessengerVerifyRequest.auth, hash: "AB".repeat(32) }
    }
  ],
  [
    "messenger verify with auth.id as a string",
    MessengerVerifyRequest,
    { ...examples.MessengerVerifyRequest, auth: { ...examples.MessengerVerifyRequest.auth, id: "123456789" } }
  ],
  [
    "messenger verify without auth_date",
    MessengerVerifyRequest,
    { ...examples.MessengerVerifyRequest, auth: without(examples.MessengerVerifyRequest.auth, "auth_date") }
  ],
  [
    "fedsocial verify with a 0-byte signature",
    FedsocialVerifyRequest,
    { ...examples.FedsocialVerifyRequest, signature: "0x" }
  ],
  [
    "fedsocial verify with a 2049-byte signature",
    FedsocialVerifyRequest,
    { ...examples.FedsocialVerifyRequest, signature: `0x${"ab".repeat(2049)}` }
  ],
  ["fedsocial verify without a message", FedsocialVerifyRequest, { signature: sig65 }],
  [
    "fedsocial start with a unix expirationTime",
    FedsocialStartResponse,
    { ...examples.FedsocialStartResponse, expirationTime: "1893456600" }
  ],
  ["escrows with a short session token", EscrowsRequest, { session: "abc" }],
  ["escrows with a session token containing '#'", EscrowsRequest, { session: "abcdefghijklmnop#q" }],
  ["escrow with an unknown visibility", Escrow, { ...escrow, visibility: "secret" }],
  ["unregistered escrow without its register payload", Escrow, { ...escrow, register: null }],
  ["registered escrow with a register payload", Escrow, { ...escrow, registered: true, owner: addr.zero }],
  [
    "escrow registering a kind 1 account",
    Escrow,
    {
      ...escrow,
      register: { kind: 1, owner: addr.a, salt: id, fallbackRecipient: addr.zero, fallbackDelay: "0" }
    }
  ],
  ["contest without ids", BindRequest, { session: examples.EscrowsRequest.session, contest: true }],
  ["contest with two ids", BindRequest, { ...examples.BindRequest, ids: ids(2) }],
  ["bind with 65 ids", BindRequest, { session: examples.EscrowsRequest.session, ids: ids(65) }],
  ["bind with a deadline as a number", BindRequest, { ...examples.BindRequest, deadline: 1700086400 }],
  ["bind with an unknown visibility", BindRequest, { ...examples.BindRequest, visibility: "both" }],
  ["bind without a session", BindRequest, without(examples.BindRequest, "session")],
  [
    "bind signature with bindNonce as a number",
    BindResponse,
    { binds: [{ ...examples.BindResponse.binds[0], bindNonce: 0 }] }
  ],
  [
    "info with lookups off but a price",
    AttestorInfo,
    { ...examples.AttestorInfoOff, handleLookup: { ...examples.AttestorInfo.handleLookup, mode: "off" } }
  ],
  [
    "info with paid lookups but no price",
    AttestorInfo,
    { ...examples.AttestorInfo, handleLookup: { mode: "paid", platforms: [], price: null } }
  ],
  [
    "info with an unknown lookup mode",
    AttestorInfo,
    { ...examples.AttestorInfo, handleLookup: { ...examples.AttestorInfo.handleLookup, mode: "cheap" } }
  ],
  [
    "info with messenger handle lookups",
    AttestorInfo,
    {
      ...examples.AttestorInfo,
      handleLookup: { ...examples.AttestorInfo.handleLookup, platforms: ["messenger"] }
    }
  ],
  [
    "info with an uncompressed hint key",
    AttestorInfo,
    { ...examples.AttestorInfo, hintPublicKey: `0x04${"aa".repeat(64)}` }
  ],
  [
    "info with a bad network",
    AttestorInfo,
    {
      ...examples.AttestorInfo,
      handleLookup: {
        ...examples.AttestorInfo.handleLookup,
        price: { ...examples.AttestorInfo.handleLookup.price, network: "eip155:0x38" }
      }
    }
  ],
  [
    "payment challenge with two accepts entries",
    PaymentRequiredHeader,
    { ...examples.PaymentRequiredHeader, accepts: [accepts, accepts] }
  ],
  [
    "payment challenge with no accepts entry",
    PaymentRequiredHeader,
    { ...examples.PaymentRequiredHeader, accepts: [] }
  ],
  [
    "payment challenge of x402 version 1",
    PaymentRequiredHeader,
    { ...examples.PaymentRequiredHeader, x402Version: 1 }
  ],
  [
    "payment challenge with scheme upto",
    PaymentRequiredHeader,
    { ...examples.PaymentRequiredHeader, accepts: [{ ...accepts, scheme: "upto" }] }
  ],
  [
    "payment challenge with another transfer method",
    PaymentRequiredHeader,
    {
      ...examples.PaymentRequiredHeader,
      accepts: [{ ...accepts, extra: { ...accepts.extra, assetTransferMethod: "eip3009" } }]
    }
  ],
  [
    "payment challenge with amount as a number",
    PaymentRequiredHeader,
    { ...examples.PaymentRequiredHeader, accepts: [{ ...accepts, amount: 10000 }] }
  ],
  ["hint with an unknown platform id", Hint, { ...examples.Hint, platformId: 6 }],
  ["hint with fallbackDelay as a number", Hint, { ...examples.Hint, fallbackDelay: 86400 }],
  ["health that is not ok", AttestorHealthResponse, { ok: "yes" }]
]

describe("malformed attestor bodies are refused", () => {
  it.each(malformed)("%s", (_, schema, input) => {
    expect(refuses(schema, input)).toBe(true)
  })
})

describe("accepted edge cases", () => {
  it.each([
    ["oauth start with 64 ids", OAuthStartRequest, { ...examples.OAuthStartRequest, ids: ids(64) }],
    ["oauth start with 1 id", OAuthStartRequest, { ...examples.OAuthStartRequest, ids: ids(1) }],
    ["oauth start with only a stealth owner", OAuthStartRequest, { stealthOwner: addr.c }],
    [
      "a free-lookup info",
      AttestorInfo,
      { ...examples.AttestorInfoOff, handleLookup: { mode: "free", platforms: ["microblog"], price: null } }
    ],
    [
      "a fedsocial sign-in by an ERC-1271 wallet",
      FedsocialVerifyRequest,
      { ...examples.FedsocialVerifyRequest, signature: `0x${"ab".repeat(300)}` }
    ],
    [
      "a bind without contest naming many ids",
      BindRequest,
      { session: examples.EscrowsRequest.session, ids: ids(64), contest: false }
    ]
  ] as ReadonlyArray<readonly [string, AnySchema, unknown]>)("%s", (_, schema, input) => {
    expect(Either.isRight(Schema.decodeUnknownEither(schema)(input))).toBe(true)
  })
})
