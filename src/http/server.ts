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
import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import type * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Cause, Context, Effect, type Fiber, FiberId, FiberRef, Layer, Metric, Option } from "effect"
import { unsafeLogInfo } from "../logging.js"
import { jsonBodyGuard } from "./body.js"
import { type CachedAnswers, cacheableAnswer, makeCachedAnswers, writeAnswer } from "./cachedAnswers.js"
import { corsStep } from "./cors.js"
import {
  counter,
  processSeriesAtZero,
  recordRequest,
  requestSeriesAtZero,
  type SeriesAtZero,
  taggedOnce,
  valuesOf
} from "./metrics.js"
import { type OutcomeRecorder, type RouteOutcomes, reportedOutcome } from "./outcomes.js"
import { type IpLimit, type IpRateLimitOptions, ipRateLimit, rateLimitedSeriesAtZero } from "./rateLimit.js"
import { failureCode, renderApiError, renderCause } from "./render.js"
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
  readonly limit: IpLimit | undefined
  readonly outcomes: RouteOutcomes
  readonly answers: CachedAnswers
}

/** The access log line and the request metrics of one answered request, on either path. */
const requestDone = (
  fiber: Fiber.RuntimeFiber<unknown, unknown>,
  labels: { readonly route: string; readonly method: string; readonly status: number },
  started: bigint,
  fiberId?: FiberId.FiberId
) => {
  const seconds = Number(process.hrtime.bigint() - started) / 1e9
  recordRequest(labels, seconds, fiber.getFiberRef(FiberRef.currentMetricLabels))
  unsafeLogInfo(
    fiber,
    "request",
    {
      method: labels.method,
      route: labels.route,
      status: labels.status,
      duration_ms: Math.round(seconds * 1e6) / 1e3
    },
    fiberId
  )
}

/**
 * Bytes of a response's body as it will be sent, for answers weighed by the per-IP limit
 * (`IpRateLimitOptions.bytesPerToken`); 0 when the body declares no length.
 */
const bodyBytes = (response: HttpServerResponse.HttpServerResponse): number => {
  const body = response.body
  switch (body._tag) {
    case "Uint8Array":
      return body.body.length
    case "Raw":
    case "Stream":
      return body.contentLength ?? 0
    default:
      return 0
  }
}

/** Counts one outcome of a route that counts them (src/http/outcomes.ts), by the request's path. */
const recordOutcome = (
  record: OutcomeRecorder | undefined,
  url: string,
  outcome: string,
  fiber: Fiber.RuntimeFiber<unknown, unknown>
) =>
  record?.(outcome, url.split("?", 1)[0] ?? "").unsafeUpdate(
    1,
    fiber.getFiberRef(FiberRef.currentMetricLabels)
  )

/**
 * Everything the services do around the API's router, as one HttpApi middleware: decides the
 * request's route once (`resolveRoute`), charges the per-IP rate limit (before the body is read),
 * checks the JSON body, runs the router, counts the route's outcome, renders every failure as the
 * service's JSON error (`renderCause`), and writes the access log and metrics: method, route
 * template, status and duration only. No IP, query string, id, address, signature or token ever
 * reaches a log line or a metric label. An answer its handler marked cacheable is kept for
 * `replayCachedAnswers`.
 *
 * One middleware with one match on the result instead of a layer per concern: each layer was
 * several more Effect steps on every request. The checks, metrics and the log line are plain
 * function calls on the request's fiber.
 */
const serveRequests = (routes: ReadonlyArray<RouteTemplate>, options: ServeRequestOptions) => {
  const guardBody = jsonBodyGuard(options.maxBodyBytes)
  const { limit, outcomes, answers } = options
  return (app: HttpApp.Default): HttpApp.Default =>
    Effect.withFiberRuntime((fiber) => {
      const request = Context.unsafeGet(fiber.currentContext, HttpServerRequest.HttpServerRequest)
      const started = process.hrtime.bigint()
      const decision = resolveRoute(routes, request.method, request.url)
      const route = routeLabel(decision)
      const finish = (status: number) =>
        requestDone(fiber, { route, method: request.method, status }, started)
      // Outcomes count the requests that reached the route's handler.
      const record = decision._tag === "Route" ? outcomes[decision.template] : undefined
      let entered = false
      const enter = () => {
        entered = true
        return app
      }
      const countOutcome = (outcome: string) => {
        if (entered) recordOutcome(record, request.url, outcome, fiber)
      }
      const remoteAddress = Option.getOrUndefined(request.remoteAddress)
      const refused = limit?.arrive(request.method, route, remoteAddress, request.headers["x-forwarded-for"])
      const answer: HttpApp.Default<unknown> =
        refused === undefined ? guardBody(request, decision, enter) : Effect.fail(refused)
      return Effect.matchCauseEffect(answer, {
        onSuccess: (response) => {
          const outcome = fiber.getFiberRef(reportedOutcome) ?? "ok"
          // A heavy answer costs what it weighs, charged before a byte of it is sent (docs/relayer.md §8).
          if (limit?.weighs(request.method, route) === true)
            limit.answered(
              request.method,
              route,
              remoteAddress,
              request.headers["x-forwarded-for"],
              bodyBytes(response)
            )
          countOutcome(outcome)
          finish(response.status)
          const cacheable = fiber.getFiberRef(cacheableAnswer)
          // What the platform would still do to the response (a pre-response handler) is not in the bytes kept.
          if (
            cacheable !== undefined &&
            entered &&
            Option.isNone(fiber.getFiberRef(HttpApp.currentPreResponseHandlers))
          )
            answers.keep(request, response, cacheable, { route, outcome, fiber })
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

/**
 * Answers a request from the cached answers (src/http/cachedAnswers.ts) before the platform's
 * handler sees it, as the full path would: the rate limit charged the same, a refusal rendered by
 * the same renderer, the route's outcome, metrics and access log line the same. False: not
 * answered, the full path's.
 */
const replayCachedAnswers =
  (options: ServeRequestOptions) =>
  (request: IncomingMessage, response: ServerResponse): boolean => {
    const answer = options.answers.find(request)
    if (answer === undefined) return false
    const started = process.hrtime.bigint()
    const labels = { route: answer.route, method: "GET" }
    const forwardedFor = request.headers["x-forwarded-for"]
    const forwarded = Array.isArray(forwardedFor) ? forwardedFor.join(", ") : forwardedFor
    const limit = options.limit
    const refused = limit?.arrive("GET", answer.route, request.socket.remoteAddress, forwarded)
    // A fiber id of its own, as each request of the full path has.
    const fiberId = FiberId.unsafeMake()
    if (refused !== undefined) {
      const refusal = renderApiError(refused)
      writeAnswer(response, refusal)
      requestDone(answer.fiber, { ...labels, status: refusal.status }, started, fiberId)
      return true
    }
    if (limit?.weighs("GET", answer.route) === true)
      limit.answered("GET", answer.route, request.socket.remoteAddress, forwarded, bodyBytes(answer.response))
    writeAnswer(response, answer.response)
    answer.onReplay()
    recordOutcome(options.outcomes[answer.route], request.url ?? "", answer.outcome, answer.fiber)
    requestDone(answer.fiber, { ...labels, status: answer.response.status }, started, fiberId)
    return true
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
  "Connections answered by the server itself before a request reached a route, by reason (timeout, malformed, header_overflow, expectation, reset)"
)
const clientErrorCounter = taggedOnce(httpClientErrors)

type ClientErrorReason = "timeout" | "malformed" | "header_overflow" | "expectation" | "reset"

const clientErrorReasons = valuesOf<ClientErrorReason>({
  timeout: true,
  malformed: true,
  header_overflow: true,
  expectation: true,
  reset: true
})

/**
 * The server's own counters and histogram of a service serving `api`, to export at 0 from start-up
 * (docs/operations.md "Metrics reference"): requests by route and method, client errors by reason,
 * rate-limit refusals by the service's scopes, and the process's CPU time.
 */
export const serverSeriesAtZero = (
  api: HttpApi.HttpApi.Any,
  rateLimitScopes: ReadonlyArray<string>
): ReadonlyArray<SeriesAtZero> => [
  ...requestSeriesAtZero(routeTemplates(api)),
  ...clientErrorReasons.map((reason) => clientErrorCounter({ reason })),
  ...rateLimitedSeriesAtZero(rateLimitScopes),
  ...processSeriesAtZero
]

const clientErrorReason = (code: string | undefined): Exclude<ClientErrorReason, "expectation"> => {
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

const clientErrorAnswers: Record<
  Exclude<ClientErrorReason, "reset" | "expectation">,
  readonly [number, string, string]
> = {
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

/**
 * A request Node parsed but the server answers itself, with the service's JSON body and the
 * connection closed (its body, if any, is not read): the status and reason.
 */
const answerRequestItself = (
  response: ServerResponse,
  reason: Exclude<ClientErrorReason, "reset">,
  status: number,
  message: string
): void => {
  Effect.runSync(Metric.increment(clientErrorCounter({ reason })))
  const body = JSON.stringify({ error: message, code: "bad_request" })
  response.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
    connection: "close"
  })
  // An answer to HEAD has no body (Node writes none).
  response.end(body)
}

/**
 * What Node's parser lets through that HTTP/1.1 refuses (docs/operations.md "HTTP behaviour"): a
 * request line without a version (Node takes it for HTTP/0.9, which has no headers and no
 * status line) or with a version other than 1.0 and 1.1, and an HTTP/1.1 request without `Host`
 * (Node's own check answers it with an empty body). Answered 400 here; true then.
 */
const refusedRequestLine = (request: IncomingMessage, response: ServerResponse): boolean => {
  if (request.httpVersionMajor !== 1) {
    answerRequestItself(response, "malformed", 400, "the request line must end with HTTP/1.1 or HTTP/1.0")
    return true
  }
  if (request.httpVersionMinor === 1 && request.headers.host === undefined) {
    answerRequestItself(response, "malformed", 400, "an HTTP/1.1 request must have a Host header")
    return true
  }
  return false
}

const nodeServer =
  (
    timeouts: ServerTimeouts,
    replay: (request: IncomingMessage, response: ServerResponse) => boolean,
    cors: (request: IncomingMessage, response: ServerResponse) => boolean
  ) =>
  (): Server => {
    const requestMs = timeouts.requestMs
    const headersMs = Math.min(timeouts.headersMs, requestMs)
    const server = createServer({
      headersTimeout: headersMs,
      requestTimeout: requestMs,
      keepAliveTimeout: timeouts.keepAliveMs,
      // Node looks for expired requests only this often (every 30 s by default).
      connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(headersMs / 4))),
      // Checked in `refusedRequestLine`, which answers with the service's JSON body.
      requireHostHeader: false
    })
    server.on("clientError", answerClientError)
    // Any `Expect` but `100-continue` (which Node answers itself); Node's own 417 has an empty body.
    server.on("checkExpectation", (_request: IncomingMessage, response: ServerResponse) =>
      answerRequestItself(response, "expectation", 417, "only Expect: 100-continue is supported")
    )
    holdUntilServed(server)
    // Before any `request` listener: a refused or replayed request never reaches the platform's handler.
    // The replay serves bytes a route already answered (cachedAnswers.ts); a route that renders
    // its own body for HttpApiBuilder uses precomputed.ts instead (docs/architecture.md).
    const emit = server.emit
    server.emit = function (this: Server, event: string | symbol, ...args: Array<unknown>) {
      if (
        event === "request" &&
        (refusedRequestLine(args[0] as IncomingMessage, args[1] as ServerResponse) ||
          cors(args[0] as IncomingMessage, args[1] as ServerResponse) ||
          replay(args[0] as IncomingMessage, args[1] as ServerResponse))
      )
        return true
      return (emit as (this: Server, ...all: Array<unknown>) => boolean).call(this, event, ...args)
    } as Server["emit"]
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
  /** Browser origins allowed to call the service (src/http/cors.ts); none when absent. */
  readonly corsAllowedOrigins?: ReadonlyArray<string> | undefined
}

/** Where and how a service listens, from the settings every service shares (src/config/settings.ts). */
export const listenOptionsOf = (settings: {
  readonly host: string
  readonly port: number
  readonly maxBodyBytes: number
  readonly httpHeadersTimeoutMs: number
  readonly httpRequestTimeoutMs: number
  readonly httpKeepAliveTimeoutMs: number
  readonly corsAllowedOrigins?: ReadonlyArray<string> | undefined
}): Pick<ServeOptions, "host" | "port" | "maxBodyBytes" | "timeouts" | "corsAllowedOrigins"> => ({
  host: settings.host,
  corsAllowedOrigins: settings.corsAllowedOrigins,
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
  const requests: ServeRequestOptions = {
    maxBodyBytes: options.maxBodyBytes,
    limit: options.rateLimit === undefined ? undefined : ipRateLimit(options.rateLimit),
    outcomes: options.outcomes ?? {},
    answers: makeCachedAnswers()
  }
  return HttpApiBuilder.serve().pipe(
    // No span per request: the services install no tracer to export one to, and the platform's
    // server span (URL, headers and client address as attributes) is built on every request.
    HttpMiddleware.withTracerDisabledWhen(() => true),
    HttpServer.withLogAddress,
    Layer.provide(HttpApiBuilder.middlewareOpenApi({ path: OPENAPI_PATH })),
    Layer.provide(HttpApiBuilder.middleware(serveRequests(routes, requests))),
    Layer.provide(HttpApiBuilder.api(api).pipe(Layer.provide(handlers))),
    Layer.provide(strictRouter),
    Layer.provideMerge(
      NodeHttpServer.layer(
        nodeServer(
          options.timeouts ?? defaultServerTimeouts,
          replayCachedAnswers(requests),
          corsStep(options.corsAllowedOrigins ?? [], (response, message) =>
            answerRequestItself(response, "malformed", 400, message)
          )
        ),
        {
          host: options.host,
          port: options.port
        }
      )
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
