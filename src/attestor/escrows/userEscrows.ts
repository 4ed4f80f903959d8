/**
 * The escrows of a user as this attestor's indexes know them, for `POST /v1/escrows` `{ session,
 * loginSecret? }` → `{ escrows: Escrow[] }` and `POST /v1/bind` (docs/attestor.md §4 "POST
 * /v1/escrows and POST /v1/bind", §5); the service answering them is `SessionEscrows`.
 *
 * 1. The session must be valid: an unknown or expired token, or a `loginSecret` missing, wrong
 *    or unexpected for the session's login (`authenticate`), is 401 `invalid_session` (checked
 *    first, before any index is looked at).
 * 2. The session's `(platformId, userId)` is matched against the hint index: the escrows whose
 *    hints this attestor opened and verified (commitment and id recomputed). A session made for
 *    some ids (`ids` non-empty) lists only those of them; empty `ids` lists every escrow of the
 *    user. Ids the hint index does not know are left out: this attestor cannot attest them.
 * 3. Each escrow's account state comes from the vault indexer's account projection (events
 *    `Registered`, `OwnerRotated`, `BindProposed`, `BindFinalized`, `BindCancelled` folded from
 *    range log queries), read at or after the hint index's block: when the projection is behind
 *    the hint index (a brief race, both follow one event store) the read waits up to
 *    `COHERENCE_WAIT_MS` for it. No per-id chain read is made.
 *    - unregistered: `registered: false`, `owner: null`, and the kind-2 registration payload
 *      from the hint `{ kind: 2, handleCommitment, fallbackRecipient, fallbackDelay }` (zero
 *      address and 0 without a fallback), so that `computeId(2, …)` of it is the escrow's id;
 *    - registered: `owner` (the zero address until a bind finalizes), `register: null`;
 *    - `pendingOwner` / `pendingReadyAt` of a pending bind, else null. Listing never acts on a
 *      pending bind.
 *    - `visibility` (`escrowVisibility`).
 * 4. Index freshness: before the indexes cover their first range the answer is 503
 *    `unavailable`. Once they do, the shared rule of `src/indexer/freshness.ts` (also the
 *    relayer's `/v1/accounts`): a stale index (last step failed, or no head read for a few poll
 *    intervals) asks the chain for its head once; no answer is 503 `unavailable` (docs/attestor.md: "stale
 *    and the chain cannot be reached"), an answer serves the last index while it catches up.
 *
 * Nothing of the session, user or escrows reaches a log line or a metric.
 */
import { Duration, Effect, Option, Schema } from "effect"
import type { Hex } from "viem"
import { Escrow, type Visibility } from "../../../schema/attestor.js"
import { Unavailable } from "../../../schema/errors.js"
import { ZERO_ADDRESS } from "../../../schema/ids.js"
import { ChainClient, type ChainClientShape } from "../../chain/ChainClient.js"
import { isStale, requireServable } from "../../indexer/freshness.js"
import type { IndexerShape, IndexerStatus } from "../../indexer/Indexer.js"
import type { AccountState } from "../../store/projections/accounts.js"
import type { Escrow as HintEscrow } from "../../store/projections/hints.js"
import type { HintIndexShape, HintIndexStatus } from "../hints/HintIndex.js"
import type { PublicCommitmentsShape } from "../publicHandles/PublicCommitments.js"

// ---------------------------------------------------------------------------------------------
// Visibility
// ---------------------------------------------------------------------------------------------

/**
 * Visibility (docs/attestor.md §4): the spec names `public` and `private` escrows without saying how one is
 * told from the other. The rule here: an escrow is `public` when its recipient was named in the
 * open, through a PublicHandle attestation this attestor issued for its handle commitment
 * (`POST /v1/public-handle`, docs/attestor.md §2; `PublicCommitments`), and `private` otherwise. Nothing in the
 * hint (docs/protocol.md §6) or on chain marks an escrow public, so a rule reading either would be invented.
 */
export const escrowVisibility = (indexed: IndexedEscrow): Visibility => indexed.visibility ?? "private"

// ---------------------------------------------------------------------------------------------
// Escrows from the indexes
// ---------------------------------------------------------------------------------------------

/** One escrow of a user: its hint and its account state at (or after) the hint index's block. */
export interface IndexedEscrow {
  readonly escrow: HintEscrow
  /** None while no vault event names the id (no deposit, no registration yet). */
  readonly account: AccountState | undefined
  /** `public` when its commitment came from `/v1/public-handle`; absent means `private`. */
  readonly visibility?: Visibility
}

export interface IndexedEscrows {
  /** Block of the hint index the escrows were matched at. */
  readonly hintBlock: number
  /** Block of the account projection the states come from (>= hintBlock unless it lagged). */
  readonly accountBlock: number
  readonly escrows: ReadonlyArray<IndexedEscrow>
}

/** How long a read waits for the account projection to reach the hint index's block. */
export const COHERENCE_WAIT_MS = 1_000
const COHERENCE_POLL = Duration.millis(25)

export const INDEX_NOT_READY = "the attestor's index is not ready yet"
export const INDEX_STALE_CHAIN_DOWN = "the attestor's index is stale and the chain RPC is not answering"

/** Either index stale by the shared rule (`src/indexer/freshness.ts`): it may be behind the chain. */
export const indexIsStale = (indexer: IndexerStatus, hints: HintIndexStatus, nowMs = Date.now()): boolean =>
  isStale(indexer, nowMs) || isStale(hints, nowMs)

/** What the escrows are read from: both indexes, the public commitments, and the chain for staleness. */
export interface EscrowSources {
  readonly indexer: IndexerShape
  readonly hints: HintIndexShape
  readonly publics: PublicCommitmentsShape
  readonly chain: ChainClientShape
}

/**
 * The escrows of `(platformId, userId)`, restricted to `ids` when there are some, with their
 * account states; 503 `unavailable` before the indexes are ready, or when they are stale and the
 * chain does not answer.
 */
export const indexedEscrows = (
  { indexer, hints, publics, chain }: EscrowSources,
  platformId: number,
  userId: string,
  ids: ReadonlyArray<Hex>
): Effect.Effect<IndexedEscrows, Unavailable> =>
  Effect.gen(function* () {
    const notReady = new Unavailable({ message: INDEX_NOT_READY })
    const [indexerStatus, hintStatus] = yield* Effect.all([indexer.status, hints.status])
    yield* requireServable([indexerStatus, hintStatus], INDEX_STALE_CHAIN_DOWN).pipe(
      Effect.provideService(ChainClient, chain)
    )
    const found = yield* hints.escrowsOf(platformId, userId)
    if (Option.isNone(found)) return yield* Effect.fail(notReady)
    const wanted = new Set(ids.map((id) => id.toLowerCase()))
    const escrows =
      wanted.size === 0
        ? found.value.escrows
        : found.value.escrows.filter((e) => wanted.has(e.beneficiaryId.toLowerCase()))
    const hintBlock = found.value.block
    const readAccounts = indexer.read((snapshot) =>
      snapshot === undefined
        ? undefined
        : {
            block: snapshot.block,
            states: escrows.map((escrow) => ({
              escrow,
              account: snapshot.accounts.get(escrow.beneficiaryId)
            }))
          }
    )
    let accounts = yield* readAccounts
    for (
      let waited = 0;
      accounts !== undefined && accounts.block < hintBlock && waited < COHERENCE_WAIT_MS;
    ) {
      yield* Effect.sleep(COHERENCE_POLL)
      waited += Duration.toMillis(COHERENCE_POLL)
      accounts = yield* readAccounts
    }
    if (accounts === undefined) return yield* Effect.fail(notReady)
    const publicOnes = yield* publics.publicAmong(escrows.map((e) => e.hint.handleCommitment))
    return {
      hintBlock,
      accountBlock: accounts.block,
      escrows: accounts.states.map(
        (state): IndexedEscrow => ({
          ...state,
          visibility: publicOnes.has(state.escrow.hint.handleCommitment.toLowerCase()) ? "public" : "private"
        })
      )
    }
  })

const decodeEscrow = Schema.decodeUnknownSync(Escrow)

/** The wire Escrow of an indexed escrow (a defect if the indexes held something out of shape). */
export const escrowOf = (indexed: IndexedEscrow): Escrow => {
  const { escrow, account } = indexed
  const registered = account?.registration !== undefined
  const fallback = escrow.hint.fallback
  return decodeEscrow({
    id: escrow.beneficiaryId,
    registered,
    owner: registered ? account.owner : null,
    pendingOwner: account?.pendingOwner ?? null,
    pendingReadyAt: account?.pendingReadyAt?.toString() ?? null,
    register: registered
      ? null
      : {
          kind: 2,
          handleCommitment: escrow.hint.handleCommitment,
          fallbackRecipient: fallback?.recipient ?? ZERO_ADDRESS,
          fallbackDelay: (fallback?.delay ?? 0n).toString()
        },
    visibility: escrowVisibility(indexed)
  })
}
