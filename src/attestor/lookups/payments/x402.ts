/**
 * The x402 version 2 wire of paid handle lookups (docs/attestor.md §4 "Paid handle lookup flow";
 * docs/protocol.md §10 "Paid lookups"): the one requirement this attestor quotes, the `PAYMENT-REQUIRED`
 * challenge, and the reading of a `PAYMENT-SIGNATURE`. Headers are encoded and decoded with
 * `@x402/core`'s codecs.
 *
 * The requirement speaks one of two dialects (`HANDLE_LOOKUP_TRANSFER_METHOD`). `permit2-exact`,
 * the specs' vocabulary: `extra` names the facilitator's `signerAddress` and `spenderAddress`, a
 * vocabulary `@x402/evm`'s server scheme refuses, so the requirement is built here. `permit2`:
 * the `exact` scheme of `@x402/evm` as its server scheme quotes a Permit2 asset
 * (`extra: { assetTransferMethod: "permit2", name, version }`), the spender being the canonical
 * `x402ExactPermit2Proxy`. Both sign the same Permit2 witness transfer and send it in the same
 * `permit2Authorization`, so one reading serves both. The same `resource` and price serve every
 * platform and handle, so neither the challenge nor any facilitator request names either.
 *
 * Both dialects' clients sign `@x402/evm`'s `permit2WitnessTypes` (`PermitWitnessTransferFrom` with
 * `Witness(address to,uint256 validAfter)`) under Permit2's domain `{ name: "Permit2", chainId,
 * verifyingContract: PERMIT2_ADDRESS }`: the library's client for `permit2`, the devnet's payer and
 * facilitator stand-in (src/devnet/x402.ts) for `permit2-exact`. `payerSigned` recovers that
 * signature here, so that nothing is held, leased or asked for a payer who did not sign.
 */
import {
  decodePaymentSignatureHeader,
  encodePaymentRequiredHeader,
  encodePaymentResponseHeader
} from "@x402/core/http"
import type { PaymentPayload, PaymentRequired, PaymentRequirements, SettleResponse } from "@x402/core/types"
import { PERMIT2_ADDRESS, permit2WitnessTypes, x402ExactPermit2ProxyAddress } from "@x402/evm"
import { Effect, Either } from "effect"
import {
  type Address,
  compactSignatureToSignature,
  getAddress,
  type Hex,
  isAddress,
  parseCompactSignature,
  recoverTypedDataAddress,
  serializeSignature,
  size
} from "viem"
import type { TransferMethod } from "../../../config/attestor.js"
import type { AuthorizationId } from "./PaymentStore.js"

export const X402_VERSION = 2

/** The Permit2 spender of the `permit2` dialect: `@x402/evm`'s canonical exact-Permit2 proxy. */
export const X402_EXACT_PERMIT2_PROXY: Address = getAddress(x402ExactPermit2ProxyAddress)

/** The Permit2 contract whose EIP-712 domain every payment is signed under (both dialects). */
export const CANONICAL_PERMIT2: Address = getAddress(PERMIT2_ADDRESS)

/** What a lookup costs and who is paid, and the dialect's terms (see the module header). */
export type LookupPrice = LookupPriceBase &
  (
    | {
        readonly transferMethod?: "permit2-exact"
        /** The facilitator's signer and spender, from its `/supported`. */
        readonly signerAddress: Address
        readonly spenderAddress: Address
      }
    | { readonly transferMethod: "permit2" }
  )

interface LookupPriceBase {
  readonly chainId: number
  /** The token paid in and its EIP-712 name and version (for the client's permit). */
  readonly asset: Address
  readonly assetName: string
  readonly assetVersion: string
  /** Atomic units. */
  readonly amount: bigint
  readonly payTo: Address
  readonly maxTimeoutSeconds: number
}

/** The one payment option this attestor quotes. */
export const lookupRequirements = (price: LookupPrice): PaymentRequirements => ({
  scheme: "exact",
  network: `eip155:${price.chainId}`,
  asset: price.asset,
  amount: price.amount.toString(),
  payTo: price.payTo,
  maxTimeoutSeconds: price.maxTimeoutSeconds,
  extra:
    price.transferMethod === "permit2"
      ? { assetTransferMethod: "permit2", name: price.assetName, version: price.assetVersion }
      : {
          assetTransferMethod: "permit2-exact",
          name: price.assetName,
          version: price.assetVersion,
          signerAddress: price.signerAddress,
          spenderAddress: price.spenderAddress
        }
})

/** The dialect of a requirement this attestor quoted. */
export const transferMethodOf = (quoted: PaymentRequirements): TransferMethod =>
  quoted.extra?.assetTransferMethod === "permit2" ? "permit2" : "permit2-exact"

/** The Permit2 spender a payment of `quoted` must name: the facilitator's, or the canonical proxy. */
export const quotedSpender = (quoted: PaymentRequirements): unknown =>
  transferMethodOf(quoted) === "permit2" ? X402_EXACT_PERMIT2_PROXY : quoted.extra?.spenderAddress

/** The constant resource every challenge names: never the handle or the platform. */
export const lookupResource = (publicUrl: string) => ({
  url: `${publicUrl}/v1/commitment`,
  description: "A handle lookup: the immutable numeric user id behind a platform handle",
  mimeType: "application/json"
})

/** x402's `payment-identifier` extension (its specs/extensions): a client-chosen id for a payment. */
export const PAYMENT_IDENTIFIER = "payment-identifier"
const PAYMENT_ID = /^[A-Za-z0-9_-]{16,128}$/

/** The extension as a challenge offers it: optional, `info.id` of 16 to 128 letters, digits, `-` and `_`. */
export const paymentIdentifierOffer = {
  info: { required: false },
  schema: {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    type: "object",
    properties: {
      required: { type: "boolean" },
      id: { type: "string", minLength: 16, maxLength: 128, pattern: "^[a-zA-Z0-9_-]+$" }
    },
    required: ["required"]
  }
}

/** The `PAYMENT-REQUIRED` header of a 402. */
export const paymentRequiredHeader = (requirements: PaymentRequirements, publicUrl: string): string => {
  const challenge: PaymentRequired = {
    x402Version: X402_VERSION,
    resource: lookupResource(publicUrl),
    accepts: [requirements],
    extensions: { [PAYMENT_IDENTIFIER]: paymentIdentifierOffer }
  }
  return encodePaymentRequiredHeader(challenge)
}

/** The `PAYMENT-RESPONSE` header of a settled lookup. */
export const paymentResponseHeader = (settled: SettleResponse): string => encodePaymentResponseHeader(settled)

/**
 * Why a `PAYMENT-SIGNATURE` is refused before anyone is asked about it: unreadable, another x402
 * version, other requirements than the quote, an authorization for another token, amount, spender
 * or recipient than the quote's, one that stays settleable longer than the quote allows, one whose
 * deadline has passed, or one its payer (`from`) did not sign.
 */
export type PaymentRefusal =
  | "malformed"
  | "version"
  | "requirements"
  | "authorization"
  | "deadline"
  | "expired"
  | "signature"
  | "payment_id"

export interface PresentedPayment {
  /** What the facilitator is given: the signature and the Permit2 authorization, nothing else. */
  readonly signed: { readonly signature: Hex; readonly permit2Authorization: Record<string, unknown> }
  readonly authorization: AuthorizationId
  /** The authorization's Permit2 deadline and witness `validAfter` (unix seconds). */
  readonly deadline: bigint
  readonly validAfter: bigint
  /** Its deadline has passed: only the replay of a kept answer takes it (paidLookup.ts). */
  readonly expired: boolean
  /** The payer's `payment-identifier` id, when it chose one. */
  readonly paymentId: string | undefined
}

const canonical = (value: unknown): string =>
  JSON.stringify(value, (_, v) =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(
          Object.entries(v as Record<string, unknown>).sort(([a], [b]) => a.localeCompare(b))
        )
      : typeof v === "string" && isAddress(v)
        ? v.toLowerCase()
        : v
  )

/** Whether the client accepted exactly the quoted requirements (addresses compared case-blind). */
export const sameRequirements = (presented: PaymentRequirements, quoted: PaymentRequirements): boolean =>
  canonical(presented) === canonical(quoted)

const field = (value: unknown, key: string): unknown =>
  typeof value === "object" && value !== null ? (value as Record<string, unknown>)[key] : undefined

/** A uint256 as the Permit2 authorization carries it: a decimal string. */
const UINT = /^(?:0|[1-9][0-9]{0,77})$/

const uint = (value: unknown): bigint | undefined =>
  typeof value === "string" && UINT.test(value) ? BigInt(value) : undefined

const address = (value: unknown): string | undefined =>
  typeof value === "string" && isAddress(value) ? value.toLowerCase() : undefined

const sameAddress = (value: string, quoted: unknown): boolean =>
  typeof quoted === "string" && value === quoted.toLowerCase()

/**
 * How far a payer's clock may run ahead of the attestor's: stock clients sign a deadline of their
 * own now + `maxTimeoutSeconds` exactly, so without it an honest payer a second ahead would be
 * refused whenever a second boundary falls between signing and reading (docs/protocol.md §10).
 */
export const PAYMENT_CLOCK_SKEW_SECONDS = 30

/**
 * Whether the signed Permit2 authorization pays exactly what the quote asks (`permitted.token` the
 * asset, `permitted.amount` the amount, `spender` the dialect's spender, `witness.to` the
 * payee), and expires no later than `maxTimeoutSeconds` (and the clock skew allowed) from `now`
 * (unix seconds), so that an authorization refused or not settled here cannot be settled long after,
 * and has not expired already.
 */
const checkAuthorization = (
  authorization: unknown,
  quoted: PaymentRequirements,
  now: number
): Either.Either<
  { readonly deadline: bigint; readonly validAfter: bigint; readonly expired: boolean },
  PaymentRefusal
> => {
  const permitted = field(authorization, "permitted")
  const token = address(field(permitted, "token"))
  const amount = uint(field(permitted, "amount"))
  const spender = address(field(authorization, "spender"))
  const to = address(field(field(authorization, "witness"), "to"))
  const validAfter = uint(field(field(authorization, "witness"), "validAfter"))
  const deadline = uint(field(authorization, "deadline"))
  if (
    token === undefined ||
    amount === undefined ||
    spender === undefined ||
    to === undefined ||
    validAfter === undefined ||
    deadline === undefined
  )
    return Either.left("malformed")
  if (
    !sameAddress(token, quoted.asset) ||
    amount !== BigInt(quoted.amount) ||
    !sameAddress(spender, quotedSpender(quoted)) ||
    !sameAddress(to, quoted.payTo)
  )
    return Either.left("authorization")
  if (deadline > BigInt(now + quoted.maxTimeoutSeconds + PAYMENT_CLOCK_SKEW_SECONDS))
    return Either.left("deadline")
  // Permit2 refuses it too; refusing it (but for a replay) is also what lets its record be pruned
  // (PaymentStore).
  return Either.right({ deadline, validAfter, expired: deadline < BigInt(now) })
}

/**
 * Reads a `PAYMENT-SIGNATURE`: version 2, the quoted requirements exactly, and a Permit2
 * authorization that pays what the quote asks within its time (`checkAuthorization`), whose payer
 * and nonce identify it, and its `payment-identifier` id if any (docs/protocol.md §10). `now` is
 * unix seconds; a passed deadline is `expired` (the caller refuses it unless it replays an answer).
 */
export const readPaymentSignature = (
  header: string,
  quoted: PaymentRequirements,
  now: number
): Either.Either<PresentedPayment, PaymentRefusal> => {
  let payload: PaymentPayload
  try {
    payload = decodePaymentSignatureHeader(header)
  } catch {
    return Either.left("malformed")
  }
  if (payload.x402Version !== X402_VERSION) return Either.left("version")
  if (typeof payload.accepted !== "object" || payload.accepted === null) return Either.left("malformed")
  if (!sameRequirements(payload.accepted, quoted)) return Either.left("requirements")
  const authorization = field(payload.payload, "permit2Authorization")
  const signature = field(payload.payload, "signature")
  if (typeof signature !== "string" || !/^0x(?:[0-9a-fA-F]{2})+$/.test(signature))
    return Either.left("malformed")
  if (typeof authorization !== "object" || authorization === null || Array.isArray(authorization))
    return Either.left("malformed")
  const from = field(authorization, "from")
  const nonce = field(authorization, "nonce")
  if (typeof from !== "string" || !isAddress(from)) return Either.left("malformed")
  if (typeof nonce !== "string" || !UINT.test(nonce)) return Either.left("malformed")
  const checked = checkAuthorization(authorization, quoted, now)
  if (Either.isLeft(checked)) return Either.left(checked.left)
  const paymentId = paymentIdOf(payload.extensions)
  if (Either.isLeft(paymentId)) return Either.left(paymentId.left)
  return Either.right({
    signed: { signature: signature as Hex, permit2Authorization: authorization as Record<string, unknown> },
    authorization: { payer: getAddress(from), nonce: BigInt(nonce) },
    deadline: checked.right.deadline,
    validAfter: checked.right.validAfter,
    expired: checked.right.expired,
    paymentId: paymentId.right
  })
}

/**
 * The `payment-identifier` id of a payment's extensions: none when it names none (a stock client
 * echoes the offer without one), refused when it is not 16 to 128 letters, digits, `-` or `_`.
 */
export const paymentIdOf = (extensions: unknown): Either.Either<string | undefined, PaymentRefusal> => {
  const id = field(field(field(extensions, PAYMENT_IDENTIFIER), "info"), "id")
  if (id === undefined) return Either.right(undefined)
  return typeof id === "string" && PAYMENT_ID.test(id) ? Either.right(id) : Either.left("payment_id")
}

/**
 * A signature as viem recovers it: an EIP-2098 compact one (64 bytes, which Permit2 accepts on
 * chain) expanded to `r || s || v`; any other as it is. The facilitator gets the payer's own bytes.
 */
const expanded = (signature: Hex): Hex =>
  size(signature) === 64
    ? serializeSignature(compactSignatureToSignature(parseCompactSignature(signature)))
    : signature

const chainIdOf = (quoted: PaymentRequirements): number => Number(quoted.network.slice("eip155:".length))

/**
 * The signer of a payment's Permit2 witness transfer as the quote's terms make it (the quoted
 * chain, token, amount, spender and payee; the authorization's nonce, deadline and `validAfter`);
 * fails when the signature is not a recoverable ECDSA signature.
 */
export const recoverPayer = (
  presented: PresentedPayment,
  quoted: PaymentRequirements
): Effect.Effect<Address, "signature"> =>
  Effect.tryPromise({
    try: () =>
      recoverTypedDataAddress({
        domain: { name: "Permit2", chainId: chainIdOf(quoted), verifyingContract: CANONICAL_PERMIT2 },
        types: permit2WitnessTypes,
        primaryType: "PermitWitnessTransferFrom",
        message: {
          permitted: { token: getAddress(quoted.asset), amount: BigInt(quoted.amount) },
          spender: getAddress(quotedSpender(quoted) as string),
          nonce: presented.authorization.nonce,
          deadline: presented.deadline,
          witness: { to: getAddress(quoted.payTo), validAfter: presented.validAfter }
        },
        signature: expanded(presented.signed.signature)
      }),
    catch: () => "signature" as const
  })

/**
 * Whether the payer named by the authorization (`from`) signed it (docs/protocol.md §10): its ECDSA
 * signature must recover to `from`. A contract wallet (ERC-1271) cannot pay: its signature is
 * checked by calling it, which no one does for a payment not yet known to be genuine.
 */
export const payerSigned = (
  presented: PresentedPayment,
  quoted: PaymentRequirements
): Effect.Effect<void, PaymentRefusal> =>
  Effect.flatMap(recoverPayer(presented, quoted), (signer) =>
    signer === presented.authorization.payer ? Effect.void : Effect.fail("signature" as const)
  )
