/**
 * The hint projection of an attestor: a fold over canonical `TokenLaunched` events into an index
 * of the escrows it can attest, by `(platformId, userId)` (docs/attestor.md §4, "The attestor
 * matches the session's (platformId, userId) against its hint index").
 *
 * Opening a hint is a pure function of the attestor's hint key and the event (docs/protocol.md §6), so
 * the fold takes it as a parameter: the live index, a rebuild from scratch and the unit tests
 * apply the same events through the same function and end up equal.
 *
 * An escrow is a beneficiary id with the hint that opened it; its launches are every canonical
 * `TokenLaunched` naming that id, in chain order, including launches whose own hint was not
 * addressed to this attestor (the id alone says they pay into the same account).
 *
 * Every applied launch is kept in chain order, so a reorg takes launches back exactly, from the
 * newest down, without an undo journal and to any depth.
 */
import { Either } from "effect"
import type { Address, Hex } from "viem"
import { type EventPosition, MalformedEvent, type StoredEventLike } from "./vaultEvents.js"

/** What a hint addressed to this attestor says, checked against the id it was launched to. */
export interface EscrowHint {
  readonly platformId: number
  /** Canonical decimal string. */
  readonly userId: string
  readonly nonce: Hex
  readonly attestorSalt: Hex
  readonly handleCommitment: Hex
  /** Absent when the account has no fallback (recipient 0x0, delay 0). */
  readonly fallback: { readonly recipient: Address; readonly delay: bigint } | undefined
}

/** A decoded `TokenLaunched(address indexed token, bytes32 indexed beneficiaryId, bytes beneficiaryHint)`. */
export interface TokenLaunched extends EventPosition {
  readonly name: "TokenLaunched"
  readonly txHash: Hex
  readonly token: Address
  readonly beneficiaryId: Hex
  readonly beneficiaryHint: Hex
}

export interface Launch extends EventPosition {
  readonly txHash: Hex
  readonly token: Address
}

export interface Escrow {
  readonly beneficiaryId: Hex
  readonly hint: EscrowHint
  /** Every canonical launch to the id, in chain order; never empty. */
  readonly launches: ReadonlyArray<Launch>
}

/** The hint of a launch when it is addressed to this attestor and commits to the launch's id. */
export type OpenLaunch = (launch: TokenLaunched) => EscrowHint | undefined

const ADDRESS = /^0x[0-9a-fA-F]{40}$/
const BYTES32 = /^0x[0-9a-f]{64}$/
const BYTES = /^0x(?:[0-9a-f]{2})*$/
const HASH = /^0x[0-9a-fA-F]{64}$/

/**
 * The typed form of a stored event: `Right(undefined)` for any other event, `Left` when a stored
 * `TokenLaunched` does not have the shape the indexer writes.
 */
export const decodeTokenLaunched = (
  e: StoredEventLike & { readonly txHash: string }
): Either.Either<TokenLaunched | undefined, MalformedEvent> => {
  if (e.eventName !== "TokenLaunched") return Either.right(undefined)
  const malformed = (field: string) =>
    Either.left(
      new MalformedEvent({ eventName: e.eventName, field, blockNumber: e.blockNumber, logIndex: e.logIndex })
    )
  const { token, beneficiaryId, beneficiaryHint } = e.args
  if (typeof token !== "string" || !ADDRESS.test(token)) return malformed("token")
  if (typeof beneficiaryId !== "string" || !BYTES32.test(beneficiaryId)) return malformed("beneficiaryId")
  if (typeof beneficiaryHint !== "string" || !BYTES.test(beneficiaryHint)) return malformed("beneficiaryHint")
  if (!HASH.test(e.txHash)) return malformed("txHash")
  return Either.right({
    name: "TokenLaunched",
    blockNumber: e.blockNumber,
    blockHash: e.blockHash,
    logIndex: e.logIndex,
    txHash: e.txHash as Hex,
    token: token as Address,
    beneficiaryId: beneficiaryId as Hex,
    beneficiaryHint: beneficiaryHint as Hex
  })
}

/** The index key of a platform user. */
export const userKey = (platformId: number, userId: string): string => `${platformId}:${userId}`

interface Applied {
  readonly launch: Launch
  readonly beneficiaryId: Hex
  readonly opened: boolean
}

interface IdState {
  readonly launches: Array<Launch>
  hint: EscrowHint | undefined
  /** Applied launches to the id whose own hint opened. */
  openings: number
}

const before = (a: EventPosition, b: EventPosition): boolean =>
  a.blockNumber < b.blockNumber || (a.blockNumber === b.blockNumber && a.logIndex < b.logIndex)

let nextEpoch = 0

/**
 * The index, built by applying launches in chain order. Launches must come in chain order and
 * only once each: the caller (the follower, or `foldHints`) reads them from the store that way.
 */
export class HintProjection {
  /** Tells projections apart: versions compare only within one projection. */
  readonly epoch = ++nextEpoch
  private readonly applied: Array<Applied> = []
  private readonly ids = new Map<Hex, IdState>()
  private readonly users = new Map<string, Set<Hex>>()
  private changes = 0

  /** Changes whenever the index changes. */
  get version(): number {
    return this.changes
  }

  /** Launches applied so far, on every id. */
  get launchCount(): number {
    return this.applied.length
  }

  /** Block of the last applied launch. */
  get lastBlock(): number | undefined {
    return this.applied[this.applied.length - 1]?.launch.blockNumber
  }

  apply(event: TokenLaunched, hint: EscrowHint | undefined): void {
    const last = this.applied[this.applied.length - 1]
    if (last !== undefined && !before(last.launch, event))
      throw new Error("HintProjection.apply: launches must come in chain order")
    const launch: Launch = {
      blockNumber: event.blockNumber,
      blockHash: event.blockHash,
      logIndex: event.logIndex,
      txHash: event.txHash,
      token: event.token
    }
    let state = this.ids.get(event.beneficiaryId)
    if (state === undefined) {
      state = { launches: [], hint: undefined, openings: 0 }
      this.ids.set(event.beneficiaryId, state)
    }
    state.launches.push(launch)
    if (hint !== undefined) {
      state.openings++
      // Every hint that commits to an id says the same thing (the id hashes all of it), so the
      // first one stands for all.
      if (state.hint === undefined) {
        state.hint = hint
        const key = userKey(hint.platformId, hint.userId)
        let ids = this.users.get(key)
        if (ids === undefined) {
          ids = new Set()
          this.users.set(key, ids)
        }
        ids.add(event.beneficiaryId)
      }
    }
    this.applied.push({ launch, beneficiaryId: event.beneficiaryId, opened: hint !== undefined })
    this.changes++
  }

  /** Takes back every launch of blocks above `block`, newest first. */
  rewind(block: number): void {
    while (this.applied.length > 0) {
      const last = this.applied[this.applied.length - 1] as Applied
      if (last.launch.blockNumber <= block) break
      this.applied.pop()
      const state = this.ids.get(last.beneficiaryId) as IdState
      state.launches.pop()
      if (last.opened) state.openings--
      if (state.openings === 0 && state.hint !== undefined) {
        const key = userKey(state.hint.platformId, state.hint.userId)
        const ids = this.users.get(key)
        ids?.delete(last.beneficiaryId)
        if (ids?.size === 0) this.users.delete(key)
        state.hint = undefined
      }
      if (state.launches.length === 0) this.ids.delete(last.beneficiaryId)
      this.changes++
    }
  }

  /** Back to no launches at all. */
  reset(): void {
    if (this.applied.length === 0) return
    this.applied.length = 0
    this.ids.clear()
    this.users.clear()
    this.changes++
  }

  private escrowOf(beneficiaryId: Hex): Escrow | undefined {
    const state = this.ids.get(beneficiaryId)
    if (state?.hint === undefined) return undefined
    return { beneficiaryId, hint: state.hint, launches: [...state.launches] }
  }

  /** The escrow of one id, when a hint addressed to this attestor opened it. */
  escrow(beneficiaryId: Hex): Escrow | undefined {
    return this.escrowOf(beneficiaryId.toLowerCase() as Hex)
  }

  /** The escrows of one platform user, in the order of their first launch. */
  escrowsOf(platformId: number, userId: string): ReadonlyArray<Escrow> {
    const ids = this.users.get(userKey(platformId, userId))
    if (ids === undefined) return []
    return sortEscrows([...ids].map((id) => this.escrowOf(id) as Escrow))
  }

  /** Every escrow, in the order of their first launch: two projections of the same events give equal lists. */
  escrows(): ReadonlyArray<Escrow> {
    const out: Array<Escrow> = []
    for (const id of this.ids.keys()) {
      const escrow = this.escrowOf(id)
      if (escrow !== undefined) out.push(escrow)
    }
    return sortEscrows(out)
  }
}

const sortEscrows = (escrows: Array<Escrow>): Array<Escrow> =>
  escrows.sort((a, b) => (before(a.launches[0] as Launch, b.launches[0] as Launch) ? -1 : 1))

/** The index of `launches` (in chain order) from scratch. */
export const foldHints = (open: OpenLaunch, launches: Iterable<TokenLaunched>): HintProjection => {
  const projection = new HintProjection()
  for (const launch of launches) projection.apply(launch, open(launch))
  return projection
}
