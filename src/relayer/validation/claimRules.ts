/**
 * The stateless rules a claim must pass before the relayer looks at the chain (docs/relayer.md §4
 * rule 1 and "Full-balance claims"; docs/protocol.md §5): each refuses with its docs/protocol.md §7 code and a
 * message naming the field. Fee-only claims of the owner-action endpoints reuse them.
 */
import { Effect } from "effect"
import { type Address, getAddress, type Hex, keccak256, pad } from "viem"
import {
  AdapterNotAllowed,
  BadRequest,
  DataHashMismatch,
  DeadlineTooSoon,
  InvalidAmount,
  RelayerMismatch
} from "../../../schema/errors.js"
import {
  computeId,
  FULL,
  isQuotedForm,
  MAX_NOTE_VALUE,
  ownerCommitment,
  SHIELD_PAYLOAD_BYTES,
  ZERO_ADDRESS
} from "../../../schema/ids.js"
import type { Claim, ConsolidateStep, Registration } from "../../../schema/relayer.js"

/** `deadline - now >= minSeconds`, so the transaction has time to be mined. */
export const checkDeadline = (
  deadline: bigint,
  nowSeconds: number,
  minSeconds: number,
  field: string
): Effect.Effect<void, DeadlineTooSoon> =>
  deadline - BigInt(nowSeconds) >= BigInt(minSeconds)
    ? Effect.void
    : Effect.fail(new DeadlineTooSoon({ message: `${field} must be at least ${minSeconds} s in the future` }))

/** `relayer` is this relayer, or the zero address (anyone may submit) where that is allowed. */
export const checkRelayer = (
  relayer: Address,
  self: Address,
  options: { readonly allowAnyone: boolean; readonly field: string }
): Effect.Effect<void, RelayerMismatch> =>
  relayer === self || (options.allowAnyone && relayer === ZERO_ADDRESS)
    ? Effect.void
    : Effect.fail(
        new RelayerMismatch({
          message: options.allowAnyone
            ? `${options.field} must be this relayer (${self}) or the zero address`
            : `${options.field} must be this relayer (${self})`
        })
      )

/** `0 < amount` and `relayerFee <= amount` (`FULL` is the whole balance, so any fee fits it here). */
export const checkAmounts = (claim: Claim): Effect.Effect<void, InvalidAmount> => {
  if (claim.amount === 0n)
    return Effect.fail(new InvalidAmount({ message: "claim.amount must be above zero" }))
  if (claim.relayerFee > claim.amount)
    return Effect.fail(new InvalidAmount({ message: "claim.relayerFee must not exceed claim.amount" }))
  return Effect.void
}

export const checkDataHash = (claim: Claim, adapterData: Hex): Effect.Effect<void, DataHashMismatch> =>
  keccak256(adapterData) === claim.dataHash
    ? Effect.void
    : Effect.fail(new DataHashMismatch({ message: "keccak256(adapterData) does not equal claim.dataHash" }))

export interface AdapterRules {
  readonly settlementAsset: Address
  readonly shieldAdapter: Address
}

/** Where a claim's net amount goes. */
export type Payout =
  | { readonly _tag: "Direct"; readonly recipient: Address }
  /** A fee-only claim: `amount == relayerFee`, nothing else moves. */
  | { readonly _tag: "FeeOnly" }
  | { readonly _tag: "Shield" }

const WORD = 64
const wordAt = (data: Hex, index: number): string => data.slice(2 + index * WORD, 2 + (index + 1) * WORD)
const ZERO_WORD = "0".repeat(WORD)

/**
 * Whether `payload` is the canonical shield payload of docs/protocol.md §5 for account `id`: the ten
 * words of `abi.encode(bytes32 id, ShieldRequest)` with token type 0, the settlement asset, sub id
 * 0 and `0 < value < 2^120`, compared word for word as the vault does.
 */
export const isCanonicalShieldPayload = (payload: Hex, id: Hex, settlementAsset: Address): boolean => {
  if (payload.length !== 2 + SHIELD_PAYLOAD_BYTES * 2) return false
  const data = payload.toLowerCase() as Hex
  const value = BigInt(`0x${wordAt(data, 5)}`)
  return (
    wordAt(data, 0) === id.slice(2).toLowerCase() &&
    wordAt(data, 2) === ZERO_WORD &&
    wordAt(data, 3) === pad(settlementAsset.toLowerCase() as Hex).slice(2) &&
    wordAt(data, 4) === ZERO_WORD &&
    value > 0n &&
    value <= MAX_NOTE_VALUE
  )
}

/**
 * The adapter and its data: the zero address (direct) with `abi.encode(address recipient)`, or no
 * data for a fee-only claim; or the shield adapter, for the settlement asset only, with the
 * canonical shield payload of this account. Anything else is `adapter_not_allowed`.
 */
export const checkAdapter = (
  rules: AdapterRules,
  claim: Claim,
  adapterData: Hex
): Effect.Effect<Payout, AdapterNotAllowed> => {
  const refuse = (message: string) => Effect.fail(new AdapterNotAllowed({ message }))
  if (claim.adapter === ZERO_ADDRESS) {
    if (adapterData === "0x")
      return claim.amount === claim.relayerFee && claim.amount !== FULL
        ? Effect.succeed({ _tag: "FeeOnly" })
        : refuse("the direct adapter needs adapterData = abi.encode(address recipient)")
    if (claim.amount === claim.relayerFee)
      return refuse(
        "a fee-only claim (amount == relayerFee) carries empty adapterData: nothing goes to a recipient"
      )
    const word = adapterData.length === 2 + WORD ? wordAt(adapterData, 0) : ""
    if (!/^0{24}[0-9a-f]{40}$/.test(word) || /^0+$/.test(word))
      return refuse(
        "the direct adapter needs adapterData = abi.encode(address recipient), a non-zero address"
      )
    return Effect.succeed({ _tag: "Direct", recipient: getAddress(`0x${word.slice(24)}`) })
  }
  if (claim.adapter !== rules.shieldAdapter)
    return refuse("claim.adapter must be the zero address (direct) or the shield adapter")
  if (claim.asset !== rules.settlementAsset)
    return refuse("the shield adapter takes the settlement asset only")
  if (!isCanonicalShieldPayload(adapterData, claim.beneficiaryId, rules.settlementAsset))
    return refuse(
      "the shield adapter needs adapterData = the canonical 320-byte shield payload of this account and the settlement asset"
    )
  return Effect.succeed({ _tag: "Shield" })
}

/** The id a registration payload registers. */
export const registrationId = (registration: Registration): Hex =>
  registration.kind === 1
    ? computeId(
        1,
        ownerCommitment(registration.owner, registration.salt),
        registration.fallbackRecipient,
        registration.fallbackDelay
      )
    : computeId(2, registration.handleCommitment, registration.fallbackRecipient, registration.fallbackDelay)

export const checkRegistration = (id: Hex, registration: Registration): Effect.Effect<void, BadRequest> =>
  registrationId(registration) === id.toLowerCase()
    ? Effect.void
    : Effect.fail(new BadRequest({ message: "register does not describe the account of this request's id" }))

export interface ConsolidateRules {
  readonly settlementAsset: Address
  /** False for a superseded vault that reads `QUOTED | q` as a literal amount. */
  readonly quotedFullBalance: boolean
}

/** A consolidation step on its face: what it swaps, its amounts, and the claim it feeds. */
export const checkConsolidateStep = (
  rules: ConsolidateRules,
  step: ConsolidateStep,
  claimAsset: Address | undefined
): Effect.Effect<void, InvalidAmount | BadRequest> => {
  if (step.assetIn === rules.settlementAsset || step.assetIn === ZERO_ADDRESS)
    return Effect.fail(
      new BadRequest({ message: "consolidate.assetIn must be a token other than the settlement asset" })
    )
  if (step.amountIn === 0n)
    return Effect.fail(new InvalidAmount({ message: "consolidate.amountIn must be above zero" }))
  if (step.minOut === 0n)
    return Effect.fail(new InvalidAmount({ message: "consolidate.minOut must be above zero" }))
  if (isQuotedForm(step.amountIn) && !rules.quotedFullBalance)
    return Effect.fail(
      new InvalidAmount({
        message:
          "this vault deployment does not support the quoted full-balance form; use 2^256 - 1 or an exact amount"
      })
    )
  if (claimAsset !== undefined && claimAsset !== rules.settlementAsset)
    return Effect.fail(
      new InvalidAmount({ message: "a claim with a consolidation step must claim the settlement asset" })
    )
  return Effect.void
}

/**
 * After consolidating, the settlement balance is at least `existing + minOut`: a fixed amount must
 * fit in it, and a `FULL` claim's fixed fee must.
 */
export const checkAgainstConsolidated = (
  claim: Claim,
  step: ConsolidateStep,
  existing: bigint
): Effect.Effect<void, InvalidAmount> => {
  const available = existing + step.minOut
  if (claim.amount === FULL)
    return claim.relayerFee <= available
      ? Effect.void
      : Effect.fail(
          new InvalidAmount({
            message: "claim.relayerFee exceeds the settlement balance after consolidation (existing + minOut)"
          })
        )
  return claim.amount <= available
    ? Effect.void
    : Effect.fail(
        new InvalidAmount({
          message: "claim.amount exceeds the settlement balance after consolidation (existing + minOut)"
        })
      )
}

const BPS = 10_000n

/** The least fee accepted against a quote: the quoted fee minus `QUOTE_TOLERANCE_BPS` of it. */
export const minimumFee = (quoted: bigint, toleranceBps: number): bigint =>
  quoted - (quoted * BigInt(toleranceBps)) / BPS
