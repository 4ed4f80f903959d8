/**
 * Per-route outcome metrics (`relayer_claims_total{code}`, `attestor_logins_total{platform,outcome}`,
 * …), recorded by one middleware for every route that has a recorder: `ok`, or the wire code the
 * failure is answered with (`failureCode`, the renderer's own classification), or `internal` for a
 * defect. A client that hangs up is no outcome. The middleware sits inside the rate limit and the
 * body guard, so it counts the requests that reached their route's handler, a body the endpoint's
 * schema refuses (`bad_request`) included.
 */
import type { HttpApp } from "@effect/platform"
import { Effect, Exit, FiberRef } from "effect"
import { failureCode } from "./render.js"
import { currentRoute } from "./routes.js"

/** Counts one outcome of a route. */
export type OutcomeRecorder = (outcome: string) => Effect.Effect<void>

/** Outcome recorders by route template (`/v1/claim`), as the API declares the paths. */
export type RouteOutcomes = Readonly<Record<string, OutcomeRecorder>>

export const recordOutcomes =
  (outcomes: RouteOutcomes) =>
  (app: HttpApp.Default): HttpApp.Default =>
    Effect.flatMap(FiberRef.get(currentRoute), (decision) => {
      const record = decision._tag === "Route" ? outcomes[decision.template] : undefined
      if (record === undefined) return app
      return Effect.onExit(
        app,
        Exit.match({
          onSuccess: () => record("ok"),
          onFailure: (cause) => {
            const code = failureCode(cause)
            return code === undefined ? Effect.void : record(code)
          }
        })
      )
    })
