/**
 * The veto watcher's decisions (docs/attestor.md §3 veto and contest rows, §6), pure: which
 * proposals are pending in the account projection, the verdict on each, and what to do with a
 * judged one. The watcher (`VetoWatcher.ts`) reads what they need and acts on what they say.
 *
 * Verdict (`verdictOf`), per proposal:
 * - `unknown_id`: the hint index has no escrow for the id (no hint for this attestor), and
 *   `VETO_UNKNOWN_IDS` is off: counted, never vetoed;
 * - `attested`: the new owner is not contested for the id, and an unrevoked attestation of this
 *   attestor (`AttestationStore`) has the same id, new owner and bind nonce, i.e. the proposal's
 *   `BindOwner` message (deadline aside) is one `POST /v1/bind` signed, and was issued no later
 *   than the timestamp of the block the proposal was mined in. A signature for the same owner at
 *   another bind nonce does not count: it belongs to another proposal. Nor does one issued after
 *   the proposal was mined: every signature leaves the attestor only once recorded, so that one
 *   cannot be the one the proposal carries; it was signed by a replica whose index did not show
 *   the pending bind (which no replica that sees it does), perhaps for a session made after a
 *   contest that replica could not tie to the pending owner. The attestor's clock (`issued_at`)
 *   is compared with the chain's: it must not run ahead of the chain's block timestamps
 *   (docs/operations.md);
 * - `unattested`: anything else, including a proposal to an owner a contest ruled out: a contest
 *   (`POST /v1/bind` with `contest: true`) records every other owner attested for the id, and the
 *   pending one, as contested (and revokes their attestations), so on the watcher's next pass the
 *   pending proposal is unattested and, with `AUTO_VETO`, vetoed. Contested owners are checked
 *   apart from revocations, so no attestation of a contested owner, whenever it was recorded,
 *   makes its proposal attested again.
 *
 * In a committee (docs/attestor.md "The committee"), a proposal carries the signatures of t of the
 * k members: the others were not asked, and an `unattested` proposal is not evidence of fraud for
 * them. Under `VETO_RULE=committee` (`committeeVerdict`), a proposal the strict rule finds
 * unattested stays `unattested` (vetoed) only when
 * - a contest ruled its new owner out (above);
 * - this attestor attested another key for the same id at the same bind nonce, unrevoked: the user
 *   asked it for a key, and the proposal names another;
 * - the proposal carries this attestor's own signature, which it never issued (its key signed
 *   elsewhere), or its signatures cannot be read (proposed through a contract, not a direct call of
 *   the vault): the strict rule then;
 * and is `unasked` (counted, never vetoed) otherwise. With one attestor every proposal carries its
 * signature, so both rules give the same verdicts.
 */
import { type Address, concatHex, type Hex, keccak256 } from "viem"
import type { AccountState } from "../../store/projections/accounts.js"
import type { StoredAttestation } from "../binds/AttestationStore.js"

/** A pending bind proposal: the message its signatures were made over, deadline aside. */
export interface Proposal {
  readonly id: Hex
  readonly newOwner: Address
  /** The bind nonce `proposeBind` consumed (the `BindProposed` event's `bindNonce`). */
  readonly bindNonce: bigint
  /** The block of its `BindProposed` (the indexer's fold always knows it). */
  readonly block?: number | undefined
}

export type Verdict = "attested" | "unattested" | "unknown_id" | "unasked"

/** `VETO_RULE` (docs/attestor.md "The committee"). */
export type VetoRule = "committee" | "strict"

/**
 * Whether the proposal's transaction carries this attestor's signature: `carried`, `absent`, or
 * `unreadable` (its transaction is not a direct `proposeBind` call of the vault).
 */
export type OwnSignature = "carried" | "absent" | "unreadable"
export type VetoState = "none" | "sending" | "sent" | "skipped"

/** What the watcher recorded of a proposal. */
export interface Handled {
  readonly verdict: Verdict
  readonly veto: VetoState
  /** The veto's transaction, once `sent`. */
  readonly txHash?: Hex | undefined
}

/** Hex strings (ids, addresses) equal whatever their case. */
export const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase()

/** The pending proposals of the account projection. */
export const pendingProposals = (accounts: Iterable<AccountState>): ReadonlyArray<Proposal> => {
  const out: Array<Proposal> = []
  for (const a of accounts)
    if (a.pendingOwner !== undefined && a.bindNonce > 0n)
      out.push({ id: a.id, newOwner: a.pendingOwner, bindNonce: a.bindNonce - 1n, block: a.pendingBlock })
  return out
}

/**
 * How far an attestation's `issuedAt` (this machine's clock) may lie after the proposal's block
 * timestamp (the chain's) and still count: the two clocks drift apart by seconds (a block producer's
 * timestamp, NTP), and an honest bind proposed at once must not be vetoed for it. A signature
 * issued later than that is not the one the proposal carries (docs/protocol.md §10 "Veto verdicts").
 */
export const ISSUED_AT_TOLERANCE_SECONDS = 15

/**
 * The verdict on a proposal mined at `proposedAt` (its block's timestamp, unix seconds; none: not
 * known, and no attestation counts): `unknown_id` for an id without a hint for this attestor
 * unless `vetoUnknownIds`; `unattested` when its new owner is among the owners contested for its
 * id; `attested` when an unrevoked attestation issued no later than `proposedAt` (give or take
 * `ISSUED_AT_TOLERANCE_SECONDS`) has its id, new owner and bind nonce; else `unattested`.
 */
export const verdictOf = (
  proposal: Proposal,
  known: boolean,
  vetoUnknownIds: boolean,
  attestations: ReadonlyArray<StoredAttestation>,
  contested: ReadonlyArray<Address>,
  proposedAt: number | undefined
): Verdict => {
  if (!known && !vetoUnknownIds) return "unknown_id"
  if (contested.some((owner) => same(owner, proposal.newOwner))) return "unattested"
  const attested = attestations.some(
    (a) =>
      !a.revoked &&
      same(a.id, proposal.id) &&
      same(a.newOwner, proposal.newOwner) &&
      a.bindNonce === proposal.bindNonce &&
      proposedAt !== undefined &&
      a.issuedAt <= proposedAt + ISSUED_AT_TOLERANCE_SECONDS
  )
  return attested ? "attested" : "unattested"
}

/**
 * Whether this attestor attested, unrevoked, another key than the proposal's for its id at its
 * bind nonce: the user asked it for that key.
 */
export const attestedAnotherKey = (proposal: Proposal, attestations: ReadonlyArray<StoredAttestation>) =>
  attestations.some(
    (a) =>
      !a.revoked &&
      same(a.id, proposal.id) &&
      a.bindNonce === proposal.bindNonce &&
      !same(a.newOwner, proposal.newOwner)
  )

/**
 * Under `VETO_RULE=committee`, whether a proposal the strict rule judged `unattested` needs its
 * signatures read to be judged (`committeeVerdict`): not when a contest ruled its owner out or this
 * attestor attested another key at its bind nonce, which keep it `unattested` whatever it carries.
 */
export const needsOwnSignature = (
  rule: VetoRule,
  strict: Verdict,
  proposal: Proposal,
  attestations: ReadonlyArray<StoredAttestation>,
  contested: ReadonlyArray<Address>
): boolean =>
  rule === "committee" &&
  strict === "unattested" &&
  !contested.some((owner) => same(owner, proposal.newOwner)) &&
  !attestedAnotherKey(proposal, attestations)

/**
 * The committee rule's verdict on a proposal `needsOwnSignature` sent to have its signatures read:
 * `unasked` when they do not include this attestor's, else `unattested` (its own signature it never
 * issued, or signatures it cannot read).
 */
export const committeeVerdict = (own: OwnSignature): Verdict => (own === "absent" ? "unasked" : "unattested")

/**
 * How long after first judging a proposal vetoable this attestor waits before vetoing it: its slot
 * (0 to `VETO_SLOTS - 1`, from a hash of the id and its own address, so members of one committee
 * mostly take different slots, and differ per proposal) times `staggerSeconds`. The member of the
 * first slot vetoes; the others find `vetoBind` reverting in simulation once that veto is mined, or
 * the proposal gone from the index, and send nothing (docs/attestor.md "Veto watcher").
 */
export const vetoDelaySeconds = (id: Hex, self: Address, staggerSeconds: number): number => {
  if (staggerSeconds <= 0) return 0
  const digest = keccak256(concatHex([id, self.toLowerCase() as Hex]))
  return Number(BigInt(digest) % BigInt(VETO_SLOTS)) * staggerSeconds
}

/** The number of veto slots (`vetoDelaySeconds`). */
export const VETO_SLOTS = 6

/**
 * What to do with a judged proposal: count its verdict (new or changed), send a veto. `skipped`,
 * written by earlier versions when the simulation reverted, is tried again like `none`.
 */
export const decide = (
  verdict: Verdict,
  handled: Handled | undefined,
  autoVeto: boolean
): { readonly count: boolean; readonly veto: boolean } => {
  const veto = handled?.veto ?? "none"
  return {
    count: handled?.verdict !== verdict,
    veto: verdict === "unattested" && autoVeto && (veto === "none" || veto === "skipped")
  }
}

/** Gas sent with a veto: the estimate plus 20 %. */
export const withGasMargin = (estimate: bigint): bigint => (estimate * 12n) / 10n
