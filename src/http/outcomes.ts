/**
 * Per-route outcome metrics (`relayer_claims_total{code}`, `attestor_logins_total{platform,outcome}`,
 * …), recorded by the server's middleware (src/http/server.ts) for every route that has a recorder:
 * `ok`, or the wire code the failure is answered with (`failureCode`, the renderer's own
 * classification), or `internal` for a defect. A client that hangs up is no outcome. Only requests
 * that reached their route's handler count (past the rate limit and the body guard), a body the
 * endpoint's schema refuses (`bad_request`) included. A handler that answers a refusal with
 * something other than an error (a login's redirect to `<redirect>#error=<code>`) reports its code
 * with `reportOutcome`.
 */
import { type Effect, FiberRef, type Metric } from "effect"

/**
 * The counter one outcome of a route increments; `path` is the request's (for a template with a
 * parameter).
 */
export type OutcomeRecorder = (outcome: string, path: string) => Metric.Metric.Counter<number>

/** Outcome recorders by route template (`/v1/claim`), as the API declares the paths. */
export type RouteOutcomes = Readonly<Record<string, OutcomeRecorder>>

/**
 * The outcome a handler reported for its own answer; none: the answer speaks for itself. Every
 * request runs in a fiber of its own, which starts with none.
 */
export const reportedOutcome = FiberRef.unsafeMake<string | undefined>(undefined)

/** Counts this request as refused with `code` although it is answered without an error. */
export const reportOutcome = (code: string): Effect.Effect<void> => FiberRef.set(reportedOutcome, code)
