/**
 * The Accounts projection as a pure fold: vault events (and the chain's nonce corrections) in,
 * one immutable state per account id out. The live projection, a rebuild from scratch and the
 * unit tests all use these same functions, so a rebuilt projection equals the live one.
 *
 * Besides the spec's Account record (docs/relayer.md §2) each state keeps what the attestor needs:
 * the registration (kind, commitment, fallback), the owner and the bind state by id.
 */
import type { Address, Hex } from "viem"
import type { Account } from "../../../schema/relayer.js"
import type { EventPosition, VaultEvent } from "./vaultEvents.js"

const ZERO_ADDRESS = "0x0000000000000000000000000000000000000000" as Address

export interface Registration {
  readonly kind: 1 | 2
  readonly commitment: Hex
  /** The zero address when the account has no fallback. */
  readonly fallbackRecipient: Address
  /** 0 when the account has no fallback. */
  readonly fallbackDelay: bigint
  readonly blockNumber: number
}

export interface AccountState {
  readonly id: Hex
  /** Absent until `Registered`: deposits may arrive for an id before it is registered. */
  readonly registration: Registration | undefined
  /** The zero address for a handle account no bind has finalized yet. */
  readonly owner: Address
  readonly pendingOwner: Address | undefined
  readonly pendingReadyAt: bigint | undefined
  /**
   * Block of the pending bind's `BindProposed`: the veto watcher counts only attestations made
   * before it was mined. Absent (most accounts never have a proposal) or undefined when none.
   */
  readonly pendingBlock?: number | undefined
  /** Non-zero balances by asset. */
  readonly balances: Readonly<Record<Address, bigint>>
  readonly totalDeposited: Readonly<Record<Address, bigint>>
  /** Block of the last owner activity (registration, claim, consolidate, templates, rotation, ping, bind finalization). */
  readonly lastActivityBlock: number
  /** Unused shield templates, as `shieldTemplateCount(id)`. */
  readonly shieldTemplates: number
  readonly nonce: bigint
  readonly bindNonce: bigint
  /** Block of the last veto: the fallback sweep stays closed for two bind delays after it. */
  readonly lastVetoBlock: number | undefined
}

/** The chain's `nonces(id)` and `bindNonces(id)` at the end of a block, where they disagreed with the events. */
export interface NonceReconciled extends EventPosition {
  readonly name: "NonceReconciled"
  readonly id: Hex
  readonly nonce: bigint
  readonly bindNonce: bigint
}

export type ProjectionInput = VaultEvent | NonceReconciled

export interface AccountsContext {
  /** `ShieldedFromTemplate` debits it and `Consolidated` credits it. */
  readonly settlementAsset: Address
}

/**
 * The amounts of an account that has none. Shared by every such account (most of them, at a
 * large count) instead of two empty objects each; `adjust` never changes amounts in place.
 */
const NO_AMOUNTS: Readonly<Record<Address, bigint>> = Object.freeze({})

export const emptyAccount = (id: Hex): AccountState => ({
  id,
  registration: undefined,
  owner: ZERO_ADDRESS,
  pendingOwner: undefined,
  pendingReadyAt: undefined,
  balances: NO_AMOUNTS,
  totalDeposited: NO_AMOUNTS,
  lastActivityBlock: 0,
  shieldTemplates: 0,
  nonce: 0n,
  bindNonce: 0n,
  lastVetoBlock: undefined
})

const adjust = (
  amounts: Readonly<Record<Address, bigint>>,
  asset: Address,
  delta: bigint
): Readonly<Record<Address, bigint>> => {
  // The vault never lets a balance go negative; below zero would mean a missed event, and a
  // negative amount is no uint256, so it stops at zero.
  const value = (amounts[asset] ?? 0n) + delta
  if (value > 0n) return { ...amounts, [asset]: value }
  if (!Object.hasOwn(amounts, asset)) return amounts
  // Copied without the asset rather than with `delete`, which would leave a slower, larger object.
  const next: Record<Address, bigint> = {}
  let any = false
  for (const key of Object.keys(amounts) as Array<Address>)
    if (key !== asset) {
      next[key] = amounts[key] as bigint
      any = true
    }
  return any ? next : NO_AMOUNTS
}

/** The account after one input. Inputs for other ids are the caller's mistake and change nothing. */
export const applyToAccount = (
  context: AccountsContext,
  current: AccountState | undefined,
  input: ProjectionInput
): AccountState => {
  const a = current ?? emptyAccount(input.id)
  if (a.id !== input.id) return a
  const active = { lastActivityBlock: input.blockNumber }
  switch (input.name) {
    case "Deposited":
      return {
        ...a,
        balances: adjust(a.balances, input.asset, input.amount),
        totalDeposited: adjust(a.totalDeposited, input.asset, input.amount)
      }
    case "Registered":
      return {
        ...a,
        ...active,
        registration: {
          kind: input.kind,
          commitment: input.commitment,
          // Most accounts have no fallback: they share the one zero address and zero delay
          // instead of each keeping the copies its decoded event carried.
          fallbackRecipient:
            input.fallbackRecipient === ZERO_ADDRESS ? ZERO_ADDRESS : input.fallbackRecipient,
          fallbackDelay: input.fallbackDelay === 0n ? 0n : input.fallbackDelay,
          blockNumber: input.blockNumber
        },
        owner: input.owner
      }
    case "Claimed":
      return {
        ...a,
        ...active,
        balances: adjust(a.balances, input.asset, -input.amount),
        nonce: input.nonce + 1n
      }
    case "Consolidated":
      return {
        ...a,
        ...active,
        balances: adjust(
          adjust(a.balances, input.assetIn, -input.amountIn),
          context.settlementAsset,
          input.amountOut
        ),
        nonce: input.nonce + 1n
      }
    case "ShieldTemplatesRegistered":
      return { ...a, ...active, shieldTemplates: Number(input.count), nonce: input.nonce + 1n }
    case "ShieldTemplatesCleared":
      // The vault clears every unused template at once and reports how many there were.
      return { ...a, shieldTemplates: 0 }
    case "ShieldedFromTemplate":
      // A template shield emits no `Claimed`; this is the only trace of the debit.
      return {
        ...a,
        shieldTemplates: Math.max(0, a.shieldTemplates - 1),
        balances: adjust(a.balances, context.settlementAsset, -input.amount)
      }
    case "OwnerRotated":
      return { ...a, ...active, owner: input.newOwner, nonce: input.nonce + 1n }
    case "Pinged":
      return { ...a, ...active, nonce: input.nonce + 1n }
    case "BindProposed":
      return {
        ...a,
        pendingOwner: input.newOwner,
        pendingReadyAt: input.readyAt,
        pendingBlock: input.blockNumber,
        bindNonce: input.bindNonce + 1n
      }
    case "BindFinalized":
      return {
        ...a,
        ...active,
        owner: input.newOwner,
        pendingOwner: undefined,
        pendingReadyAt: undefined,
        pendingBlock: undefined
      }
    case "BindCancelled":
      // An owner's cancel consumes the bind nonce (it signed `CancelBind` with it); a veto does not.
      return input.vetoed
        ? {
            ...a,
            pendingOwner: undefined,
            pendingReadyAt: undefined,
            pendingBlock: undefined,
            lastVetoBlock: input.blockNumber
          }
        : {
            ...a,
            pendingOwner: undefined,
            pendingReadyAt: undefined,
            pendingBlock: undefined,
            bindNonce: a.bindNonce + 1n
          }
    case "SweptToFallback":
      return { ...a, balances: adjust(a.balances, input.asset, -input.amount) }
    case "NonceReconciled":
      return { ...a, nonce: input.nonce, bindNonce: input.bindNonce }
  }
}

/**
 * Whether an event consumes a nonce or bind nonce (docs/protocol.md §4): the events after which the
 * counted nonces are checked against the chain.
 */
export const consumesNonce = (event: VaultEvent): boolean => {
  switch (event.name) {
    case "Claimed":
    case "Consolidated":
    case "ShieldTemplatesRegistered":
    case "OwnerRotated":
    case "Pinged":
    case "BindProposed":
      return true
    case "BindCancelled":
      return !event.vetoed
    default:
      return false
  }
}

/**
 * Folds inputs in chain order over `initial` (empty by default) into a new map; `initial` is not
 * touched. A nonce correction for an id the events never mentioned creates nothing.
 */
export const foldAccounts = (
  context: AccountsContext,
  inputs: Iterable<ProjectionInput>,
  initial: ReadonlyMap<Hex, AccountState> = new Map()
): ReadonlyMap<Hex, AccountState> => {
  const accounts = new Map(initial)
  for (const input of inputs) {
    const current = accounts.get(input.id)
    if (current === undefined && input.name === "NonceReconciled") continue
    accounts.set(input.id, applyToAccount(context, current, input))
  }
  return accounts
}

const sortedAmounts = (amounts: Readonly<Record<Address, bigint>>): Record<Address, bigint> => {
  const out: Record<Address, bigint> = {}
  for (const asset of (Object.keys(amounts) as Address[]).sort()) out[asset] = amounts[asset] as bigint
  return out
}

/**
 * The Account record of docs/relayer.md of a registered account (undefined before registration). Assets are
 * listed in address order and zero balances are left out, so equal states give equal records.
 */
export const accountRecord = (a: AccountState): Account | undefined => {
  const r = a.registration
  if (r === undefined) return undefined
  const hasFallback = r.fallbackRecipient !== ZERO_ADDRESS
  return {
    id: a.id as Account["id"],
    kind: r.kind,
    owner: a.owner as Account["owner"],
    fallbackRecipient: hasFallback ? (r.fallbackRecipient as Account["owner"]) : null,
    fallbackDelay: hasFallback ? r.fallbackDelay : null,
    pendingOwner: a.pendingOwner === undefined ? null : (a.pendingOwner as Account["owner"]),
    pendingReadyAt: a.pendingOwner === undefined ? null : (a.pendingReadyAt ?? 0n),
    balances: sortedAmounts(a.balances) as Account["balances"],
    totalDeposited: sortedAmounts(a.totalDeposited) as Account["totalDeposited"],
    lastActivityBlock: a.lastActivityBlock,
    shieldTemplates: a.shieldTemplates,
    nonce: a.nonce,
    bindNonce: a.bindNonce
  }
}

const amountsJson = (amounts: Readonly<Record<Address, bigint>>): string => {
  const assets = (Object.keys(amounts) as Address[]).sort()
  let out = "{"
  for (let i = 0; i < assets.length; i++) {
    const asset = assets[i] as Address
    out += `${i === 0 ? "" : ","}"${asset}":"${(amounts[asset] as bigint).toString()}"`
  }
  return `${out}}`
}

/**
 * The JSON text of `accountRecord(a)` as the wire carries it (the `Account` schema's encoded
 * form), written directly: the response for every account is built from these fragments, and
 * the values are already canonical (checksummed addresses, lowercase hex, decimal strings).
 */
export const accountJson = (a: AccountState): string | undefined => {
  const r = a.registration
  if (r === undefined) return undefined
  const hasFallback = r.fallbackRecipient !== ZERO_ADDRESS
  const pending = a.pendingOwner !== undefined
  return (
    `{"id":"${a.id}","kind":${r.kind},"owner":"${a.owner}",` +
    `"fallbackRecipient":${hasFallback ? `"${r.fallbackRecipient}"` : "null"},` +
    `"fallbackDelay":${hasFallback ? `"${r.fallbackDelay.toString()}"` : "null"},` +
    `"pendingOwner":${pending ? `"${a.pendingOwner}"` : "null"},` +
    `"pendingReadyAt":${pending ? `"${(a.pendingReadyAt ?? 0n).toString()}"` : "null"},` +
    `"balances":${amountsJson(a.balances)},"totalDeposited":${amountsJson(a.totalDeposited)},` +
    `"lastActivityBlock":${a.lastActivityBlock},"shieldTemplates":${a.shieldTemplates},` +
    `"nonce":"${a.nonce.toString()}","bindNonce":"${a.bindNonce.toString()}"}`
  )
}
