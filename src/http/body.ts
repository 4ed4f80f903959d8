/**
 * Request bodies: JSON only, at most `maxBodyBytes`, nested at most `MAX_JSON_DEPTH` deep, sent as
 * they are (no `Content-Encoding`, no transfer coding but `chunked`: 415), with no integer beyond
 * what a JSON number holds exactly (docs/protocol.md §7). The
 * limit is enforced while the body streams in, so an oversized request is refused without ever
 * being held in memory: a declared `Content-Length` above the limit is refused before reading a
 * byte (whatever the path), a chunked body as soon as the running count passes it. Requests for no
 * route are answered 404/405 here.
 */
import type { IncomingMessage } from "node:http"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import type * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import { Effect, Stream } from "effect"
import {
  BadRequest,
  MethodNotAllowed,
  NotFound,
  PayloadTooLarge,
  UnsupportedMediaType
} from "../../schema/errors.js"
import type { RouteDecision } from "./routes.js"

/**
 * No request body of either service nests deeper than a few levels; refusing deeper ones before
 * parsing keeps recursive work (schema decoding, error formatting) bounded.
 */
export const MAX_JSON_DEPTH = 32

const OPENING_BRACKETS = /[[{]/g

/**
 * Whether `text` nests arrays and objects deeper than `max`, counted without parsing (brackets
 * inside strings do not count). Malformed text is left to `JSON.parse`.
 */
export const jsonNestsDeeperThan = (text: string, max: number): boolean => {
  // Depth never exceeds the number of opening brackets: most bodies are settled by one native scan.
  if ((text.match(OPENING_BRACKETS)?.length ?? 0) <= max) return false
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 0x5c)
        i++ // backslash: skip the escaped character
      else if (c === 0x22) inString = false
    } else if (c === 0x22) inString = true
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true
    } else if (c === 0x5d || c === 0x7d) depth--
  }
  return false
}

/**
 * The first number in `value` (a parsed body) that is not exactly the integer its literal wrote:
 * beyond ±(2^53 − 1) every double is an integer and most are a rounding of the digits sent (and
 * a literal too large for a double is `Infinity`). Its path, or none. A walk over the parsed
 * values, not the text: digits inside strings (decimal amounts) are no numbers.
 */
const unsafeNumberIn = (
  value: unknown
): { readonly path: ReadonlyArray<string>; readonly value: number } | undefined => {
  if (typeof value === "number")
    return value > Number.MAX_SAFE_INTEGER || value < -Number.MAX_SAFE_INTEGER
      ? { path: [], value }
      : undefined
  if (value === null || typeof value !== "object") return undefined
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = unsafeNumberIn(value[i])
      if (found !== undefined) return { path: [String(i), ...found.path], value: found.value }
    }
    return undefined
  }
  for (const key in value) {
    const found = unsafeNumberIn((value as Record<string, unknown>)[key])
    if (found !== undefined) return { path: [key, ...found.path], value: found.value }
  }
  return undefined
}

/** A JSON string (skipped) or a number literal, outside strings. */
const JSON_TOKENS = /"(?:[^"\\]|\\.)*"|-?\d[\d.eE+-]*/g

/** The number literal of `text` that parses to `value`, as it was written. */
const literalOf = (text: string, value: number): string => {
  for (const [token] of text.matchAll(JSON_TOKENS))
    if (!token.startsWith('"') && Object.is(Number(token), value)) return token
  return String(value)
}

/** How much of a number literal or a field name the refusal quotes (as render.ts does). */
const QUOTED_LITERAL_CHARS = 80
const QUOTED_KEY_CHARS = 40

const cut = (text: string, max: number): string => (text.length <= max ? text : `${text.slice(0, max)}…`)

const unsafeNumberRefusal = (text: string, found: NonNullable<ReturnType<typeof unsafeNumberIn>>) => {
  const path = found.path.length > 0 ? found.path.map((key) => cut(key, QUOTED_KEY_CHARS)).join(".") : "body"
  return new BadRequest({
    message: `${path}: ${cut(literalOf(text, found.value), QUOTED_LITERAL_CHARS)} is outside the safe integer range (at most ${Number.MAX_SAFE_INTEGER} either side of 0)`
  })
}

/**
 * A body sent encoded: any `Content-Encoding` but `identity`, a `Transfer-Encoding` but plain
 * `chunked` (Node's parser removes the chunking and hands on the rest as it came), the refusal;
 * none for a body sent as it is.
 */
const encodingRefusal = (headers: {
  readonly [name: string]: string | ReadonlyArray<string> | undefined
}): UnsupportedMediaType | undefined => {
  const content = headers["content-encoding"]
  if (content !== undefined && String(content).trim().toLowerCase() !== "identity")
    return new UnsupportedMediaType({ message: "request bodies are taken without Content-Encoding" })
  const transfer = headers["transfer-encoding"]
  if (transfer !== undefined && String(transfer).trim().toLowerCase() !== "chunked")
    return new UnsupportedMediaType({
      message: "request bodies are taken with no transfer coding but chunked"
    })
  return undefined
}

const methodsWithBody = new Set(["POST", "PUT", "PATCH"])

const isJsonContentType = (value: string | undefined): boolean => {
  if (value === undefined) return false
  const mediaType = value.split(";")[0]?.trim().toLowerCase()
  return mediaType === "application/json"
}

const readLimited = (source: IncomingMessage, maxBytes: number) =>
  Effect.async<Uint8Array, PayloadTooLarge | BadRequest>((resume) => {
    const chunks: Array<Buffer> = []
    let received = 0
    let settled = false
    const finish = (effect: Effect.Effect<Uint8Array, PayloadTooLarge | BadRequest>) => {
      if (settled) return
      settled = true
      source.off("data", onData)
      source.off("end", onEnd)
      source.off("error", onError)
      resume(effect)
    }
    const onData = (chunk: Buffer) => {
      received += chunk.length
      if (received > maxBytes) {
        chunks.length = 0
        // Stop consuming; the response closes the connection.
        source.pause()
        finish(Effect.fail(tooLarge(maxBytes)))
        return
      }
      chunks.push(chunk)
    }
    const onEnd = () => finish(Effect.succeed(Buffer.concat(chunks)))
    const onError = () => finish(Effect.fail(new BadRequest({ message: "request body could not be read" })))
    source.on("data", onData)
    source.once("end", onEnd)
    source.once("error", onError)
  })

const tooLarge = (maxBytes: number) =>
  new PayloadTooLarge({ message: `request body is larger than ${maxBytes} bytes` })

/**
 * The same request with its body already read: later readers (the endpoint's schema decoding)
 * get the buffered bytes instead of a drained stream, and the guard's parse of them (schema
 * decoding reads it and leaves it as it is). The readers are own properties of the request's
 * copy (`modify`), which shadow its class's accessors. Not an object literal with the request as
 * its prototype: V8 turns every object that becomes a prototype into a prototype map, a new one
 * per request, which cost the commitment route about 10 % of its CPU.
 */
const withBufferedBody = (
  request: HttpServerRequest.HttpServerRequest,
  text: string,
  body: Uint8Array,
  parsed: unknown
): HttpServerRequest.HttpServerRequest =>
  Object.defineProperties(request.modify({}), {
    text: { value: Effect.succeed(text) },
    json: { value: Effect.succeed(parsed) },
    // A copy each time it is read, as the request's own arrayBuffer would read the stream.
    arrayBuffer: { value: Effect.sync(() => body.slice().buffer) },
    stream: { value: Stream.succeed(body) }
  })

/** Stateless between calls (no `stream` option), so one serves every request. */
const utf8 = new TextDecoder("utf-8", { fatal: true })

const malformed = new BadRequest({ message: "request body is not valid JSON" })

/** Whether a request with these headers comes with a body. */
export const hasBody = (headers: {
  readonly [name: string]: string | ReadonlyArray<string> | undefined
}): boolean => {
  const length = headers["content-length"]
  return (length !== undefined && length !== "0") || headers["transfer-encoding"] !== undefined
}

/** 404 or 405 for a request that is for no route. */
const refusalOf = (decision: Exclude<RouteDecision, { _tag: "Route" }>) =>
  decision._tag === "WrongMethod"
    ? new MethodNotAllowed({
        message: `this route answers ${decision.allow.join(", ")}`,
        allow: decision.allow
      })
    : new NotFound({ message: "no such route" })

/**
 * Checks and buffers the body before routing decodes it, for the server's middleware
 * (src/http/server.ts): the request, its route decision, and `enter`, which gives the app to run
 * once the body is accepted (called only then). A read without a body goes straight to the app.
 */
export const jsonBodyGuard =
  (maxBodyBytes: number) =>
  <E, R>(
    request: HttpServerRequest.HttpServerRequest,
    decision: RouteDecision,
    enter: () => Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
  ): Effect.Effect<HttpServerResponse.HttpServerResponse, E | BodyRefusal, R> => {
    const declared = request.headers["content-length"]
    if (declared !== undefined && Number(declared) > maxBodyBytes) return Effect.fail(tooLarge(maxBodyBytes))
    if (decision._tag !== "Route") {
      // Its body, up to the limit, is read and dropped so the connection closes cleanly (a
      // socket closed on unread bytes resets, and the client may never see the answer).
      const refusal = Effect.fail(refusalOf(decision))
      return hasBody(request.headers)
        ? Effect.zipRight(
            readLimited(NodeHttpServerRequest.toIncomingMessage(request), maxBodyBytes),
            refusal
          )
        : refusal
    }
    if (!methodsWithBody.has(request.method)) {
      // A read takes no body; one sent anyway is drained within the limit, never buffered whole.
      return hasBody(request.headers)
        ? Effect.flatMap(readLimited(NodeHttpServerRequest.toIncomingMessage(request), maxBodyBytes), enter)
        : enter()
    }
    const encoded = encodingRefusal(request.headers)
    if (encoded !== undefined)
      // Read within the limit and dropped, as for no route, so the refusal reaches the client.
      return Effect.zipRight(
        readLimited(NodeHttpServerRequest.toIncomingMessage(request), maxBodyBytes),
        Effect.fail(encoded)
      )
    if (!isJsonContentType(request.headers["content-type"]))
      return Effect.fail(new BadRequest({ message: "Content-Type must be application/json" }))
    return Effect.flatMap(
      readLimited(NodeHttpServerRequest.toIncomingMessage(request), maxBodyBytes),
      (body): Effect.Effect<HttpServerResponse.HttpServerResponse, E | BodyRefusal, R> => {
        let text: string
        try {
          text = utf8.decode(body)
        } catch {
          return Effect.fail(malformed)
        }
        if (jsonNestsDeeperThan(text, MAX_JSON_DEPTH))
          return Effect.fail(
            new BadRequest({ message: `request body nests deeper than ${MAX_JSON_DEPTH} levels` })
          )
        let parsed: unknown
        try {
          parsed = JSON.parse(text)
        } catch {
          return Effect.fail(malformed)
        }
        if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed))
          return Effect.fail(new BadRequest({ message: "request body must be a JSON object" }))
        const unsafe = unsafeNumberIn(parsed)
        if (unsafe !== undefined) return Effect.fail(unsafeNumberRefusal(text, unsafe))
        return Effect.provideService(
          enter(),
          HttpServerRequest.HttpServerRequest,
          withBufferedBody(request, text, body, parsed)
        )
      }
    )
  }

/** What the guard may refuse a request with. */
export type BodyRefusal = PayloadTooLarge | BadRequest | UnsupportedMediaType | NotFound | MethodNotAllowed
