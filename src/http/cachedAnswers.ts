/**
 * Answers served again without the HttpApi stack: a handler whose answer is the same for every
 * request with the same target until some time (a cached quote, docs/relayer.md §4: every client
 * asking the same question in the quote's lifetime gets the same answer) marks it with
 * `cacheAnswer`; the server (src/http/server.ts's middleware) keeps the bytes it answered and,
 * until then, answers a `GET` with exactly that request target from them before a fiber, the
 * router or a schema runs. The rate limit, the metrics and the access log are those of the full
 * path (`serveRequests`); anything the cache cannot answer as the full path would (another
 * method, a request body, another spelling of the target, an answer no longer current) takes the
 * full path.
 *
 * Keys are request targets, which carry the query: they stay in this process's memory, never in a
 * log line or a metric label.
 */
import type { IncomingMessage, ServerResponse } from "node:http"
import * as Cookies from "@effect/platform/Cookies"
import type * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { type Fiber, FiberRef } from "effect"
import { hasBody } from "./body.js"

/** What a handler says about its answer: how long it may be served again, and what then counts it. */
export interface CacheableAnswer {
  /** Unix milliseconds; the answer is served again only before this. */
  readonly untilMs: number
  /** Whether the answer is still the one the handler would give (checked on every replay). */
  readonly current: () => boolean
  /** The handler's own bookkeeping for an answer it did not compute again (its metrics). */
  readonly onReplay: () => void
}

/** Set by a handler for its own request; every request runs in a fiber of its own, which starts with none. */
export const cacheableAnswer = FiberRef.unsafeMake<CacheableAnswer | undefined>(undefined)

/** Marks this request's successful answer as servable again for the same request target. */
export const cacheAnswer = (answer: CacheableAnswer) => FiberRef.set(cacheableAnswer, answer)

/** What the full path knew of the request it answered, for the replays' metrics and log lines. */
export interface AnsweredBy {
  /** The route template. */
  readonly route: string
  /** The route's outcome, for routes that count outcomes (src/http/outcomes.ts). */
  readonly outcome: string
  /** The fiber that answered: its loggers, log settings and metric labels are the server's. */
  readonly fiber: Fiber.RuntimeFiber<unknown, unknown>
}

export interface CachedAnswer extends CacheableAnswer, AnsweredBy {
  /** Its body is a `Uint8Array` (`keep` keeps no other). */
  readonly response: HttpServerResponse.HttpServerResponse
}

/**
 * Enough for every distinct question a busy relayer is asked at once; a client that varies the
 * spelling of its targets only replaces entries (oldest first), it cannot grow the map.
 */
export const CACHED_ANSWERS_CAPACITY = 1_024

export interface CachedAnswers {
  /**
   * Keeps the response to a request (its method and target) if it is an answer the cache can
   * replay byte for byte: a 200 to a `GET`, its body in memory, no cookie, not yet expired.
   */
  readonly keep: (
    request: { readonly method: string; readonly url: string },
    response: HttpServerResponse.HttpServerResponse,
    answer: CacheableAnswer,
    answeredBy: AnsweredBy
  ) => void
  /** The answer to replay for a request, if there is one (the checks of the module header). */
  readonly find: (request: IncomingMessage) => CachedAnswer | undefined
}

export const makeCachedAnswers = (capacity = CACHED_ANSWERS_CAPACITY): CachedAnswers => {
  const answers = new Map<string, CachedAnswer>()
  return {
    keep: (request, response, answer, answeredBy) => {
      if (request.method !== "GET" || response.status !== 200) return
      // Only a body held in memory, with no cookie: what is replayed is exactly what was written.
      if (response.body._tag !== "Uint8Array" || !Cookies.isEmpty(response.cookies)) return
      if (Date.now() >= answer.untilMs) return
      const target = request.url
      answers.delete(target)
      if (answers.size >= capacity) {
        const oldest = answers.keys().next()
        if (oldest.done !== true) answers.delete(oldest.value)
      }
      answers.set(target, { ...answer, ...answeredBy, response })
    },
    find: (request) => {
      if (request.method !== "GET" || request.url === undefined) return undefined
      const answer = answers.get(request.url)
      if (answer === undefined) return undefined
      if (Date.now() >= answer.untilMs || !answer.current()) {
        answers.delete(request.url)
        return undefined
      }
      // A GET with a body is the full path's to judge (the body guard).
      if (hasBody(request.headers)) return undefined
      return answer
    }
  }
}

/**
 * Writes a response whose body is held in memory (a kept answer, a rendered refusal) as the
 * platform's Node server writes a `Uint8Array` body; any other body is not written.
 */
export const writeAnswer = (to: ServerResponse, response: HttpServerResponse.HttpServerResponse): void => {
  to.writeHead(response.status, response.headers)
  to.end(response.body._tag === "Uint8Array" ? response.body.body : undefined)
}
