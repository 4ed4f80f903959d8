/**
 * What both servers share: the HttpApi served by Node with the JSON body guard, an optional
 * per-IP rate limit, the error renderer, request metrics, a redacted access log and the OpenAPI
 * document.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { Duplex } from "node:stream"
import type * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import type * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import type * as HttpApp from "@effect/platform/HttpApp"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Cause, Context, Effect, FiberRef, Layer, Metric } from "effect"
import { unsafeLogInfo } from "../logging.js"
import { jsonBodyGuard } from "./body.js"
import { counter, recordRequest, taggedOnce } from "./metrics.js"
import { type RouteOutcomes, reportedOutcome } from "./outcomes.js"
import { type IpRateLimitOptions, ipRateLimit } from "./rateLimit.js"
import { failureCode, renderCause } from "./render.js"
import {
  OPENAPI_PATH,
  type RouteTemplate,
  resolveRoute,
  routeLabel,
  routeTemplates,
  strictRouter
} from "./routes.js"

const STATUS_CLIENT_CLOSED = 499

interface ServeRequestOptions {
  readonly maxBodyBytes: number
  readonly rateLimit?: IpRateLimitOptions | undefined
  readonly outcomes?: RouteOutcomes | undefined
}

/**
 * Everything the services do around the API's router, as one HttpApi middleware: decides the
 * request's route once (`resolveRoute`), charges the per-IP rate limit (before the body is read),
 * checks the JSON body, runs the router, counts the route's outcome, renders every failure as the
 * service's JSON error (`renderCause`), and writes the access log and metrics: method, route
 * template, status and duration only. No IP, query string, id, address, signature or token ever
 * reaches a log line or a metric label.
 *
 * One middleware with one match on the result instead of a layer per concern: each layer was
 * several more Effect steps on every request. The checks, metrics and the log line are plain
 * function calls on the request's fiber.
 */
const serveRequests = (routes: ReadonlyArray<RouteTemplate>, options: ServeRequestOptions) => {
  const guardBody = jsonBodyGuard(options.maxBodyBytes)
  const limit = options.rateLimit === undefined ? undefined : ipRateLimit(options.rateLimit)
  const outcomes = options.outcomes ?? {}
  return (app: HttpApp.Default): HttpApp.Default =>
    Effect.withFiberRuntime((fiber) => {
      const request = Context.unsafeGet(fiber.currentContext, HttpServerRequest.HttpServerRequest)
      const started = process.hrtime.bigint()
      const decision = resolveRoute(routes, request.method, request.url)
      const route = routeLabel(decision)
      const finish = (status: number) => {
        const seconds = Number(process.hrtime.bigint() - started) / 1e9
        recordRequest(
          { route, method: request.method, status },
          seconds,
          fiber.getFiberRef(FiberRef.currentMetricLabels)
        )
        unsafeLogInfo(fiber, "request", {
          method: request.method,
          route,
          status,
          duration_ms: Math.round(seconds * 1e6) / 1e3
        })
      }
      // Outcomes count the requests that reached the route's handler.
      const record = decision._tag === "Route" ? outcomes[decision.template] : undefined
      let entered = false
      const enter = () => {
        entered = true
        return app
      }
      const countOutcome = (outcome: string) => {
        if (!entered || record === undefined) return
        record(outcome, request.url.split("?", 1)[0] ?? "").unsafeUpdate(
          1,
          fiber.getFiberRef(FiberRef.currentMetricLabels)
        )
      }
      const refused = limit?.(request, route)
      const answer: HttpApp.Default<unknown> =
        refused === undefined ? guardBody(request, decision, enter) : Effect.fail(refused)
      return Effect.matchCauseEffect(answer, {
        onSuccess: (response) => {
          countOutcome(fiber.getFiberRef(reportedOutcome) ?? "ok")
          finish(response.status)
          return Effect.succeed(response)
        },
        onFailure: (cause) => {
          if (Cause.isInterruptedOnly(cause)) {
            finish(STATUS_CLIENT_CLOSED)
            return Effect.interrupt
          }
          const code = failureCode(cause)
          if (code !== undefined) countOutcome(code)
          return Effect.tap(renderCause(cause), (response) => finish(response.status))
        }
      })
    })
}

/** How long the server waits on a client; Node's defaults hold a stalled request for minutes. */
export interface ServerTimeouts {
  /** Until the request's headers are complete. */
  readonly headersMs: number
  /** Until the whole request, body included, has arrived. */
  readonly requestMs: number
  /** An idle keep-alive connection is closed after this. */
  readonly keepAliveMs: number
}

export const defaultServerTimeouts: ServerTimeouts = {
  headersMs: 10_000,
  requestMs: 30_000,
  keepAliveMs: 5_000
}

export const httpClientErrors = counter(
  "http_client_errors_total",
  "Connections answered by the server itself before a request reached a route, by reason (timeout, malformed, header_overflow, reset)"
)
const clientErrorCounter = taggedOnce(httpClientErrors)

type ClientErrorReason = "timeout" | "malformed" | "header_overflow" | "reset"

const clientErrorReason = (code: string | undefined): ClientErrorReason => {
  switch (code) {
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return "timeout"
    case "HPE_HEADER_OVERFLOW":
      return "header_overflow"
    case "ECONNRESET":
      return "reset"
    default:
      return "malformed"
  }
}

const clientErrorAnswers: Record<Exclude<ClientErrorReason, "reset">, readonly [number, string, string]> = {
  timeout: [408, "Request Timeout", "the request did not arrive in time"],
  header_overflow: [431, "Request Header Fields Too Large", "request headers are too large"],
  malformed: [400, "Bad Request", "malformed HTTP request"]
}

/**
 * What Node does by default on a client error (a timed-out, malformed or oversized request), with
 * the service's JSON body and a count by reason. Nothing of the request is logged.
 */
const answerClientError = (error: Error & { code?: string; rawPacket?: unknown }, socket: Duplex) => {
  const reason = clientErrorReason(error.code)
  Effect.runSync(Metric.increment(clientErrorCounter({ reason })))
  const inFlight = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage
  if (reason === "reset" || !socket.writable || inFlight?.headersSent === true) {
    socket.destroy()
    return
  }
  const [status, text, message] = clientErrorAnswers[reason]
  // An answer to HEAD has no body, even one refused before it was parsed.
  const head =
    Buffer.isBuffer(error.rawPacket) && error.rawPacket.subarray(0, 5).toString("latin1") === "HEAD "
  const body = JSON.stringify({ error: message, code: "bad_request" })
  socket.end(
    `HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${head ? "" : body}`,
    () => socket.destroy()
  )
}

const nodeServer = (timeouts: ServerTimeouts) => (): Server => {
  const requestMs = timeouts.requestMs
  const headersMs = Math.min(timeouts.headersMs, requestMs)
  const server = createServer({
    headersTimeout: headersMs,
    requestTimeout: requestMs,
    keepAliveTimeout: timeouts.keepAliveMs,
    // Node looks for expired requests only this often (every 30 s by default).
    connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(headersMs / 4)))
  })
  server.on("clientError", answerClientError)
  holdUntilServed(server)
  return server
}

/**
 * The socket is bound when the server layer is built, before the handlers' layers are: a request
 * that arrives in between would find no `request` listener and never be answered. Such requests
 * wait here and are handed to the service's listener as soon as it is installed.
 */
const holdUntilServed = (server: Server): void => {
  const waiting: Array<readonly [IncomingMessage, ServerResponse]> = []
  const hold = (req: IncomingMessage, res: ServerResponse) => {
    if (server.listenerCount("request") === 1) waiting.push([req, res])
  }
  server.on("request", hold)
  const onListener = (event: string | symbol, listener: (...args: Array<unknown>) => void) => {
    if (event !== "request" || listener === hold) return
    server.off("newListener", onListener)
    // After `on` returns, so the service's listener is in place for whatever comes next.
    setImmediate(() => {
      server.off("request", hold)
      for (const [req, res] of waiting.splice(0)) listener.call(server, req, res)
    })
  }
  server.on("newListener", onListener)
}

export interface ServeOptions {
  readonly host: string
  readonly port: number
  readonly maxBodyBytes: number
  /** Per-client-IP token bucket, charged before the body is read; none when absent. */
  readonly rateLimit?: IpRateLimitOptions | undefined
  readonly timeouts?: ServerTimeouts | undefined
  /** Outcome counters by route template (src/http/outcomes.ts). */
  readonly outcomes?: RouteOutcomes | undefined
}

/** Where and how a service listens, from the settings every service shares (src/config/settings.ts). */
export const listenOptionsOf = (settings: {
  readonly host: string
  readonly port: number
  readonly maxBodyBytes: number
  readonly httpHeadersTimeoutMs: number
  readonly httpRequestTimeoutMs: number
  readonly httpKeepAliveTimeoutMs: number
}): Pick<ServeOptions, "host" | "port" | "maxBodyBytes" | "timeouts"> => ({
  host: settings.host,
  port: settings.port,
  maxBodyBytes: settings.maxBodyBytes,
  timeouts: {
    headersMs: settings.httpHeadersTimeoutMs,
    requestMs: settings.httpRequestTimeoutMs,
    keepAliveMs: settings.httpKeepAliveTimeoutMs
  }
})

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
  return HttpApiBuilder.serve().pipe(
    // No span per request: the services install no tracer to export one to, and the platform's
    // server span (URL, headers and client address as attributes) is built on every request.
    HttpMiddleware.withTracerDisabledWhen(() => true),
    HttpServer.withLogAddress,
    Layer.provide(HttpApiBuilder.middlewareOpenApi({ path: OPENAPI_PATH })),
    Layer.provide(HttpApiBuilder.middleware(serveRequests(routes, options))),
    Layer.provide(HttpApiBuilder.api(api).pipe(Layer.provide(handlers))),
    Layer.provide(strictRouter),
    Layer.provideMerge(
      NodeHttpServer.layer(nodeServer(options.timeouts ?? defaultServerTimeouts), {
        host: options.host,
        port: options.port
      })
    )
  )
}

/** `http://host:port` of a running server (port 0 in the settings picks a free one). */
export const serverUrl = Effect.map(HttpServer.HttpServer, (server) => {
  const address = server.address
  return address._tag === "TcpAddress"
    ? `http://${address.hostname.includes(":") ? `[${address.hostname}]` : address.hostname}:${address.port}`
    : `http+unix://${address.path}`
})
