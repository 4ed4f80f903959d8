/**
 * Which declared route a request is for, decided once per request and read by everything else:
 * the access log and metrics (by template, never by concrete path), the rate limit, the body
 * guard and the 404/405 answers. Only canonical paths match: origin-form, exactly as declared
 * (case, slashes, no percent-encoding outside path parameters). `/V1/CLAIM`, `/v1/claim/`,
 * `//v1/claim`, `/v1/cl%61im` and absolute-form URLs are unknown routes, so the router (made as
 * strict, see `strictRouter`) never serves a request the guards did not see as that route.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import type * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpRouter from "@effect/platform/HttpRouter"

export const OPENAPI_PATH = "/v1/openapi.json"

export interface RouteTemplate {
  readonly method: string
  readonly template: string
  readonly pattern: RegExp
}

/** The declared routes of an API, to label requests by template instead of by concrete path. */
export const routeTemplates = (api: HttpApi.HttpApi.Any): ReadonlyArray<RouteTemplate> => {
  const routes: Array<RouteTemplate> = [
    { method: "GET", template: OPENAPI_PATH, pattern: /^\/v1\/openapi\.json$/ }
  ]
  HttpApi.reflect(api as HttpApi.HttpApi<string, HttpApiGroup.HttpApiGroup.Any, unknown, unknown>, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      const source = endpoint.path
        .split("/")
        .map((segment) =>
          segment.startsWith(":") ? "[^/]+" : segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
        )
        .join("/")
      routes.push({ method: endpoint.method, template: endpoint.path, pattern: new RegExp(`^${source}$`) })
    }
  })
  return routes
}

/** The label of a request that is for no declared route. */
export const UNMATCHED = "unmatched"

export type RouteDecision =
  /** A declared route: its template labels the request. */
  | { readonly _tag: "Route"; readonly template: string }
  /** A declared path asked with another method: 405 with `Allow`. */
  | { readonly _tag: "WrongMethod"; readonly template: string; readonly allow: ReadonlyArray<string> }
  /** No declared path: 404. */
  | { readonly _tag: "Unknown" }

const unknown: RouteDecision = { _tag: "Unknown" }

/** The methods a route answers: the router serves HEAD wherever it serves GET. */
const methodsOf = (method: string): ReadonlyArray<string> => (method === "GET" ? ["GET", "HEAD"] : [method])

/** The one decision about a request's route (see the module header). */
export const resolveRoute = (
  routes: ReadonlyArray<RouteTemplate>,
  method: string,
  url: string
): RouteDecision => {
  // Origin-form only: an absolute-form target ("http://host/v1/claim") or "*" is no route.
  if (!url.startsWith("/")) return unknown
  const query = url.indexOf("?")
  const path = query === -1 ? url : url.slice(0, query)
  let allow: Array<string> | undefined
  let template = ""
  for (const route of routes) {
    if (!route.pattern.test(path)) continue
    if (methodsOf(route.method).includes(method)) return { _tag: "Route", template: route.template }
    allow = [...(allow ?? []), ...methodsOf(route.method)]
    template = route.template
  }
  return allow === undefined ? unknown : { _tag: "WrongMethod", template, allow }
}

/** The label metrics, logs and rate-limit costs use for a decision. */
export const routeLabel = (decision: RouteDecision): string =>
  decision._tag === "Route" ? decision.template : UNMATCHED

/**
 * The router made as strict as `resolveRoute`: case-sensitive, no trailing-slash or double-slash
 * folding (its defaults fold all three).
 */
export const strictRouter = HttpRouter.setRouterConfig({
  caseSensitive: true,
  ignoreTrailingSlash: false,
  ignoreDuplicateSlashes: false
})
