/**
 * Every request and response body of the attestor (docs/attestor.md §2 and §4), the hint
 * plaintext (docs/protocol.md §6) and the x402 payment challenge of paid handle lookups.
 */
import { Arbitrary, ParseResult, Schema } from "effect"
import { platformIds } from "./ids.js"
import {
  Address,
  BlockNumber,
  Bytes32,
  ChainId,
  CompressedPublicKey,
  Deadline,
  EcdsaSignature,
  PublicKey,
  requestBody,
  Signature,
  Uint64,
  Uint256,
  UnixSecondsString
} from "./primitives.js"
import { IndexerHealth, RegisterHandle, SenderHealth } from "./relayer.js"

const optional = <S extends Schema.Schema.All>(schema: S) => Schema.optionalWith(schema, { exact: true })

// ---------------------------------------------------------------------------------------------
// Platforms
// ---------------------------------------------------------------------------------------------

export const Platform = Schema.Literal(
  "microblog",
  "messenger",
  "codehost",
  "fedsocial",
  "community"
).annotations({
  identifier: "Platform"
})
export type Platform = typeof Platform.Type

export const PlatformId = Schema.Literal(1, 2, 3, 4, 5).annotations({ identifier: "PlatformId" })
export type PlatformId = typeof PlatformId.Type

export const platformIdOf = (platform: Platform): PlatformId => platformIds[platform]

const platformById: Readonly<Record<PlatformId, Platform>> = {
  1: "microblog",
  2: "messenger",
  3: "codehost",
  4: "fedsocial",
  5: "community"
}
export const platformOf = (id: PlatformId): Platform => platformById[id]

/** Platforms whose handles the attestor resolves to user ids (a paid lookup). */
export const LookupPlatform = Schema.Literal("microblog", "codehost", "fedsocial").annotations({
  identifier: "LookupPlatform"
})
export type LookupPlatform = typeof LookupPlatform.Type

/** Platforms with a signed public-handle attestation. */
export const PublicHandlePlatform = Schema.Literal("microblog", "codehost").annotations({
  identifier: "PublicHandlePlatform"
})
export type PublicHandlePlatform = typeof PublicHandlePlatform.Type

/** Platforms that log in through `POST /v1/oauth/:platform/start` (messenger uses its widget). */
export const OAuthPlatform = Schema.Literal("microblog", "codehost", "community", "fedsocial").annotations({
  identifier: "OAuthPlatform"
})
export type OAuthPlatform = typeof OAuthPlatform.Type

/** Platforms with an OAuth provider redirect (`GET /v1/oauth/:platform/callback`). */
export const OAuthCallbackPlatform = Schema.Literal("microblog", "codehost", "community").annotations({
  identifier: "OAuthCallbackPlatform"
})
export type OAuthCallbackPlatform = typeof OAuthCallbackPlatform.Type

/**
 * An immutable numeric platform user id, in canonical decimal. A non-canonical spelling ("007")
 * would hash to a commitment no login could ever match, so it is refused.
 */
export const UserId = Schema.String.pipe(
  Schema.pattern(/^[1-9][0-9]{0,31}$/, { message: () => "expected a numeric user id without leading zeros" }),
  Schema.annotations({ identifier: "UserId", description: "numeric platform user id, decimal string" })
)

/** Whether a value is a `UserId`: the one test of a canonical user id, wherever one arrives. */
export const isUserId = Schema.is(UserId)

/** A platform handle as typed by a creator; per-platform syntax is checked by the service. */
export const Handle = Schema.String.pipe(
  Schema.minLength(1),
  Schema.maxLength(256),
  Schema.pattern(/^\S+$/, { message: () => "expected a handle without whitespace" }),
  Schema.annotations({ identifier: "Handle" })
)

/** Platform and platform id travel together; they must name the same platform. */
const samePlatform = (r: { readonly platform: Platform; readonly platformId: PlatformId }) =>
  platformIds[r.platform] === r.platformId || {
    path: ["platformId"],
    message: `platformId does not match platform ${r.platform}`
  }

const withMatchingPlatformId = <R extends { readonly platform: Platform; readonly platformId: PlatformId }>(
  r: R
): R => ({ ...r, platformId: platformIds[r.platform] })

// ---------------------------------------------------------------------------------------------
// Strings with a shape
// ---------------------------------------------------------------------------------------------

/** An absolute http(s) URL. */
export const Url = Schema.String.pipe(
  Schema.maxLength(2048),
  Schema.filter((s) => {
    if (!URL.canParse(s)) return "expected an absolute URL"
    const { protocol } = new URL(s)
    return protocol === "https:" || protocol === "http:" || "expected an http(s) URL"
  }),
  Schema.annotations({
    identifier: "Url",
    arbitrary: () => (fc) => fc.webUrl({ validSchemes: ["https", "http"] }).filter((u) => u.length <= 2048)
  })
)

const OPAQUE_TOKEN = /^[A-Za-z0-9._~-]{16,512}$/
const opaqueToken = (identifier: string, description: string) =>
  Schema.String.pipe(
    Schema.pattern(OPAQUE_TOKEN, { message: () => "expected 16..512 URL-safe characters" }),
    Schema.annotations({
      identifier,
      description,
      arbitrary: () => (fc) =>
        fc
          .array(fc.constantFrom(..."ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~-"), {
            minLength: 16,
            maxLength: 64
          })
          .map((cs) => cs.join(""))
    })
  )

/**
 * A session token. Opaque to clients; URL-safe so it can ride in the redirect's fragment
 * (`#attest=<session>`) without escaping.
 */
export const SessionToken = opaqueToken("SessionToken", "opaque session token, URL-safe characters").pipe(
  Schema.brand("SessionToken")
)
export type SessionToken = typeof SessionToken.Type

/** OAuth `state`: random, stored server-side with the bound intent. */
export const OAuthState = opaqueToken("OAuthState", "opaque OAuth state, URL-safe characters")

/** CAIP-2 network of an EVM chain, as x402 names it: `eip155:<chainId>`. */
export const Network = Schema.TemplateLiteral("eip155:", Schema.Number).pipe(
  Schema.filter(
    (s) =>
      (/^eip155:[1-9][0-9]*$/.test(s) && Number.isSafeInteger(Number(s.slice(7)))) ||
      "expected eip155:<positive chain id>"
  ),
  Schema.annotations({
    identifier: "Network",
    arbitrary: () => (fc) => fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }).map(networkOf)
  })
)
export type Network = typeof Network.Type

export const networkOf = (chainId: number): `eip155:${number}` => `eip155:${chainId}`

/**
 * RFC 3339 UTC date-time. Used only for the fedsocial sign-in message's `expirationTime`, which
 * the client copies verbatim into the FIP-11 (EIP-4361) message where the format is ISO 8601.
 */
export const IsoDateTime = Schema.String.pipe(
  Schema.filter(
    (s) =>
      (/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?Z$/.test(s) && !Number.isNaN(Date.parse(s))) ||
      "expected an RFC 3339 UTC date-time"
  ),
  Schema.annotations({
    identifier: "IsoDateTime",
    arbitrary: () => (fc) =>
      fc
        .date({
          min: new Date("2000-01-01T00:00:00Z"),
          max: new Date("2999-12-31T23:59:59Z"),
          noInvalidDate: true
        })
        .map((d) => d.toISOString())
  })
)

// ---------------------------------------------------------------------------------------------
// Info
// ---------------------------------------------------------------------------------------------

/**
 * x402 asset transfer method of the permit-based payment (`HANDLE_LOOKUP_TRANSFER_METHOD`):
 * `permit2-exact`, the specs' vocabulary, or `permit2`, `@x402/evm`'s exact scheme.
 */
export const AssetTransferMethod = Schema.Literal("permit2-exact", "permit2").annotations({
  identifier: "AssetTransferMethod"
})

/** The handle-lookup price shown to a creator before paying; `amount` in atomic units. */
export const HandleLookupPrice = Schema.Struct({
  network: Network,
  asset: Address,
  amount: Uint256,
  decimals: Schema.Int.pipe(Schema.between(0, 255)),
  symbol: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(32)),
  payTo: Address,
  assetTransferMethod: AssetTransferMethod
}).annotations({ identifier: "HandleLookupPrice" })
export type HandleLookupPrice = typeof HandleLookupPrice.Type

/**
 * `price` is present exactly when lookups are paid: with `off` nothing can be bought and `free`
 * (local development only) charges nothing, so both carry `price: null`.
 */
export const HandleLookup = Schema.Union(
  Schema.Struct({
    mode: Schema.Literal("paid"),
    platforms: Schema.Array(LookupPlatform),
    price: HandleLookupPrice
  }).annotations({ identifier: "HandleLookupPaid" }),
  Schema.Struct({
    mode: Schema.Literal("off", "free"),
    platforms: Schema.Array(LookupPlatform),
    price: Schema.Null
  }).annotations({ identifier: "HandleLookupUnpaid" })
).annotations({ identifier: "HandleLookup" })
export type HandleLookup = typeof HandleLookup.Type

export const AttestorInfo = Schema.Struct({
  chainId: ChainId,
  vault: Address,
  attestor: Address,
  hintPublicKey: CompressedPublicKey,
  platforms: Schema.Array(Platform),
  bindDeadlineSeconds: Schema.Int.pipe(Schema.positive()),
  handleLookup: HandleLookup
}).annotations({ identifier: "AttestorInfo" })
export type AttestorInfo = typeof AttestorInfo.Type

/** The hint index as health reports it; `block` once it covers its first range. */
export const HintIndexHealth = Schema.Struct({
  state: Schema.Literal("starting", "ready", "retrying", "disabled"),
  block: optional(BlockNumber)
}).annotations({ identifier: "HintIndexHealth" })
export type HintIndexHealth = typeof HintIndexHealth.Type

/** The veto watcher: its state, the indexer block of its last pass, and whether it sends vetoes. */
export const VetoWatcherHealth = Schema.Struct({
  state: Schema.Literal("starting", "ready", "retrying", "disabled"),
  block: optional(BlockNumber),
  autoVeto: Schema.Boolean
}).annotations({ identifier: "VetoWatcherHealth" })
export type VetoWatcherHealth = typeof VetoWatcherHealth.Type

/**
 * `{ ok: true }` of docs/attestor.md, plus whether the chain answers (absent without an indexer), the vault
 * indexer's, the hint index's and the veto watcher's state, and with `AUTO_VETO` the attestor
 * key's sender (absent while its store or the chain cannot say). `ok` is true whenever the process
 * serves: commitments, logins and `/v1/info` need no chain.
 */
export const AttestorHealthResponse = Schema.Struct({
  ok: Schema.Literal(true),
  chain: optional(Schema.Literal("reachable", "unreachable")),
  indexer: optional(IndexerHealth),
  hints: optional(HintIndexHealth),
  vetoWatcher: optional(VetoWatcherHealth),
  sender: optional(SenderHealth)
}).annotations({ identifier: "AttestorHealthResponse" })
export type AttestorHealthResponse = typeof AttestorHealthResponse.Type

// ---------------------------------------------------------------------------------------------
// Commitments, hints, public handles
// ---------------------------------------------------------------------------------------------

const CommitmentRequestFields = Schema.Struct({
  platform: Platform,
  userId: optional(UserId),
  handle: optional(Handle)
})

/** A numeric `userId` is free; a `handle` alone is a paid lookup. At least one is required. */
export const CommitmentRequest = CommitmentRequestFields.pipe(
  Schema.filter(
    (r) =>
      r.userId !== undefined ||
      r.handle !== undefined || { path: ["userId"], message: "userId or handle is required" }
  ),
  Schema.annotations({
    identifier: "CommitmentRequest",
    ...requestBody,
    arbitrary: () => () =>
      Arbitrary.make(CommitmentRequestFields).map((r) =>
        r.userId === undefined && r.handle === undefined ? { ...r, userId: "1" } : r
      )
  })
)
export type CommitmentRequest = typeof CommitmentRequest.Type

export const CommitmentResponseFields = Schema.Struct({
  platform: Platform,
  platformId: PlatformId,
  userId: UserId,
  userIdHash: Bytes32,
  nonce: Bytes32,
  attestorSalt: Bytes32,
  handleCommitment: Bytes32,
  kind: Schema.Literal(2),
  attestor: Address,
  attestorPubKey: PublicKey
})

export const CommitmentResponse = CommitmentResponseFields.pipe(
  Schema.filter(samePlatform),
  Schema.annotations({
    identifier: "CommitmentResponse",
    arbitrary: () => () => Arbitrary.make(CommitmentResponseFields).map(withMatchingPlatformId)
  })
)
export type CommitmentResponse = typeof CommitmentResponse.Type

/**
 * The hint plaintext (docs/protocol.md §6). Fields are declared in the protocol's order so that encoding
 * and `JSON.stringify` produce `{"platformId":…,"userId":…,"nonce":…,"attestorSalt":…}` plus the
 * optional fallback fields. An absent fallback means recipient 0x0 and delay 0.
 */
export const Hint = Schema.Struct({
  platformId: PlatformId,
  userId: UserId,
  nonce: Bytes32,
  attestorSalt: Bytes32,
  fallbackRecipient: optional(Address),
  fallbackDelay: optional(Uint256)
}).annotations({ identifier: "Hint" })
export type Hint = typeof Hint.Type

export const PublicHandleRequest = Schema.Struct({
  platform: PublicHandlePlatform,
  handle: Handle
}).annotations({ identifier: "PublicHandleRequest", ...requestBody })
export type PublicHandleRequest = typeof PublicHandleRequest.Type

/**
 * The attestation and, so the creator can seal the hint, the commitment's other fields (docs/protocol.md
 * §10 "Public handle").
 */
const PublicHandleResponseFields = Schema.Struct({
  platform: PublicHandlePlatform,
  platformId: PlatformId,
  userId: UserId,
  handle: Handle,
  /** uint64 in the signed `PublicHandle` message; a timestamp, so a decimal string on the wire. */
  issuedAt: Uint64,
  attestation: EcdsaSignature,
  attestor: Address,
  handleCommitment: Bytes32,
  userIdHash: Bytes32,
  nonce: Bytes32,
  attestorSalt: Bytes32,
  kind: Schema.Literal(2),
  attestorPubKey: PublicKey
})

export const PublicHandleResponse = PublicHandleResponseFields.pipe(
  Schema.filter(samePlatform),
  Schema.annotations({
    identifier: "PublicHandleResponse",
    arbitrary: () => () => Arbitrary.make(PublicHandleResponseFields).map(withMatchingPlatformId)
  })
)
export type PublicHandleResponse = typeof PublicHandleResponse.Type

// ---------------------------------------------------------------------------------------------
// Logins and sessions
// ---------------------------------------------------------------------------------------------

export const MAX_INTENT_IDS = 64

/** Escrow ids a login is meant for: 1..64 bytes32 values. */
export const IntentIds = Schema.Array(Bytes32).pipe(
  Schema.minItems(1, { message: () => "expected at least 1 id" }),
  Schema.maxItems(MAX_INTENT_IDS, { message: () => `expected at most ${MAX_INTENT_IDS} ids` }),
  Schema.annotations({ identifier: "IntentIds" })
)

/**
 * A login's client binding (docs/protocol.md §10 "Login challenge"): the client draws a 32-byte
 * `loginSecret` per login and keeps it; the start carries its SHA-256, the challenge, and the
 * session made by that login answers only to a client presenting the secret.
 */
export const LoginChallenge = Bytes32.annotations({
  identifier: "LoginChallenge",
  description: "SHA-256 of the client's 32-byte loginSecret, 0x-prefixed hex"
})
export type LoginChallenge = typeof LoginChallenge.Type

/** The 32 random bytes whose SHA-256 a login's start carried (docs/protocol.md §10 "Login challenge"). */
export const LoginSecret = Bytes32.annotations({
  identifier: "LoginSecret",
  description: "the 32-byte secret drawn by the client for one login, 0x-prefixed hex"
})
export type LoginSecret = typeof LoginSecret.Type

/** Body of `POST /v1/oauth/:platform/start`. The intent travels here, never in a URL. */
export const OAuthStartRequest = Schema.Struct({
  stealthOwner: Address,
  ids: optional(IntentIds),
  redirect: optional(Url),
  loginChallenge: optional(LoginChallenge)
}).annotations({ identifier: "OAuthStartRequest", ...requestBody })
export type OAuthStartRequest = typeof OAuthStartRequest.Type

export const OAuthStartResponse = Schema.Struct({
  url: Url,
  state: OAuthState
}).annotations({ identifier: "OAuthStartResponse" })
export type OAuthStartResponse = typeof OAuthStartResponse.Type

/** fedsocial start: the fields the client puts into its sign-in message. */
export const FedsocialStartResponse = Schema.Struct({
  nonce: Schema.String.pipe(
    Schema.pattern(/^[A-Za-z0-9]{8,128}$/, { message: () => "expected 8..128 alphanumeric characters" })
  ),
  domain: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(253)),
  uri: Url,
  expirationTime: IsoDateTime
}).annotations({ identifier: "FedsocialStartResponse" })
export type FedsocialStartResponse = typeof FedsocialStartResponse.Type

/** Declared only to be refused; a query value is one string or, when repeated, several. */
const RefusedQueryValue = Schema.Union(Schema.String, Schema.Array(Schema.String)).annotations({
  description: "refused: escrow ids are never accepted in a URL"
})

const LegacyOAuthStartFields = {
  stealthOwner: Address,
  redirect: optional(Url),
  loginChallenge: optional(LoginChallenge),
  format: optional(Schema.Literal("json"))
}

/**
 * Query of the deprecated `GET /v1/oauth/:platform/start`. Escrow ids are never accepted in a URL:
 * an `id` or `ids` parameter is refused (400) instead of being ignored, and never reaches the Type.
 * No `identifier`, like every query schema (see `QuoteQuery`).
 */
export const LegacyOAuthStartQuery = Schema.transformOrFail(
  Schema.Struct({
    ...LegacyOAuthStartFields,
    id: optional(RefusedQueryValue),
    ids: optional(RefusedQueryValue)
  }),
  Schema.typeSchema(Schema.Struct(LegacyOAuthStartFields)),
  {
    strict: true,
    decode: ({ id, ids, ...query }, _, ast) =>
      id !== undefined || ids !== undefined
        ? ParseResult.fail(new ParseResult.Type(ast, { id, ids }, "escrow ids are never accepted in a URL"))
        : ParseResult.succeed(query),
    encode: ParseResult.succeed
  }
).annotations({ title: "LegacyOAuthStartQuery" })
export type LegacyOAuthStartQuery = typeof LegacyOAuthStartQuery.Type

/**
 * Query of the provider redirect `GET /v1/oauth/:platform/callback` (no `identifier`: a query): a
 * `code` when the user consented, an `error` (`access_denied`) when not. Other parameters a
 * provider adds (`scope`, `error_description`) are ignored.
 */
export const OAuthCallbackQuery = Schema.Struct({
  state: OAuthState,
  code: optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(2048))),
  error: optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(256)))
}).annotations({ title: "OAuthCallbackQuery" })
export type OAuthCallbackQuery = typeof OAuthCallbackQuery.Type

const WidgetText = Schema.String.pipe(Schema.maxLength(256))

/**
 * The messenger login-widget payload as the widget hands it to the page, unchanged: the hash is
 * computed over these exact fields, so numbers stay numbers and names keep their snake case.
 */
export const MessengerAuth = Schema.Struct({
  id: Schema.Int.pipe(Schema.positive()),
  first_name: optional(WidgetText),
  last_name: optional(WidgetText),
  username: optional(WidgetText),
  photo_url: optional(Schema.String.pipe(Schema.maxLength(2048))),
  auth_date: Schema.NonNegativeInt,
  hash: Schema.String.pipe(
    Schema.pattern(/^[0-9a-f]{64}$/, { message: () => "expected 64 lowercase hex digits" })
  )
}).annotations({ identifier: "MessengerAuth" })
export type MessengerAuth = typeof MessengerAuth.Type

export const MessengerVerifyRequest = Schema.Struct({
  auth: MessengerAuth,
  stealthOwner: Address,
  id: optional(Bytes32),
  loginChallenge: optional(LoginChallenge)
}).annotations({ identifier: "MessengerVerifyRequest", ...requestBody })
export type MessengerVerifyRequest = typeof MessengerVerifyRequest.Type

/** A signed sign-in message; the intent was bound to its nonce at start. */
export const FedsocialVerifyRequest = Schema.Struct({
  message: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(4096)),
  signature: Signature
}).annotations({ identifier: "FedsocialVerifyRequest", ...requestBody })
export type FedsocialVerifyRequest = typeof FedsocialVerifyRequest.Type

/** A verified login bound to the stealth owner chosen before it. Empty `ids`: every escrow of the user. */
export const Session = Schema.Struct({
  platform: Platform,
  userId: UserId,
  stealthOwner: Address,
  ids: Schema.Array(Bytes32).pipe(Schema.maxItems(MAX_INTENT_IDS))
}).annotations({ identifier: "Session" })
export type Session = typeof Session.Type

/**
 * A login's answer: the session token plus what it stands for, so the client can check it logged
 * in as the account and key it meant. `expiresAt` is unix seconds as a decimal string.
 */
export const SessionResponse = Schema.Struct({
  session: SessionToken,
  ...Session.fields,
  expiresAt: UnixSecondsString
}).annotations({ identifier: "SessionResponse" })
export type SessionResponse = typeof SessionResponse.Type

// ---------------------------------------------------------------------------------------------
// Escrows and binds
// ---------------------------------------------------------------------------------------------

export const EscrowsRequest = Schema.Struct({
  session: SessionToken,
  loginSecret: optional(LoginSecret)
}).annotations({ identifier: "EscrowsRequest", ...requestBody })
export type EscrowsRequest = typeof EscrowsRequest.Type

export const Visibility = Schema.Literal("public", "private").annotations({ identifier: "Visibility" })
export type Visibility = typeof Visibility.Type

const EscrowFields = Schema.Struct({
  id: Bytes32,
  registered: Schema.Boolean,
  owner: Schema.NullOr(Address),
  pendingOwner: Schema.NullOr(Address),
  pendingReadyAt: Schema.NullOr(Uint256),
  register: Schema.NullOr(RegisterHandle),
  visibility: Visibility
})

/**
 * One escrow of the session's user. A registered account has an `owner` (the zero address until a
 * bind finalizes) and no `register`; an unregistered one has `owner: null` and the registration
 * payload a relayer needs to register it alongside the bind. `pendingReadyAt` is when a pending
 * bind can be finalized (uint256 timestamp, decimal string).
 */
export const Escrow = EscrowFields.pipe(
  Schema.filter((e) =>
    e.registered
      ? (e.owner !== null && e.register === null) ||
        "a registered escrow has an owner and no register payload"
      : (e.owner === null && e.register !== null) ||
        "an unregistered escrow has a register payload and no owner"
  ),
  Schema.annotations({
    identifier: "Escrow",
    arbitrary: () => () =>
      Arbitrary.make(Schema.Struct({ e: EscrowFields, owner: Address, register: RegisterHandle })).map(
        ({ e, owner, register }) =>
          e.registered ? { ...e, owner, register: null } : { ...e, owner: null, register }
      )
  })
)
export type Escrow = typeof Escrow.Type

export const EscrowsResponse = Schema.Struct({
  escrows: Schema.Array(Escrow)
}).annotations({ identifier: "EscrowsResponse" })
export type EscrowsResponse = typeof EscrowsResponse.Type

const BindRequestFields = Schema.Struct({
  session: SessionToken,
  loginSecret: optional(LoginSecret),
  ids: optional(IntentIds),
  contest: optional(Schema.Boolean),
  deadline: optional(Deadline),
  visibility: optional(Visibility)
})

/** `contest: true` names exactly one escrow (docs/attestor.md §4, 400 otherwise). */
export const BindRequest = BindRequestFields.pipe(
  Schema.filter(
    (r) =>
      r.contest !== true ||
      r.ids?.length === 1 || { path: ["ids"], message: "contest requires exactly one id in ids" }
  ),
  Schema.annotations({
    identifier: "BindRequest",
    ...requestBody,
    arbitrary: () => () =>
      Arbitrary.make(Schema.Struct({ r: BindRequestFields, id: Bytes32 })).map(({ r, id }) =>
        r.contest === true ? { ...r, ids: [id] } : r
      )
  })
)
export type BindRequest = typeof BindRequest.Type

/** One attestor signature over `BindOwner(id, newOwner, bindNonce, deadline)`. */
export const BindSignature = Schema.Struct({
  beneficiaryId: Bytes32,
  newOwner: Address,
  bindNonce: Uint256,
  deadline: Deadline,
  signature: EcdsaSignature,
  attestor: Address,
  register: Schema.NullOr(RegisterHandle)
}).annotations({ identifier: "BindSignature" })
export type BindSignature = typeof BindSignature.Type

export const BindResponse = Schema.Struct({
  binds: Schema.Array(BindSignature)
}).annotations({ identifier: "BindResponse" })
export type BindResponse = typeof BindResponse.Type

// ---------------------------------------------------------------------------------------------
// Paid handle lookup (x402 v2)
// ---------------------------------------------------------------------------------------------

export const PaymentRequirements = Schema.Struct({
  scheme: Schema.Literal("exact"),
  network: Network,
  asset: Address,
  amount: Uint256,
  payTo: Address,
  maxTimeoutSeconds: Schema.Int.pipe(Schema.positive()),
  extra: Schema.Union(
    Schema.Struct({
      assetTransferMethod: Schema.Literal("permit2-exact"),
      name: Schema.String,
      version: Schema.String,
      signerAddress: Address,
      spenderAddress: Address
    }).annotations({ identifier: "PaymentRequirementsExtra" }),
    // `@x402/evm`'s exact scheme: the spender is its canonical x402ExactPermit2Proxy.
    Schema.Struct({
      assetTransferMethod: Schema.Literal("permit2"),
      name: Schema.String,
      version: Schema.String
    }).annotations({ identifier: "PaymentRequirementsPermit2Extra" })
  )
}).annotations({ identifier: "PaymentRequirements" })
export type PaymentRequirements = typeof PaymentRequirements.Type

/**
 * The x402 v2 challenge carried base64-encoded in the `PAYMENT-REQUIRED` header of a 402. Named
 * after the header because `PaymentRequired` is the error of the same 402 (schema/errors.ts).
 * Exactly one `accepts` entry.
 */
export const PaymentRequiredHeader = Schema.Struct({
  x402Version: Schema.Literal(2),
  error: optional(Schema.String),
  resource: Schema.Struct({
    url: Url,
    description: Schema.String,
    mimeType: Schema.String
  }).annotations({ identifier: "PaymentResource" }),
  accepts: Schema.Tuple(PaymentRequirements)
}).annotations({ identifier: "PaymentRequiredHeader" })
export type PaymentRequiredHeader = typeof PaymentRequiredHeader.Type
