/**
 * What the soak's load generator (bench/mixedLoad.ts) is told and what it records, shared with
 * bench/soak.ts, which reads the record.
 */
import type { Address, Hex } from "viem"

export interface MixedLoadPlan {
  /** One origin per replica. */
  readonly origins: ReadonlyArray<string>
  readonly ratePerSecond: number
  readonly chainId: number
  readonly vault: Address
  readonly asset: Address
  readonly relayer: Address
  /** Per claim, in `asset`'s units (decimal string). */
  readonly amount: string
  /** Owners that claim in a loop (private key, account id). */
  readonly owners: ReadonlyArray<{ readonly key: Hex; readonly id: Hex }>
  /** Owners with one claim each, all sent on `burst`. */
  readonly burstOwners: ReadonlyArray<{ readonly key: Hex; readonly id: Hex }>
  /** An owner's pause between its claims, ms, drawn uniformly. */
  readonly claimPauseMs: readonly [number, number]
  /** A request with no answer after this long counts as a timeout. */
  readonly timeoutMs: number
  /** After `stop`, how long unresolved claims keep being retried. */
  readonly finishMs: number
  readonly resultsFile: string
}

/** Routes as the report names them (the index is what a request record carries). */
export const ROUTES = [
  "GET /v1/quote",
  "GET /v1/config",
  "GET /v1/health",
  "GET /v1/accounts identity",
  "GET /v1/accounts gzip",
  "GET /v1/accounts gzip If-None-Match",
  "POST /v1/tx-status",
  "POST /v1/claim",
  "malformed: bad JSON",
  "malformed: gzip-encoded body",
  "malformed: unsafe integer"
] as const
export type Route = (typeof ROUTES)[number]

/** Status of a request that got no HTTP answer: connection refused or reset. */
export const NO_ANSWER = 0
/** Status of a request still unanswered after `timeoutMs` (given up). */
export const TIMED_OUT = -1

/** One request: route index, replica index, start (epoch ms), duration (ms), status. */
export type RequestRecord = readonly [number, number, number, number, number]

export interface ClaimAttempt {
  readonly replica: number
  readonly start: number
  readonly end: number
  readonly status: number
  readonly code?: string
  readonly message?: string
}

export interface ClaimRecord {
  readonly id: Hex
  readonly nonce: string
  readonly recipient: Address
  readonly amount: string
  /** The fee of the body last sent. */
  relayerFee: string
  readonly burst: boolean
  readonly attempts: ClaimAttempt[]
  /**
   * accepted: answered 200. used: 409 "nonce … is used" with no 200 first (an attempt whose
   * answer was lost executed it). refused: a definite 4xx. unresolved: still no answer at the end.
   */
  outcome: "accepted" | "used" | "refused" | "unresolved"
  txHash?: Hex
}

export interface MixedLoadResult {
  readonly started: number
  readonly stopped: number
  readonly requests: ReadonlyArray<RequestRecord>
  readonly claims: ReadonlyArray<ClaimRecord>
  /** The 5xx answers (the first 5,000), with when, where and their bodies. */
  readonly serverErrors: ReadonlyArray<{
    readonly route: Route
    readonly replica: number
    readonly at: number
    readonly ms: number
    readonly status: number
    readonly body: string
  }>
  /** Reads not sent because `maxInFlight` requests were already waiting. */
  readonly skipped: number
}
