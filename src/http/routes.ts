/**
 * Route templates of an API, so requests are labelled by template ("/v1/oauth/:platform/start")
 * and never by a concrete path.
 */
import { HttpApi, type HttpApiGroup } from "@effect/platform"

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

export const matchRoute = (routes: ReadonlyArray<RouteTemplate>, method: string, url: string): string => {
  const path = url.split("?")[0] ?? ""
  for (const route of routes) if (route.method === method && route.pattern.test(path)) return route.template
  return "unmatched"
}
