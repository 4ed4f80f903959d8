/**
 * Per-route outcome metrics (`relayer_claims_total{code}`, `attestor_logins_total{platform,outcome}`,
 * …), recorded by one middleware for every route that has a recorder: `ok`, or the wire code the
 * failure is answered with (`failureCode`, the renderer's own classification), or `internal` for a
 * defect. A client that hangs up is no outcome. The middleware sits inside the rate limit and the
 * body guard, so it counts the requests that reached their route's handler, a body the endpoint's
 * schema refuses (`bad_request`) included. A handler that answers a refusal with something other
 * than an error (a login's redirect to `<redirect>#error=<code>`) reports its code with
 * `reportOutcome`.
 */
import { type HttpApp, HttpServerRequest } from "@effect/platform"
import { Effect, Exit, FiberRef } from "effect"
import { failureCode } from "./render.js"
import { currentRoute } from "./routes.js"

/** Counts one outcome of a route; `path` is the request's (for a template with a parameter). */
export type OutcomeRecorder = (outcome: string, path: string) => Effect.Effect<void>

/** Outcome recorders by route template (`/v1/claim`), as the API declares the paths. */
export type RouteOutcomes = Readonly<Record<string, OutcomeRecorder>>

/** The outcome a handler reported for its own answer; none: the answer speaks for itself. */
const reportedOutcome = FiberRef.unsafeMake<string | undefined>(undefined)

/** Counts this request as refused with `code` although it is answered without an error. */
export const reportOutcome = (code: string): Effect.Effect<void> => FiberRef.set(reportedOutcome, code)

export const recordOutcomes =
  (outcomes: RouteOutcomes) =>
  (app: HttpApp.Default): HttpApp.Default =>
    Effect.flatMap(FiberRef.get(currentRoute), (decision) => {
      const record = decision._tag === "Route" ? outcomes[decision.template] : undefined
      if (record === undefined) return app
      return Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
        const path = request.url.split("?", 1)[0] ?? ""
        return app.pipe(
          Effect.onExit(
            Exit.match({
              onSuccess: () =>
                Effect.flatMap(FiberRef.get(reportedOutcome), (code) => record(code ?? "ok", path)),
              onFailure: (cause) => {
                const code = failureCode(cause)
                return code === undefined ? Effect.void : record(code, path)
              }
            })
          ),
          Effect.locally(reportedOutcome, undefined)
        )
      })
    })
