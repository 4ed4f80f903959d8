/**
 * Every request and response body of the relayer (docs/relayer.md §2 and §4), with the field names
 * of docs/relayer.md. Rules that need chain state or the relayer's configuration (nonces, fee quotes,
 * allowed adapters, canonical templates) are the service's; these schemas refuse what is malformed
 * on its face.
 */
import { Arbitrary, Option, ParseResult, Schema } from "effect"
import { MAX_TEMPLATES, SHIELD_PAYLOAD_BYTES } from "./ids.js"
import {
  AccountKind,
  Address,
  addressRecord,
  BlockNumber,
  Bytes32,
  ChainId,
  Deadline,
  Hex,
  NonNegativeInt,
  requestBody,
  Signature,
  Uint256,
  UnixSeconds,
  ZeroAddress,
  ZeroAddressOnly
} from "./primitives.js"

// ---------------------------------------------------------------------------------------------
// Configuration and quotes
// ---------------------------------------------------------------------------------------------

export const RelayerConfig = Schema.Struct({
  chainId: ChainId,
  vault: Address,
  relayer: Address,
  settlementAsset: Address,
  adapters: Schema.Struct({
    direct: ZeroAddressOnly,
    shield: Address
  }).annotations({ identifier: "Adapters" }),
  minDeadlineSeconds: NonNegativeInt,
  quoteTtlSeconds: NonNegativeInt
}).annotations({ identifier: "RelayerConfig" })
export type RelayerConfig = typeof RelayerConfig.Type

/** What a quote prices. `claim` is the default when the query names no action. */
export const QuoteAction = Schema.Literal(
  "claim",
  "consolidate",
  "shield-templates",
  "rotate-owner",
  "ping"
).annotations({ identifier: "QuoteAction" })
export type QuoteAction = typeof QuoteAction.Type

/** `templates` in the query: "1".."32", canonical (no sign, leading zeros or whitespace). */
const TemplateCount = Schema.transformOrFail(
  Schema.String.pipe(
    Schema.pattern(/^(?:[1-9]|[12][0-9]|3[0-2])$/, { message: () => "expected an integer 1..32" })
  ),
  Schema.Int.pipe(Schema.between(1, MAX_TEMPLATES)),
  {
    strict: true,
    decode: (s) => ParseResult.succeed(Number(s)),
    encode: (n) => ParseResult.succeed(String(n))
  }
).annotations({ identifier: "TemplateCount" })

/** A `name=1` query flag: present means true; `false` is written by leaving the parameter out. */
const QueryFlag = Schema.optionalToRequired(Schema.Literal("1"), Schema.Boolean, {
  decode: Option.isSome,
  encode: (b) => (b ? Option.some("1" as const) : Option.none())
})

/**
 * Query of `GET /v1/quote`. There is no amount: the fee depends only on asset, adapter, action and
 * the flags. A legacy `amount` parameter is not declared, so decoding ignores it (excess query
 * parameters are dropped) and it is never echoed.
 *
 * Query schemas carry no `identifier`: the OpenAPI generator lists a query's parameters only when
 * its schema is inlined, and an identifier would turn it into a bare component reference.
 */
export const QuoteQuery = Schema.Struct({
  asset: Address,
  adapter: Address,
  action: Schema.optionalWith(QuoteAction, { default: () => "claim" as const }),
  templates: Schema.optionalWith(TemplateCount, { exact: true }),
  consolidate: QueryFlag,
  register: QueryFlag
})
  .pipe(
    Schema.filter(
      (q) =>
        q.action !== "shield-templates" ||
        q.templates !== undefined || {
          path: ["templates"],
          message: "templates is required for action=shield-templates"
        }
    )
  )
  .annotations({ title: "QuoteQuery" })
export type QuoteQuery = typeof QuoteQuery.Type

export const QuoteResponse = Schema.Struct({
  chainId: ChainId,
  vault: Address,
  asset: Address,
  adapter: Address,
  action: QuoteAction,
  relayer: Address,
  relayerFee: Uint256,
  gasEstimate: Uint256,
  gasPrice: Uint256,
  validUntil: UnixSeconds
}).annotations({ identifier: "QuoteResponse" })
export type QuoteResponse = typeof QuoteResponse.Type

// ---------------------------------------------------------------------------------------------
// Signed messages and their steps
// ---------------------------------------------------------------------------------------------

/** The EIP-712 `Claim` message, field for field. */
export const Claim = Schema.Struct({
  beneficiaryId: Bytes32,
  asset: Address,
  amount: Uint256,
  adapter: Address,
  dataHash: Bytes32,
  relayer: Address,
  relayerFee: Uint256,
  nonce: Uint256,
  deadline: Deadline
}).annotations({ identifier: "Claim" })
export type Claim = typeof Claim.Type

type Fallback = { readonly fallbackRecipient: Address; readonly fallbackDelay: bigint }

/** docs/protocol.md §2: no fallback is recipient 0x0 with delay 0, so the two are zero together or not at all. */
const fallbackBothOrNeither = (r: Fallback) =>
  (r.fallbackRecipient === ZeroAddress) === (r.fallbackDelay === 0n) || {
    path: ["fallbackDelay"],
    message: "fallbackRecipient and fallbackDelay must both be zero (no fallback) or both be set"
  }

/** Makes a generated registration satisfy `fallbackBothOrNeither` instead of filtering it away. */
const coherentFallback = <R extends Fallback>(r: R): R =>
  r.fallbackRecipient === ZeroAddress
    ? { ...r, fallbackDelay: 0n }
    : r.fallbackDelay === 0n
      ? { ...r, fallbackRecipient: ZeroAddress }
      : r

const RegisterOwnerFields = Schema.Struct({
  kind: Schema.Literal(1),
  owner: Address,
  salt: Bytes32,
  fallbackRecipient: Address,
  fallbackDelay: Uint256
})

/** Kind 1 registration: an owner account. */
export const RegisterOwner = RegisterOwnerFields.pipe(
  Schema.filter(fallbackBothOrNeither),
  Schema.annotations({
    identifier: "RegisterOwner",
    arbitrary: () => () => Arbitrary.make(RegisterOwnerFields).map(coherentFallback)
  })
)
export type RegisterOwner = typeof RegisterOwner.Type

const RegisterHandleFields = Schema.Struct({
  kind: Schema.Literal(2),
  handleCommitment: Bytes32,
  fallbackRecipient: Address,
  fallbackDelay: Uint256
})

/** Kind 2 registration: a handle account, owned by nobody until a bind finalizes. */
export const RegisterHandle = RegisterHandleFields.pipe(
  Schema.filter(fallbackBothOrNeither),
  Schema.annotations({
    identifier: "RegisterHandle",
    arbitrary: () => () => Arbitrary.make(RegisterHandleFields).map(coherentFallback)
  })
)
export type RegisterHandle = typeof RegisterHandle.Type

/** The registration payload, for an account that is not registered yet. */
export const Registration = Schema.Union(RegisterOwner, RegisterHandle).annotations({
  identifier: "Registration"
})
export type Registration = typeof Registration.Type

/** A beneficiary-signed `Consolidate`; its `id` and `nonce` come from the surrounding request. */
export const ConsolidateStep = Schema.Struct({
  assetIn: Address,
  amountIn: Uint256,
  minOut: Uint256,
  deadline: Deadline,
  signature: Signature
}).annotations({ identifier: "ConsolidateStep" })
export type ConsolidateStep = typeof ConsolidateStep.Type

/** The `fee` wrapper of action endpoints: a fee-only claim and its signature. */
export const FeeClaim = Schema.Struct({
  claim: Claim,
  signature: Signature
}).annotations({ identifier: "FeeClaim" })
export type FeeClaim = typeof FeeClaim.Type

// ---------------------------------------------------------------------------------------------
// Write endpoints
// ---------------------------------------------------------------------------------------------

const optional = <S extends Schema.Schema.All>(schema: S) => Schema.optionalWith(schema, { exact: true })

export const ClaimRequest = Schema.Struct({
  claim: Claim,
  adapterData: Hex,
  signature: Signature,
  register: optional(Registration),
  consolidate: optional(ConsolidateStep)
}).annotations({ identifier: "ClaimRequest", ...requestBody })
export type ClaimRequest = typeof ClaimRequest.Type

/*
 * `fee` is optional on every action body: a missing fee is the service's 402 `fee_too_low`, not a
 * malformed body, and a private deployment with REQUIRE_ACTION_FEE=false takes actions without one.
 */

export const ConsolidateRequest = Schema.Struct({
  id: Bytes32,
  consolidate: ConsolidateStep,
  register: optional(Registration),
  fee: optional(FeeClaim)
}).annotations({ identifier: "ConsolidateRequest", ...requestBody })
export type ConsolidateRequest = typeof ConsolidateRequest.Type

/**
 * Shield templates as the wire carries them: any list of byte strings. Their count (1..32), size
 * (320 bytes each), uniqueness and canonical form are checked by the service, which refuses every
 * one of those with `invalid_templates` (docs/protocol.md §7) rather than a generic `bad_request`.
 */
export const ShieldTemplates = Schema.Array(Hex).annotations({
  identifier: "ShieldTemplates",
  description: `1..${MAX_TEMPLATES} unique canonical shield payloads, each 0x-prefixed hex of exactly ${SHIELD_PAYLOAD_BYTES} bytes; anything else is 400 invalid_templates`,
  jsonSchema: {
    type: "array",
    minItems: 1,
    maxItems: MAX_TEMPLATES,
    items: { type: "string", pattern: `^0x[0-9a-fA-F]{${SHIELD_PAYLOAD_BYTES * 2}}$` }
  }
})

export const ShieldTemplatesRequest = Schema.Struct({
  id: Bytes32,
  templates: ShieldTemplates,
  deadline: Deadline,
  signature: Signature,
  register: optional(Registration),
  fee: optional(FeeClaim)
}).annotations({ identifier: "ShieldTemplatesRequest", ...requestBody })
export type ShieldTemplatesRequest = typeof ShieldTemplatesRequest.Type

export const RotateOwnerRequest = Schema.Struct({
  id: Bytes32,
  newOwner: Address,
  deadline: Deadline,
  signature: Signature,
  register: optional(Registration),
  fee: optional(FeeClaim)
}).annotations({ identifier: "RotateOwnerRequest", ...requestBody })
export type RotateOwnerRequest = typeof RotateOwnerRequest.Type

export const PingRequest = Schema.Struct({
  id: Bytes32,
  deadline: Deadline,
  signature: Signature,
  register: optional(Registration),
  fee: optional(FeeClaim)
}).annotations({ identifier: "PingRequest", ...requestBody })
export type PingRequest = typeof PingRequest.Type

export const CancelBindRequest = Schema.Struct({
  id: Bytes32,
  deadline: Deadline,
  signature: Signature
}).annotations({ identifier: "CancelBindRequest", ...requestBody })
export type CancelBindRequest = typeof CancelBindRequest.Type

/**
 * At most this many attestor signatures per proposal: each costs the relayer a recovery, and no
 * attestor set needs more.
 */
export const MAX_BIND_SIGNATURES = 32

/** Attestor signatures over one `BindOwner`; the relayer deduplicates and sorts them. */
export const ProposeBindRequest = Schema.Struct({
  id: Bytes32,
  newOwner: Address,
  deadline: Deadline,
  signatures: Schema.NonEmptyArray(Signature).pipe(
    Schema.maxItems(MAX_BIND_SIGNATURES, {
      message: () => `expected at most ${MAX_BIND_SIGNATURES} signatures`
    })
  ),
  register: optional(RegisterHandle)
}).annotations({ identifier: "ProposeBindRequest", ...requestBody })
export type ProposeBindRequest = typeof ProposeBindRequest.Type

export const FinalizeBindRequest = Schema.Struct({
  id: Bytes32
}).annotations({ identifier: "FinalizeBindRequest", ...requestBody })
export type FinalizeBindRequest = typeof FinalizeBindRequest.Type

/** The answer of every write endpoint. */
export const TxHashResponse = Schema.Struct({
  txHash: Bytes32
}).annotations({ identifier: "TxHashResponse" })
export type TxHashResponse = typeof TxHashResponse.Type

// ---------------------------------------------------------------------------------------------
// Reads
// ---------------------------------------------------------------------------------------------

export const TxStatusRequest = Schema.Struct({
  txHash: Bytes32
}).annotations({ identifier: "TxStatusRequest", ...requestBody })
export type TxStatusRequest = typeof TxStatusRequest.Type

export const TxState = Schema.Literal("pending", "success", "reverted", "unknown").annotations({
  identifier: "TxState"
})
export type TxState = typeof TxState.Type

/** `blockNumber` is present once the transaction (or its replacement) is mined. */
export const TxStatus = Schema.Struct({
  txHash: Bytes32,
  status: TxState,
  blockNumber: optional(BlockNumber)
}).annotations({ identifier: "TxStatus" })
export type TxStatus = typeof TxStatus.Type

/** Balances per asset, keyed by checksummed asset address. */
export const AssetAmounts = addressRecord(Uint256).annotations({
  identifier: "AssetAmounts",
  description: "asset address (EIP-55) to uint256 decimal string"
})

/**
 * One account as indexed. Nullable fields are null when the account has no such thing: no
 * fallback, no pending bind. `pendingReadyAt` is a uint256 timestamp in the vault, hence a
 * decimal string. `owner` is the zero address for a handle account no bind has finalized yet.
 */
export const Account = Schema.Struct({
  id: Bytes32,
  kind: AccountKind,
  owner: Address,
  fallbackRecipient: Schema.NullOr(Address),
  fallbackDelay: Schema.NullOr(Uint256),
  pendingOwner: Schema.NullOr(Address),
  pendingReadyAt: Schema.NullOr(Uint256),
  balances: AssetAmounts,
  totalDeposited: AssetAmounts,
  lastActivityBlock: BlockNumber,
  shieldTemplates: NonNegativeInt,
  nonce: Uint256,
  bindNonce: Uint256
}).annotations({ identifier: "Account" })
export type Account = typeof Account.Type

export const AccountsResponse = Schema.Struct({
  chainId: ChainId,
  vault: Address,
  block: BlockNumber,
  accounts: Schema.Array(Account)
}).annotations({ identifier: "AccountsResponse" })
export type AccountsResponse = typeof AccountsResponse.Type

/** The relayer's indexer as health reports it; `block` and `lag` once it has indexed something. */
export const IndexerHealth = Schema.Struct({
  state: Schema.Literal("starting", "backfilling", "following", "standby", "retrying", "disabled"),
  block: optional(BlockNumber),
  lag: optional(NonNegativeInt)
}).annotations({ identifier: "IndexerHealth" })
export type IndexerHealth = typeof IndexerHealth.Type

/**
 * A service's sending key as health reports it (the relayer's hot key, the attestor's key with
 * `AUTO_VETO`), and nothing about any other account: its address,
 * how many of its transactions are pending, the nonce its next transaction gets, and its native
 * balance in wei (as of the sender's last reconciliation with the chain).
 */
export const SenderHealth = Schema.Struct({
  address: Address,
  pending: NonNegativeInt,
  nextNonce: Uint256,
  balance: Uint256
}).annotations({ identifier: "SenderHealth" })
export type SenderHealth = typeof SenderHealth.Type

export const HealthResponse = Schema.Struct({
  ok: Schema.Literal(true),
  chainId: ChainId,
  block: BlockNumber,
  indexer: optional(IndexerHealth),
  sender: optional(SenderHealth)
}).annotations({ identifier: "HealthResponse" })
export type HealthResponse = typeof HealthResponse.Type
