/**
 * What both servers share: the HttpApi served by Node with the JSON body guard, an optional
 * per-IP rate limit, the error renderer, request metrics, a redacted access log and the OpenAPI
 * document.
 */
import { createServer } from "node:http"
import {
  type HttpApi,
  HttpApiBuilder,
  type HttpApiGroup,
  type HttpApp,
  HttpServer,
  HttpServerRequest,
  type HttpServerResponse
} from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Cause, Effect, Layer } from "effect"
import { jsonBodyGuard } from "./body.js"
import { recordRequest } from "./metrics.js"
import { type IpRateLimitOptions, ipRateLimit } from "./rateLimit.js"
import { renderCause } from "./render.js"
import { matchRoute, OPENAPI_PATH, type RouteTemplate, routeTemplates } from "./routes.js"

const STATUS_CLIENT_CLOSED = 499

/**
 * Access log and metrics: method, route template, status and duration only. No IP, query
 * string, id, address, signature or token ever reaches a log line or a metric label.
 */
const accessLog =
  (routes: ReadonlyArray<RouteTemplate>) =>
  (app: HttpApp.Default): HttpApp.Default =>
    Effect.gen(function* () {
      const request = yield* HttpServerRequest.HttpServerRequest
      const route = matchRoute(routes, request.method, request.url)
      const started = process.hrtime.bigint()
      const finish = (status: number) => {
        const seconds = Number(process.hrtime.bigint() - started) / 1e9
        return recordRequest({ route, method: request.method, status }, seconds).pipe(
          Effect.zipRight(
            Effect.logInfo("request").pipe(
              Effect.annotateLogs({
                method: request.method,
                route,
                status,
                duration_ms: Math.round(seconds * 1e6) / 1e3
              })
            )
          )
        )
      }
      return yield* app.pipe(
        Effect.tap((response) => finish(response.status)),
        Effect.onInterrupt(() => finish(STATUS_CLIENT_CLOSED))
      )
    })

/** Renders every failure (typed error, unknown route, defect) as the service's JSON error. */
const renderFailures = <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
  Effect.catchAllCause(app, (cause) =>
    Cause.isInterruptedOnly(cause) ? Effect.interrupt : renderCause(cause)
  )

export interface ServeOptions {
  readonly host: string
  readonly port: number
  readonly maxBodyBytes: number
  /** Per-client-IP token bucket, charged before the body is read; none when absent. */
  readonly rateLimit?: IpRateLimitOptions | undefined
}

/**
 * Serves an HttpApi whose groups are implemented by `handlers`. The error renderer sits inside
 * HttpApiBuilder's own error encoding, so every response body is the service's `{ error, code }`.
 * The layer exposes the `HttpServer`, whose address tells tests and the devnet the bound port.
 */
export const serveApi = <Id extends string, Groups extends HttpApiGroup.HttpApiGroup.Any, E, R, HE, HR>(
  api: HttpApi.HttpApi<Id, Groups, E, R>,
  handlers: Layer.Layer<HttpApiGroup.HttpApiGroup.ToService<Id, Groups>, HE, HR>,
  options: ServeOptions
) => {
  const routes = routeTemplates(api)
  const bodyGuard = jsonBodyGuard(options.maxBodyBytes, routes)
  const rateLimit = options.rateLimit === undefined ? undefined : ipRateLimit(options.rateLimit, routes)
  return HttpApiBuilder.serve(accessLog(routes)).pipe(
    HttpServer.withLogAddress,
    Layer.provide(HttpApiBuilder.middlewareOpenApi({ path: OPENAPI_PATH })),
    Layer.provide(
      rateLimit === undefined
        ? HttpApiBuilder.middleware((app) => renderFailures(bodyGuard(app)), { withContext: true })
        : HttpApiBuilder.middleware(
            // The limit runs first so that a refused client's body is never read.
            Effect.map(rateLimit, (limit) => (app: HttpApp.Default) => renderFailures(limit(bodyGuard(app)))),
            { withContext: true }
          )
    ),
    Layer.provide(HttpApiBuilder.api(api).pipe(Layer.provide(handlers))),
    Layer.provideMerge(NodeHttpServer.layer(createServer, { host: options.host, port: options.port }))
  )
}

/** `http://host:port` of a running server (port 0 in the settings picks a free one). */
export const serverUrl = Effect.map(HttpServer.HttpServer, (server) => {
  const address = server.address
  return address._tag === "TcpAddress"
    ? `http://${address.hostname.includes(":") ? `[${address.hostname}]` : address.hostname}:${address.port}`
    : `http+unix://${address.path}`
})
