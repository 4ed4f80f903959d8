/**
 * When an index may serve what it holds, one rule for every reader: the relayer's `/v1/accounts`,
 * the attestor's `/v1/escrows` and `/v1/bind`, and both services' `/v1/health`.
 *
 * An index is stale when its last step failed (`retrying`), or when it has not seen the chain's
 * head for `STALE_AFTER_POLLS` poll intervals (a step hanging on an RPC that does not answer, or a
 * standby that cannot read the head). A fresh index serves without asking anything. A stale one
 * asks the chain for its head once: an answer serves the last index while it catches up (the
 * chain is there, the index will follow), no answer is 503 `unavailable` (docs/protocol.md §7: stale and
 * unreachable).
 */
import { Clock, Duration, Effect, Option } from "effect"
import { Unavailable } from "../../schema/errors.js"
import { ChainClient } from "../chain/ChainClient.js"

/**
 * Poll intervals without a head read after which an index counts as stale. A step reads the head
 * first, so a healthy indexer reads it about once per interval; three leave room for a slow step
 * (a false alarm costs one head read).
 */
export const STALE_AFTER_POLLS = 3

/**
 * Longest wait for the head probe. Bounded apart from the client's own retries so that a request
 * (or a health check) never waits out a black-holed RPC's timeouts.
 */
export const HEAD_PROBE_TIMEOUT = Duration.seconds(5)

/** What the rule reads of an index: the indexer's status, the hint index's. */
export interface IndexProgress {
  readonly state: string
  /** Epoch ms until which the last head read counts as current; absent before the first. */
  readonly freshUntil?: number | undefined
}

/** Whether an index may be behind the chain without knowing it. */
export const isStale = (progress: IndexProgress, nowMs: number): boolean =>
  progress.state === "retrying" || (progress.freshUntil !== undefined && nowMs > progress.freshUntil)

/** What the chain said, if it was asked. */
export type ChainCheck =
  /** Not asked: every index saw the head recently. */
  | { readonly _tag: "Fresh" }
  /** Asked because an index is stale, and it answered with its head. */
  | { readonly _tag: "Answered"; readonly head: number }
  /** Asked because an index is stale, and it did not answer. */
  | { readonly _tag: "Unreachable" }

const fresh: ChainCheck = { _tag: "Fresh" }
const unreachable: ChainCheck = { _tag: "Unreachable" }

/** The chain's head, asked once; none when it does not answer in time. */
export const probeHead: Effect.Effect<Option.Option<number>, never, ChainClient> = Effect.flatMap(
  ChainClient,
  (chain) => chain.blockNumber.pipe(Effect.timeout(HEAD_PROBE_TIMEOUT), Effect.map(Number), Effect.option)
)

/** The rule: asks the chain for its head once when any of `indexes` is stale. */
export const checkChain = (
  indexes: ReadonlyArray<IndexProgress>
): Effect.Effect<ChainCheck, never, ChainClient> =>
  Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    if (!indexes.some((index) => isStale(index, now))) return fresh
    const head = yield* probeHead
    return Option.match(head, {
      onNone: () => unreachable,
      onSome: (head): ChainCheck => ({ _tag: "Answered", head })
    })
  })

/** The rule for a route: 503 `unavailable` with `message` when stale and the chain does not answer. */
export const requireServable = (
  indexes: ReadonlyArray<IndexProgress>,
  message: string
): Effect.Effect<ChainCheck, Unavailable, ChainClient> =>
  Effect.flatMap(checkChain(indexes), (check) =>
    check._tag === "Unreachable" ? Effect.fail(new Unavailable({ message })) : Effect.succeed(check)
  )

/** How health names the chain after a check. */
export const chainReach = (check: ChainCheck): "reachable" | "unreachable" =>
  check._tag === "Unreachable" ? "unreachable" : "reachable"
