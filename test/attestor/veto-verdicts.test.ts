/**
 * The veto watcher's decisions (src/attestor/veto/vetoVerdicts.ts), with no database, chain or index:
 * the verdict (attested, unattested, revoked, contested, attested too late, unknown id with and
 * without VETO_UNKNOWN_IDS), what to do with a judged proposal (count, veto once, AUTO_VETO), the
 * pending proposals of the account projection, and a veto's gas.
 */
import { describe, expect, it } from "@effect/vitest"
import { type Address, getAddress, type Hex, keccak256, numberToHex } from "viem"
import type { StoredAttestation } from "../../src/attestor/binds/AttestationStore.js"
import {
  decide,
  ISSUED_AT_TOLERANCE_SECONDS,
  type Proposal,
  pendingProposals,
  verdictOf,
  withGasMargin
} from "../../src/attestor/veto/vetoVerdicts.js"
import { type AccountState, emptyAccount } from "../../src/store/projections/accounts.js"

let counter = 0
const newId = (): Hex => keccak256(numberToHex(++counter))
const newOwner = (): Address => getAddress(numberToHex(0xbeef0000 + ++counter, { size: 20 }))

const attestation = (p: Proposal, overrides: Partial<StoredAttestation> = {}): StoredAttestation => ({
  id: p.id,
  newOwner: p.newOwner,
  bindNonce: p.bindNonce,
  deadline: 1_700_000_000n,
  visibility: "private",
  revoked: false,
  issuedAt: 1,
  ...overrides
})

describe("the decision rule", () => {
  const p: Proposal = { id: newId(), newOwner: newOwner(), bindNonce: 3n }
  /** When the proposal was mined: after every attestation here (issued at 1) unless a test says. */
  const MINED = 100

  it("attested: an unrevoked attestation of the id, new owner and bind nonce, whatever the case", () => {
    expect(verdictOf(p, true, false, [attestation(p)], [], MINED)).toBe("attested")
    const upper = attestation(p, {
      id: p.id.toUpperCase().replace("0X", "0x") as Hex,
      newOwner: p.newOwner.toLowerCase() as Address
    })
    expect(verdictOf(p, true, false, [upper], [], MINED)).toBe("attested")
  })

  it("unattested: no attestation, another owner's, another bind nonce's, or a revoked one", () => {
    expect(verdictOf(p, true, false, [], [], MINED)).toBe("unattested")
    expect(verdictOf(p, true, false, [attestation(p, { newOwner: newOwner() })], [], MINED)).toBe(
      "unattested"
    )
    expect(verdictOf(p, true, false, [attestation(p, { bindNonce: 2n })], [], MINED)).toBe("unattested")
    expect(verdictOf(p, true, false, [attestation(p, { revoked: true })], [], MINED)).toBe("unattested")
    expect(
      verdictOf(
        p,
        true,
        false,
        [attestation(p, { revoked: true }), attestation(p, { deadline: 5n })],
        [],
        MINED
      )
    ).toBe("attested")
  })

  it("unattested: a new owner contested for the id, whatever its attestations; another contested owner changes nothing", () => {
    const contested = [newOwner(), p.newOwner.toLowerCase() as Address]
    expect(verdictOf(p, true, false, [attestation(p)], contested, MINED)).toBe("unattested")
    expect(
      verdictOf(p, true, false, [attestation(p), attestation(p, { deadline: 5n })], contested, MINED)
    ).toBe("unattested")
    expect(verdictOf(p, false, true, [attestation(p)], contested, MINED)).toBe("unattested")
    expect(verdictOf(p, true, false, [attestation(p)], [newOwner()], MINED)).toBe("attested")
    // An id the hint index does not know stays unknown without VETO_UNKNOWN_IDS.
    expect(verdictOf(p, false, false, [attestation(p)], contested, MINED)).toBe("unknown_id")
  })

  it("unattested: an attestation issued after the proposal was mined (beyond the clocks' tolerance), or a proposal whose block is not known", () => {
    // Issued in the proposal's block's second: it may be the one the proposal carries.
    expect(verdictOf(p, true, false, [attestation(p, { issuedAt: MINED })], [], MINED)).toBe("attested")
    // Seconds after, by a clock running ahead of the chain's timestamps: an honest bind proposed
    // at once, not vetoed: a few seconds of drift are within the tolerance whatever its exact value.
    expect(verdictOf(p, true, false, [attestation(p, { issuedAt: MINED + 5 })], [], MINED)).toBe("attested")
    const late = MINED + ISSUED_AT_TOLERANCE_SECONDS
    expect(verdictOf(p, true, false, [attestation(p, { issuedAt: late })], [], MINED)).toBe("attested")
    // Issued later than that: a replica whose index did not show the pending bind signed it later.
    expect(verdictOf(p, true, false, [attestation(p, { issuedAt: late + 1 })], [], MINED)).toBe("unattested")
    expect(
      verdictOf(p, true, false, [attestation(p, { issuedAt: late + 1 }), attestation(p)], [], MINED)
    ).toBe("attested")
    expect(verdictOf(p, true, false, [attestation(p)], [], undefined)).toBe("unattested")
  })

  it("unknown id: only counted without VETO_UNKNOWN_IDS, judged like any other with it", () => {
    expect(verdictOf(p, false, false, [], [], MINED)).toBe("unknown_id")
    expect(verdictOf(p, false, true, [], [], MINED)).toBe("unattested")
    expect(verdictOf(p, false, true, [attestation(p)], [], MINED)).toBe("attested")
  })

  it("decide: counts a new or changed verdict, vetoes an unattested proposal once, with AUTO_VETO only", () => {
    expect(decide("unattested", undefined, true)).toEqual({ count: true, veto: true })
    expect(decide("unattested", undefined, false)).toEqual({ count: true, veto: false })
    expect(decide("unattested", { verdict: "unattested", veto: "none" }, true)).toEqual({
      count: false,
      veto: true
    })
    expect(decide("unattested", { verdict: "attested", veto: "none" }, true)).toEqual({
      count: true,
      veto: true
    })
    for (const veto of ["sending", "sent"] as const)
      expect(decide("unattested", { verdict: "unattested", veto }, true)).toEqual({
        count: false,
        veto: false
      })
    // Written by earlier versions when the simulation reverted: tried again.
    expect(decide("unattested", { verdict: "unattested", veto: "skipped" }, true)).toEqual({
      count: false,
      veto: true
    })
    expect(decide("attested", undefined, true)).toEqual({ count: true, veto: false })
    expect(decide("attested", { verdict: "attested", veto: "none" }, true)).toEqual({
      count: false,
      veto: false
    })
    expect(decide("unknown_id", undefined, true)).toEqual({ count: true, veto: false })
  })

  it("pending proposals: accounts with a pending owner, at the bind nonce proposeBind consumed", () => {
    const id = newId()
    const owner = newOwner()
    const pending: AccountState = {
      ...emptyAccount(id),
      pendingOwner: owner,
      pendingReadyAt: 10n,
      pendingBlock: 7,
      bindNonce: 2n
    }
    expect(pendingProposals([pending, emptyAccount(newId())])).toEqual([
      { id, newOwner: owner, bindNonce: 1n, block: 7 }
    ])
  })
})

describe("a veto's gas", () => {
  it("is the estimate plus 20 %, rounded down", () => {
    expect(withGasMargin(100_000n)).toBe(120_000n)
    expect(withGasMargin(21_001n)).toBe(25_201n)
  })
})
