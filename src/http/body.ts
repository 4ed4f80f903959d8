/**
 * Request bodies: JSON only, at most `maxBodyBytes`, nested at most `MAX_JSON_DEPTH` deep. The
 * limit is enforced while the body streams in, so an oversized request is refused without ever
 * being held in memory: a declared `Content-Length` above the limit is refused before reading a
 * byte (whatever the path), a chunked body as soon as the running count passes it. Requests for no
 * route are answered 404/405 here.
 */
import type { IncomingMessage } from "node:http"
import { HttpServerRequest, type HttpServerResponse } from "@effect/platform"
import { NodeHttpServerRequest } from "@effect/platform-node"
import { Effect, FiberRef, Stream } from "effect"
import { BadRequest, MethodNotAllowed, NotFound, PayloadTooLarge } from "../../schema/errors.js"
import { currentRoute, type RouteDecision } from "./routes.js"

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
 * get the buffered bytes instead of a drained stream.
 */
const withBufferedBody = (
  request: HttpServerRequest.HttpServerRequest,
  text: string,
  body: Uint8Array
): HttpServerRequest.HttpServerRequest => {
  const buffered = Object.create(request) as HttpServerRequest.HttpServerRequest
  Object.defineProperties(buffered, {
    text: { get: () => Effect.succeed(text) },
    json: { get: () => Effect.try({ try: () => JSON.parse(text) as unknown, catch: () => malformed }) },
    arrayBuffer: { get: () => Effect.succeed(body.slice().buffer) },
    stream: { get: () => Stream.succeed(body) }
  })
  return buffered
}

const malformed = new BadRequest({ message: "request body is not valid JSON" })

/** Whether the request came with a body. */
const hasBody = (request: HttpServerRequest.HttpServerRequest): boolean => {
  const length = request.headers["content-length"]
  return (length !== undefined && length !== "0") || request.headers["transfer-encoding"] !== undefined
}

/** 404 or 405 for a request that is for no route. */
const refusalOf = (decision: Exclude<RouteDecision, { _tag: "Route" }>) =>
  decision._tag === "WrongMethod"
    ? new MethodNotAllowed({
        message: `this route answers ${decision.allow.join(", ")}`,
        allow: decision.allow
      })
    : new NotFound({ message: "no such route" })

/** HttpApi middleware: checks and buffers the body before routing decodes it. */
export const jsonBodyGuard =
  (maxBodyBytes: number) =>
  <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
    Effect.gen(function* () {
      const request = yield* HttpServerRequest.HttpServerRequest
      const declared = request.headers["content-length"]
      if (declared !== undefined && Number(declared) > maxBodyBytes)
        return yield* Effect.fail(tooLarge(maxBodyBytes))
      const decision = yield* FiberRef.get(currentRoute)
      if (decision._tag !== "Route") {
        // Its body, up to the limit, is read and dropped so the connection closes cleanly (a
        // socket closed on unread bytes resets, and the client may never see the answer).
        if (hasBody(request))
          yield* readLimited(NodeHttpServerRequest.toIncomingMessage(request), maxBodyBytes)
        return yield* Effect.fail(refusalOf(decision))
      }
      if (!methodsWithBody.has(request.method)) {
        // A read takes no body; one sent anyway is drained within the limit, never buffered whole.
        if (hasBody(request))
          yield* readLimited(NodeHttpServerRequest.toIncomingMessage(request), maxBodyBytes)
        return yield* app
      }
      if (!isJsonContentType(request.headers["content-type"])) {
        return yield* Effect.fail(new BadRequest({ message: "Content-Type must be application/json" }))
      }
      const body = yield* readLimited(NodeHttpServerRequest.toIncomingMessage(request), maxBodyBytes)
      const text = yield* Effect.try({
        try: () => new TextDecoder("utf-8", { fatal: true }).decode(body),
        catch: () => malformed
      })
      if (jsonNestsDeeperThan(text, MAX_JSON_DEPTH)) {
        return yield* Effect.fail(
          new BadRequest({ message: `request body nests deeper than ${MAX_JSON_DEPTH} levels` })
        )
      }
      const parsed = yield* Effect.try({
        try: () => JSON.parse(text) as unknown,
        catch: () => malformed
      })
      if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
        return yield* Effect.fail(new BadRequest({ message: "request body must be a JSON object" }))
      }
      return yield* Effect.provideService(
        app,
        HttpServerRequest.HttpServerRequest,
        withBufferedBody(request, text, body)
      )
    })
