/**
 * The attestor's request metrics beyond the server's own: outcomes of commitments, logins and binds
 * (recorded by the server's middleware, src/http/outcomes.ts, from `attestorOutcomes`) and
 * the bind signatures issued. Labels are platforms and wire codes, never a user, handle or id.
 */

import { Platform } from "../../schema/attestor.js"
import { counter, type SeriesAtZero, taggedOnce, valuesOf } from "../http/metrics.js"
import type { RouteOutcomes } from "../http/outcomes.js"

export const commitmentOutcomes = counter(
  "attestor_commitments_total",
  "POST /v1/commitment requests by outcome: ok or the refusal's code"
)

export const loginOutcomes = counter(
  "attestor_logins_total",
  "Login verifications by platform and outcome: ok or the refusal's code"
)

export const bindOutcomes = counter(
  "attestor_binds_total",
  "POST /v1/bind requests by outcome: ok or the refusal's code"
)

export const oauthStarts = counter(
  "attestor_oauth_starts_total",
  "OAuth login starts (POST, and the deprecated GET) by platform and outcome: ok or the refusal's code"
)

export const bindSignatures = counter(
  "attestor_bind_signatures_total",
  "BindOwner signatures issued by POST /v1/bind"
)

export const publicHandleOutcomes = counter(
  "attestor_public_handles_total",
  "POST /v1/public-handle requests by outcome: ok or the refusal's code"
)

export const lookupPayments = counter(
  "attestor_lookup_payments_total",
  "Paid handle lookups' payments by what became of them: settled; failed (refused, or the handle not found: nothing settled); reused (presented before for another request); replayed (the same payment for the same request, given its kept answer); indeterminate (a settle without answer, looked for on chain when presented again); in_flight (refused while another payment of the same payer was in flight)"
)

const commitmentOutcome = taggedOnce(commitmentOutcomes)
const publicHandleOutcome = taggedOnce(publicHandleOutcomes)
/** One payment's fate, for `lookupPayments`. */
export const lookupPayment = taggedOnce(lookupPayments)
const loginOutcome = taggedOnce(loginOutcomes)
const bindOutcome = taggedOnce(bindOutcomes)
const oauthStart = taggedOnce(oauthStarts)

/** What became of a paid lookup's payment: the `outcome` of `attestor_lookup_payments_total`. */
type LookupPaymentOutcome = "settled" | "failed" | "reused" | "replayed" | "indeterminate" | "in_flight"

/** The login platforms without an OAuth start: messenger's widget logs in without one. */
const withoutStart = new Set<Platform>(["messenger"])

/**
 * The attestor's request counters at 0 from start-up (docs/operations.md "Metrics reference"):
 * each route's `ok`, logins and starts by the platforms this attestor offers, payments by outcome
 * when lookups are paid. A refusal's code is a label only its first refusal gives.
 */
export const attestorSeriesAtZero = (
  offered: ReadonlyArray<Platform>,
  paidLookups: boolean
): ReadonlyArray<SeriesAtZero> => [
  commitmentOutcome({ outcome: "ok" }),
  publicHandleOutcome({ outcome: "ok" }),
  bindOutcome({ outcome: "ok" }),
  bindSignatures,
  ...offered.map((platform) => loginOutcome({ platform, outcome: "ok" })),
  ...offered
    .filter((platform) => !withoutStart.has(platform))
    .map((platform) => oauthStart({ platform, outcome: "ok" })),
  ...(paidLookups
    ? valuesOf<LookupPaymentOutcome>({
        settled: true,
        failed: true,
        reused: true,
        replayed: true,
        indeterminate: true,
        in_flight: true
      }).map((outcome) => lookupPayment({ outcome }))
    : [])
]

const platforms = new Set<string>(Platform.literals)

/** The platform of a `/v1/oauth/<platform>/…` path as a label: a known platform, else `unknown`. */
const platformLabel = (path: string): string => {
  const segment = path.split("/")[3] ?? ""
  return platforms.has(segment) ? segment : "unknown"
}

/** The attestor routes' outcome counters, by route template. */
export const attestorOutcomes: RouteOutcomes = {
  "/v1/commitment": (outcome) => commitmentOutcome({ outcome }),
  "/v1/public-handle": (outcome) => publicHandleOutcome({ outcome }),
  "/v1/oauth/messenger/verify": (outcome) => loginOutcome({ platform: "messenger", outcome }),
  "/v1/oauth/fedsocial/verify": (outcome) => loginOutcome({ platform: "fedsocial", outcome }),
  "/v1/oauth/:platform/callback": (outcome, path) => loginOutcome({ platform: platformLabel(path), outcome }),
  "/v1/oauth/:platform/start": (outcome, path) => oauthStart({ platform: platformLabel(path), outcome }),
  "/v1/bind": (outcome) => bindOutcome({ outcome })
}
