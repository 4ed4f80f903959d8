/**
 * The Escrow records of POST /v1/escrows from a hint and an account state (src/attestor/escrows/userEscrows.ts
 * `escrowOf`): unregistered with the kind-2 registration payload whose computeId is the escrow's
 * id (with and without a fallback), registered, pending bind; and when the index counts as stale.
 */
import { Schema } from "effect"
import { type Address, getAddress, type Hex, keccak256, numberToHex, zeroAddress } from "viem"
import { describe, expect, it } from "vitest"
import { Escrow } from "../../schema/attestor.js"
import { computeId, handleCommitment, userIdHash } from "../../schema/ids.js"
import { escrowOf, escrowVisibility, indexIsStale } from "../../src/attestor/escrows/userEscrows.js"
import type { IndexerStatus } from "../../src/indexer/Indexer.js"
import { type AccountState, emptyAccount } from "../../src/store/projections/accounts.js"
import type { Escrow as HintEscrow } from "../../src/store/projections/hints.js"

const SALT = keccak256(numberToHex(1))
const NONCE = keccak256(numberToHex(2))
const COMMITMENT = handleCommitment(2, userIdHash("7700001"), SALT, NONCE)
const FALLBACK = getAddress(numberToHex(0xfa11, { size: 20 }))
const OWNER = getAddress(numberToHex(0x0e1, { size: 20 }))
const PENDING = getAddress(numberToHex(0xbeef, { size: 20 }))

const hintEscrow = (fallback?: { recipient: Address; delay: bigint }): HintEscrow => ({
  beneficiaryId: computeId(2, COMMITMENT, fallback?.recipient ?? zeroAddress, fallback?.delay ?? 0n),
  hint: {
    platformId: 2,
    userId: "7700001",
    nonce: NONCE,
    attestorSalt: SALT,
    handleCommitment: COMMITMENT,
    fallback
  },
  launches: [
    {
      blockNumber: 10,
      blockHash: keccak256(numberToHex(10)),
      logIndex: 0,
      txHash: keccak256(numberToHex(11)),
      token: getAddress(numberToHex(0x70, { size: 20 }))
    }
  ]
})

const registered = (id: Hex, changes: Partial<AccountState> = {}): AccountState => ({
  ...emptyAccount(id),
  registration: {
    kind: 2,
    commitment: COMMITMENT,
    fallbackRecipient: zeroAddress,
    fallbackDelay: 0n,
    blockNumber: 12
  },
  ...changes
})

/** What a client would send to the vault: the registration payload's id. */
const idOfPayload = (escrow: Escrow): Hex | undefined =>
  escrow.register === null
    ? undefined
    : computeId(
        escrow.register.kind,
        escrow.register.handleCommitment,
        escrow.register.fallbackRecipient,
        escrow.register.fallbackDelay
      )

describe("escrowOf", () => {
  it("an escrow no event has named is unregistered, with the registration payload of its id", () => {
    const escrow = hintEscrow()
    const record = escrowOf({ escrow, account: undefined })
    expect(Schema.encodeSync(Escrow)(record)).toEqual({
      id: escrow.beneficiaryId,
      registered: false,
      owner: null,
      pendingOwner: null,
      pendingReadyAt: null,
      register: { kind: 2, handleCommitment: COMMITMENT, fallbackRecipient: zeroAddress, fallbackDelay: "0" },
      visibility: "private"
    })
    expect(idOfPayload(record)).toBe(escrow.beneficiaryId)
  })

  it("an id with deposits but no registration is still unregistered", () => {
    const escrow = hintEscrow()
    const account = { ...emptyAccount(escrow.beneficiaryId), balances: { [OWNER]: 5n } }
    expect(escrowOf({ escrow, account })).toMatchObject({ registered: false, owner: null })
  })

  it("the payload carries the hint's fallback, and computeId of it is the id", () => {
    const escrow = hintEscrow({ recipient: FALLBACK, delay: 86_400n })
    const record = escrowOf({ escrow, account: undefined })
    expect(record.register).toEqual({
      kind: 2,
      handleCommitment: COMMITMENT,
      fallbackRecipient: FALLBACK,
      fallbackDelay: 86_400n
    })
    expect(idOfPayload(record)).toBe(escrow.beneficiaryId)
  })

  it("a registered escrow has its owner (zero until a bind finalizes) and no payload", () => {
    const escrow = hintEscrow()
    expect(escrowOf({ escrow, account: registered(escrow.beneficiaryId) })).toMatchObject({
      registered: true,
      owner: zeroAddress,
      pendingOwner: null,
      pendingReadyAt: null,
      register: null
    })
    expect(escrowOf({ escrow, account: registered(escrow.beneficiaryId, { owner: OWNER }) })).toMatchObject({
      registered: true,
      owner: OWNER
    })
  })

  it("shows a pending bind's owner and ready time", () => {
    const escrow = hintEscrow()
    const account = registered(escrow.beneficiaryId, {
      pendingOwner: PENDING,
      pendingReadyAt: 1_700_003_600n
    })
    expect(escrowOf({ escrow, account })).toMatchObject({
      registered: true,
      pendingOwner: PENDING,
      pendingReadyAt: 1_700_003_600n
    })
  })

  it("an escrow is private unless its commitment was made public", () => {
    const escrow = hintEscrow()
    expect(escrowVisibility({ escrow, account: undefined })).toBe("private")
    expect(escrowVisibility({ escrow, account: undefined, visibility: "public" })).toBe("public")
    expect(escrowOf({ escrow, account: undefined, visibility: "public" }).visibility).toBe("public")
  })
})

describe("indexIsStale", () => {
  const indexer = (state: IndexerStatus["state"]): IndexerStatus => ({
    state,
    block: 10,
    head: 10,
    leader: true
  })
  const hints = (state: "starting" | "ready" | "retrying" | "disabled") => ({
    state,
    block: 10,
    hash: undefined
  })

  it("is stale when the indexer's or the hint index's last step failed", () => {
    expect(indexIsStale(indexer("retrying"), hints("ready"))).toBe(true)
    expect(indexIsStale(indexer("following"), hints("retrying"))).toBe(true)
    for (const state of ["following", "backfilling", "standby", "starting"] as const)
      expect(indexIsStale(indexer(state), hints("ready"))).toBe(false)
  })

  it("is stale once the indexer's last head read is older than its freshness window", () => {
    const at = { ...indexer("following"), freshUntil: 1_000 }
    expect(indexIsStale(at, hints("ready"), 1_000)).toBe(false)
    expect(indexIsStale(at, hints("ready"), 1_001)).toBe(true)
  })
})
