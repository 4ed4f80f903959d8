/**
 * Request bodies: JSON only, at most `maxBodyBytes`. The limit is enforced while the body
 * streams in, so an oversized request is refused without ever being held in memory: a declared
 * `Content-Length` above the limit is refused before reading a byte, a chunked body as soon as the
 * running count passes it.
 */
import type { IncomingMessage } from "node:http"
import { HttpServerRequest } from "@effect/platform"
import { NodeHttpServerRequest } from "@effect/platform-node"
import { Effect, Stream } from "effect"
import { BadRequest, PayloadTooLarge } from "../../schema/errors.js"
import { matchRoute, type RouteTemplate } from "./routes.js"

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
  body: Uint8Array
): HttpServerRequest.HttpServerRequest => {
  const text = new TextDecoder().decode(body)
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

/** HttpApi middleware: checks and buffers the body before routing decodes it. */
export const jsonBodyGuard =
  (maxBodyBytes: number, routes: ReadonlyArray<RouteTemplate>) =>
  <E, R>(app: Effect.Effect<import("@effect/platform").HttpServerResponse.HttpServerResponse, E, R>) =>
    Effect.gen(function* () {
      const request = yield* HttpServerRequest.HttpServerRequest
      // Unknown routes are the router's to refuse (404), whatever their body.
      if (
        !methodsWithBody.has(request.method) ||
        matchRoute(routes, request.method, request.url) === "unmatched"
      ) {
        return yield* app
      }
      const declared = request.headers["content-length"]
      if (declared !== undefined && Number(declared) > maxBodyBytes)
        return yield* Effect.fail(tooLarge(maxBodyBytes))
      if (!isJsonContentType(request.headers["content-type"])) {
        return yield* Effect.fail(new BadRequest({ message: "Content-Type must be application/json" }))
      }
      const body = yield* readLimited(NodeHttpServerRequest.toIncomingMessage(request), maxBodyBytes)
      const text = new TextDecoder("utf-8", { fatal: true })
      const parsed = yield* Effect.try({
        try: () => JSON.parse(text.decode(body)) as unknown,
        catch: () => malformed
      })
      if (parsed === null || typeof parsed !== "object") {
        return yield* Effect.fail(new BadRequest({ message: "request body must be a JSON object" }))
      }
      return yield* Effect.provideService(
        app,
        HttpServerRequest.HttpServerRequest,
        withBufferedBody(request, body)
      )
    })
