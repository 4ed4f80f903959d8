import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Schema } from "effect"
import { FULL } from "../../schema/ids.js"
import {
  AccountsResponse,
  CancelBindRequest,
  ClaimRequest,
  ConsolidateRequest,
  FinalizeBindRequest,
  HealthResponse,
  PingRequest,
  ProposeBindRequest,
  QuoteQuery,
  QuoteResponse,
  RegisterHandle,
  RegisterOwner,
  RelayerConfig,
  RotateOwnerRequest,
  ShieldTemplatesRequest,
  TxHashResponse,
  TxStatus,
  TxStatusRequest
} from "../../schema/relayer.js"
import {
  addr,
  claim,
  relayer as examples,
  id,
  registerHandle,
  registerOwner,
  sig65,
  template
} from "./fixtures.js"

type AnySchema = Schema.Schema.AnyNoContext

const refuses = (schema: AnySchema, input: unknown) =>
  Either.isLeft(Schema.decodeUnknownEither(schema)(input))

const roundTrip = (schema: AnySchema, input: unknown) =>
  Effect.gen(function* () {
    const value = yield* Schema.decodeUnknown(schema)(input)
    return yield* Schema.encode(schema)(value)
  })

const bodies: ReadonlyArray<readonly [string, AnySchema, unknown]> = [
  ["RelayerConfig", RelayerConfig, examples.RelayerConfig],
  ["QuoteQuery", QuoteQuery, examples.QuoteQuery],
  ["QuoteResponse", QuoteResponse, examples.QuoteResponse],
  ["ClaimRequest", ClaimRequest, examples.ClaimRequest],
  ["ConsolidateRequest", ConsolidateRequest, examples.ConsolidateRequest],
  ["ShieldTemplatesRequest", ShieldTemplatesRequest, examples.ShieldTemplatesRequest],
  ["RotateOwnerRequest", RotateOwnerRequest, examples.RotateOwnerRequest],
  ["PingRequest", PingRequest, examples.PingRequest],
  ["CancelBindRequest", CancelBindRequest, examples.CancelBindRequest],
  ["ProposeBindRequest", ProposeBindRequest, examples.ProposeBindRequest],
  ["FinalizeBindRequest", FinalizeBindRequest, examples.FinalizeBindRequest],
  ["TxHashResponse", TxHashResponse, examples.TxHashResponse],
  ["TxStatusRequest", TxStatusRequest, examples.TxStatusRequest],
  ["TxStatus", TxStatus, examples.TxStatus],
  ["AccountsResponse", AccountsResponse, examples.AccountsResponse],
  ["HealthResponse", HealthResponse, examples.HealthResponse]
]

describe("relayer bodies round-trip", () => {
  for (const [name, schema, input] of bodies) {
    it.effect(`${name}: decode then encode gives the same JSON`, () =>
      Effect.gen(function* () {
        expect(yield* roundTrip(schema, input)).toStrictEqual(input)
      })
    )
  }

  it.effect("a claim request in lowercase and uppercase comes back canonical", () =>
    Effect.gen(function* () {
      const sloppy = {
        ...examples.ClaimRequest,
        claim: {
          ...examples.ClaimRequest.claim,
          asset: addr.a.toLowerCase(),
          adapter: `0x${addr.d.slice(2).toUpperCase()}`,
          beneficiaryId: id.toUpperCase().replace("0X", "0x")
        },
        adapterData: template.toUpperCase().replace("0X", "0x"),
        register: { ...registerOwner, owner: addr.c.toLowerCase() }
      }
      const decoded = yield* Schema.decodeUnknown(ClaimRequest)(sloppy)
      expect(decoded.claim.asset).toBe(addr.a)
      expect(decoded.claim.adapter).toBe(addr.d)
      expect(decoded.claim.amount).toBe(FULL)
      expect(decoded.register?.kind === 1 && decoded.register.owner).toBe(addr.c)
      expect(yield* Schema.encode(ClaimRequest)(decoded)).toStrictEqual(examples.ClaimRequest)
    })
  )

  it.effect("account balances keyed by lowercase addresses come back checksummed", () =>
    Effect.gen(function* () {
      const [first] = examples.AccountsResponse.accounts
      const sloppy = {
        ...examples.AccountsResponse,
        accounts: [{ ...first, balances: { [addr.a.toLowerCase()]: "5", [addr.b.toLowerCase()]: "0" } }]
      }
      const encoded = yield* roundTrip(AccountsResponse, sloppy)
      expect(encoded).toStrictEqual({ ...examples.AccountsResponse, accounts: [first] })
    })
  )

  it("a claim request needs neither register nor consolidate", () => {
    const minimal = { claim, adapterData: "0x", signature: sig65 }
    expect(Schema.encodeSync(ClaimRequest)(Schema.decodeUnknownSync(ClaimRequest)(minimal))).toStrictEqual(
      minimal
    )
  })

  it("action bodies take no fee (the service answers fee_too_low or runs without one)", () => {
    const { fee: _, ...ping } = examples.PingRequest
    expect(Schema.decodeUnknownSync(PingRequest)(ping)).not.toHaveProperty("fee")
  })

  it("TxStatus without a block number", () => {
    const pending = { txHash: examples.TxStatus.txHash, status: "pending" }
    expect(Schema.encodeSync(TxStatus)(Schema.decodeUnknownSync(TxStatus)(pending))).toStrictEqual(pending)
  })
})

describe("QuoteQuery", () => {
  const base = { asset: addr.a, adapter: addr.zero }

  it("defaults to a claim quote without flags", () => {
    expect(Schema.decodeUnknownSync(QuoteQuery)(base)).toStrictEqual({
      ...base,
      action: "claim",
      consolidate: false,
      register: false
    })
    expect(Schema.encodeSync(QuoteQuery)(Schema.decodeUnknownSync(QuoteQuery)(base))).toStrictEqual({
      ...base,
      action: "claim"
    })
  })

  it("reads templates as a number and flags as booleans", () => {
    expect(Schema.decodeUnknownSync(QuoteQuery)(examples.QuoteQuery)).toMatchObject({
      action: "shield-templates",
      templates: 32,
      consolidate: true,
      register: true
    })
  })

  it("accepts a legacy amount, ignores it and never echoes it", () => {
    const decoded = Schema.decodeUnknownSync(QuoteQuery)({ ...base, amount: "1000" })
    expect(decoded).not.toHaveProperty("amount")
    expect(Schema.encodeSync(QuoteQuery)(decoded)).not.toHaveProperty("amount")
  })
})

const without = (o: object, key: string) => Object.fromEntries(Object.entries(o).filter(([k]) => k !== key))
const templates = (n: number, bytes = 320) =>
  Array.from({ length: n }, (_, i) => `0x${i.toString(16).padStart(2, "0").repeat(bytes)}`)

const claimFields = Object.keys(claim)
const claimRequestFields = ["claim", "adapterData", "signature"]

/** [description, schema, input]: every row must be refused. */
const malformed: ReadonlyArray<readonly [string, AnySchema, unknown]> = [
  ...claimRequestFields.map(
    (k) => [`ClaimRequest without ${k}`, ClaimRequest, without(examples.ClaimRequest, k)] as const
  ),
  ...claimFields.map(
    (k) =>
      [
        `ClaimRequest whose claim lacks ${k}`,
        ClaimRequest,
        { ...examples.ClaimRequest, claim: without(examples.ClaimRequest.claim, k) }
      ] as const
  ),
  [
    "ClaimRequest with an amount as a number",
    ClaimRequest,
    { ...examples.ClaimRequest, claim: { ...claim, amount: 1000 } }
  ],
  [
    "ClaimRequest with amount 2^256",
    ClaimRequest,
    { ...examples.ClaimRequest, claim: { ...claim, amount: (2n ** 256n).toString() } }
  ],
  [
    "ClaimRequest with a negative fee",
    ClaimRequest,
    { ...examples.ClaimRequest, claim: { ...claim, relayerFee: "-1" } }
  ],
  [
    "ClaimRequest with nonce 01",
    ClaimRequest,
    { ...examples.ClaimRequest, claim: { ...claim, nonce: "01" } }
  ],
  [
    "ClaimRequest with a 31-byte beneficiaryId",
    ClaimRequest,
    { ...examples.ClaimRequest, claim: { ...claim, beneficiaryId: `0x${"11".repeat(31)}` } }
  ],
  [
    "ClaimRequest with a 19-byte asset",
    ClaimRequest,
    { ...examples.ClaimRequest, claim: { ...claim, asset: `0x${"11".repeat(19)}` } }
  ],
  [
    "ClaimRequest with a bad checksum",
    ClaimRequest,
    { ...examples.ClaimRequest, claim: { ...claim, relayer: "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d35A" } }
  ],
  [
    "ClaimRequest with odd-length adapterData",
    ClaimRequest,
    { ...examples.ClaimRequest, adapterData: "0x123" }
  ],
  ["ClaimRequest with a 0-byte signature", ClaimRequest, { ...examples.ClaimRequest, signature: "0x" }],
  [
    "ClaimRequest with a 2049-byte signature",
    ClaimRequest,
    { ...examples.ClaimRequest, signature: `0x${"ab".repeat(2049)}` }
  ],
  [
    "ClaimRequest with registration kind 3",
    ClaimRequest,
    { ...examples.ClaimRequest, register: { ...registerOwner, kind: 3 } }
  ],
  [
    "ClaimRequest with a kind 1 registration missing its owner",
    ClaimRequest,
    { ...examples.ClaimRequest, register: without(registerOwner, "owner") }
  ],
  ["ClaimRequest as an array", ClaimRequest, [examples.ClaimRequest]],
  [
    "registration with a fallback recipient but no delay",
    RegisterOwner,
    { ...registerOwner, fallbackDelay: "0" }
  ],
  [
    "registration with a delay but no fallback recipient",
    RegisterHandle,
    { ...registerHandle, fallbackDelay: "60" }
  ],
  ["registration kind 2 with kind 1 fields", RegisterHandle, registerOwner],
  [
    "templates not an array",
    ShieldTemplatesRequest,
    { ...examples.ShieldTemplatesRequest, templates: template }
  ],
  ["propose-bind without signatures", ProposeBindRequest, { ...examples.ProposeBindRequest, signatures: [] }],
  [
    "propose-bind with 33 signatures",
    ProposeBindRequest,
    {
      ...examples.ProposeBindRequest,
      signatures: Array.from({ length: 33 }, () => examples.ProposeBindRequest.signatures[0])
    }
  ],
  [
    "propose-bind registering a kind 1 account",
    ProposeBindRequest,
    { ...examples.ProposeBindRequest, register: registerOwner }
  ],
  ["rotate-owner without newOwner", RotateOwnerRequest, without(examples.RotateOwnerRequest, "newOwner")],
  [
    "cancel-bind with a deadline as a number",
    CancelBindRequest,
    { ...examples.CancelBindRequest, deadline: 1900000000 }
  ],
  ["finalize-bind with a 33-byte id", FinalizeBindRequest, { id: `0x${"11".repeat(33)}` }],
  ["tx-status with a hash without 0x", TxStatusRequest, { txHash: "44".repeat(32) }],
  ["tx status with an unknown state", TxStatus, { ...examples.TxStatus, status: "dropped" }],
  ["tx status with a block number as a string", TxStatus, { ...examples.TxStatus, blockNumber: "1234" }],
  ["quote with an unknown action", QuoteQuery, { asset: addr.a, adapter: addr.zero, action: "sweep" }],
  [
    "quote for shield-templates without templates",
    QuoteQuery,
    { asset: addr.a, adapter: addr.zero, action: "shield-templates" }
  ],
  ...["0", "33", "01", " 1", "1.0", "+1", "1e1", "x"].map(
    (t) =>
      [
        `quote with templates=${JSON.stringify(t)}`,
        QuoteQuery,
        { asset: addr.a, adapter: addr.zero, action: "shield-templates", templates: t }
      ] as const
  ),
  ["quote with consolidate=0", QuoteQuery, { asset: addr.a, adapter: addr.zero, consolidate: "0" }],
  ["quote with register=true", QuoteQuery, { asset: addr.a, adapter: addr.zero, register: "true" }],
  ["quote without an adapter", QuoteQuery, { asset: addr.a }],
  [
    "config with a non-zero direct adapter",
    RelayerConfig,
    { ...examples.RelayerConfig, adapters: { direct: addr.a, shield: addr.d } }
  ],
  ["config with the chain id as a string", RelayerConfig, { ...examples.RelayerConfig, chainId: "31337" }],
  ["quote response with a fee as a number", QuoteResponse, { ...examples.QuoteResponse, relayerFee: 1 }],
  ["health that is not ok", HealthResponse, { ...examples.HealthResponse, ok: false }],
  [
    "account of kind 3",
    AccountsResponse,
    { ...examples.AccountsResponse, accounts: [{ ...examples.AccountsResponse.accounts[0], kind: 3 }] }
  ],
  [
    "account with a balance as a number",
    AccountsResponse,
    {
      ...examples.AccountsResponse,
      accounts: [{ ...examples.AccountsResponse.accounts[0], balances: { [addr.a]: 5 } }]
    }
  ],
  [
    "account with a non-address balance key",
    AccountsResponse,
    {
      ...examples.AccountsResponse,
      accounts: [{ ...examples.AccountsResponse.accounts[0], balances: { USDT: "5" } }]
    }
  ],
  [
    "account with fallbackDelay as a number",
    AccountsResponse,
    {
      ...examples.AccountsResponse,
      accounts: [{ ...examples.AccountsResponse.accounts[0], fallbackDelay: 60 }]
    }
  ]
]

describe("malformed relayer bodies are refused", () => {
  it.each(malformed)("%s", (_, schema, input) => {
    expect(refuses(schema, input)).toBe(true)
  })
})

describe("accepted edge cases", () => {
  it.each([
    [
      "32 templates",
      ShieldTemplatesRequest,
      { ...examples.ShieldTemplatesRequest, templates: templates(32) }
    ],
    ["1 template", ShieldTemplatesRequest, { ...examples.ShieldTemplatesRequest, templates: templates(1) }],
    ["a 1-byte signature", CancelBindRequest, { ...examples.CancelBindRequest, signature: "0x01" }],
    [
      "a 2048-byte signature",
      CancelBindRequest,
      { ...examples.CancelBindRequest, signature: `0x${"ab".repeat(2048)}` }
    ],
    [
      "amount 2^256 - 1",
      ClaimRequest,
      { ...examples.ClaimRequest, claim: { ...claim, amount: FULL.toString() } }
    ],
    [
      "templates=1",
      QuoteQuery,
      { asset: addr.a, adapter: addr.zero, action: "shield-templates", templates: "1" }
    ]
  ] as ReadonlyArray<readonly [string, AnySchema, unknown]>)("%s", (_, schema, input) => {
    expect(Either.isRight(Schema.decodeUnknownEither(schema)(input))).toBe(true)
  })
})
