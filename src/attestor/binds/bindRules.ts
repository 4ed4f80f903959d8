/**
 * The rules of `POST /v1/bind` that need nothing but their arguments (docs/attestor.md §4 "POST
 * /v1/escrows and POST /v1/bind", §8): the deadline's bounds and default, which escrows a request
 * signs for and which pending owner a contest rules out, and the attestor key's `BindOwner`
 * signer. The endpoint is `BindSignatures`.
 */
import { type Effect, Either } from "effect"
import type { Address, Hex } from "viem"
import type { Visibility } from "../../../schema/attestor.js"
import { vaultDomain, vaultTypes } from "../../../schema/eip712.js"
import { type Signer, signTypedDataWith } from "../../keys/Signer.js"
import { escrowVisibility, type IndexedEscrow } from "../escrows/userEscrows.js"

// ---------------------------------------------------------------------------------------------
// Deadline
// ---------------------------------------------------------------------------------------------

/** Least headroom of a bind deadline (docs/attestor.md §4, §8). */
export const BIND_DEADLINE_MIN_HEADROOM = 300
/** Grid the default deadline is rounded down to. */
export const BIND_DEADLINE_GRID = 600

/** Whether `deadline` lies in `[now + 300, now + bindDeadlineSeconds + 300]`, both ends included. */
export const deadlineAccepted = (deadline: bigint, now: number, bindDeadlineSeconds: number): boolean =>
  deadline >= BigInt(now + BIND_DEADLINE_MIN_HEADROOM) &&
  deadline <= BigInt(now + bindDeadlineSeconds + BIND_DEADLINE_MIN_HEADROOM)

/** `now + bindDeadlineSeconds` rounded down to the 600 s grid. */
export const defaultDeadline = (now: number, bindDeadlineSeconds: number): bigint =>
  BigInt(Math.floor((now + bindDeadlineSeconds) / BIND_DEADLINE_GRID) * BIND_DEADLINE_GRID)

export const deadlineRefusal = (bindDeadlineSeconds: number) =>
  `deadline must be between now + ${BIND_DEADLINE_MIN_HEADROOM} s and now + ${
    bindDeadlineSeconds + BIND_DEADLINE_MIN_HEADROOM
  } s by this attestor's clock`

// ---------------------------------------------------------------------------------------------
// What a request signs
// ---------------------------------------------------------------------------------------------

export const BOTH_VISIBILITIES =
  "this request would sign both public and private escrows: send visibility to choose one kind"
export const otherVisibilityUsed = (visibility: Visibility) =>
  `this stealth owner was already attested for ${
    visibility === "public" ? "private" : "public"
  } escrows: use a fresh key for ${visibility} ones`

const sameAddress = (a: Address | undefined, b: Address) =>
  a !== undefined && a.toLowerCase() === b.toLowerCase()

/** One escrow to sign for, with what its signature and record need. */
export interface BindCandidate {
  readonly indexed: IndexedEscrow
  readonly bindNonce: bigint
  readonly visibility: Visibility
}

/**
 * The escrows a (non-contest) request signs for: no pending bind, not owned by `stealthOwner`,
 * of the `filter` visibility when given; a refusal message when they mix both kinds.
 */
export const planBinds = (
  escrows: ReadonlyArray<IndexedEscrow>,
  stealthOwner: Address,
  filter: Visibility | undefined,
  visibilityOf: (indexed: IndexedEscrow) => Visibility = escrowVisibility
): Either.Either<ReadonlyArray<BindCandidate>, string> => {
  const candidates: Array<BindCandidate> = []
  for (const indexed of escrows) {
    const account = indexed.account
    if (account?.pendingOwner !== undefined) continue
    if (account?.registration !== undefined && sameAddress(account.owner, stealthOwner)) continue
    const visibility = visibilityOf(indexed)
    if (filter !== undefined && visibility !== filter) continue
    candidates.push({ indexed, bindNonce: account?.bindNonce ?? 0n, visibility })
  }
  const kinds = new Set(candidates.map((c) => c.visibility))
  return kinds.size > 1 ? Either.left(BOTH_VISIBILITIES) : Either.right(candidates)
}

/** The pending owner a contest by `stealthOwner` rules out, if the escrow has one for another key. */
export const contestedPendingOwner = (indexed: IndexedEscrow, stealthOwner: Address): Address | undefined => {
  const pending = indexed.account?.pendingOwner
  return pending !== undefined && !sameAddress(pending, stealthOwner) ? pending : undefined
}

// ---------------------------------------------------------------------------------------------
// The signer
// ---------------------------------------------------------------------------------------------

export interface BindSigner {
  readonly address: Address
  readonly signBindOwner: (
    chainId: number,
    message: { id: Hex; newOwner: Address; bindNonce: bigint; deadline: bigint }
  ) => Effect.Effect<Hex>
}

/** `BindOwner` signatures by the attestor's signer (src/keys/Signer.ts) for `vault`. */
export const bindSigner = (signer: Signer, vault: Address): BindSigner => ({
  address: signer.address,
  signBindOwner: (chainId, message) =>
    signTypedDataWith(signer, {
      domain: vaultDomain(chainId, vault),
      types: { BindOwner: vaultTypes.BindOwner },
      primaryType: "BindOwner",
      message
    })
})
