/**
 * Pre-rendered bodies: a route hands HttpApiBuilder the response it would write for a value,
 * rendered here, instead of the value for it to encode. HttpApiBuilder passes a response through
 * as it is, so the route skips the schema's encoding on the request; worth it only where the
 * profile shows that encoding (bench/PROFILE.md), and used by two routes:
 *
 * - `GET /v1/quote` (src/relayer/handlers/quote.ts): the schema's encoding done here, once per quote
 *   and question, and the response kept and handed out again for the quote's lifetime;
 * - `POST /v1/commitment` (src/attestor/commitments/handlers.ts): a value that is its own encoding
 *   (`isEncoded` vouches for it) written as it is, never encoded.
 *
 * Either way the response is what HttpApiBuilder writes for the encoding (`unsafeJson`, 200,
 * `application/json`), and a value this cannot render (the encoding refuses it, `isEncoded` does
 * not vouch for it) is handed back for HttpApiBuilder to encode, and refuse, as it would. Each
 * use has a test that its bytes are the schema's own encoding (`encodedBody`) byte for byte.
 *
 * Not of this kind: the server's replay of kept answers (src/http/cachedAnswers.ts, the `emit`
 * hook of src/http/server.ts) serves the bytes a route already answered, before a fiber or the
 * router runs; `holdUntilServed` is no shortcut but the wait for the handlers' layer at start.
 */
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Either, Schema } from "effect"

export interface Precomputed<A, I> {
  readonly schema: Schema.Schema<A, I>
  /** The response HttpApiBuilder would write for `value`, or `value` itself for it to encode. */
  readonly render: (value: A) => A | HttpServerResponse.HttpServerResponse
}

export interface PrecomputedOptions<A> {
  /**
   * Whether `value` is already its own encoding, so that its JSON is the encoding's byte for byte
   * (the same fields in the schema's order, each in its encoded form): then it is written without
   * being encoded. Without it every value is encoded.
   */
  readonly isEncoded?: (value: A) => boolean
}

/** Pre-rendered answers of `schema`, a route's success schema (encoding needs no service). */
export const precomputed = <A, I>(
  schema: Schema.Schema<A, I>,
  options: PrecomputedOptions<A> = {}
): Precomputed<A, I> => {
  const { isEncoded } = options
  if (isEncoded !== undefined)
    return {
      schema,
      render: (value) => (isEncoded(value) ? HttpServerResponse.unsafeJson(value) : value)
    }
  const encode = Schema.encodeEither(schema)
  return {
    schema,
    render: (value) => {
      const encoded = encode(value)
      return Either.isRight(encoded) ? HttpServerResponse.unsafeJson(encoded.right) : value
    }
  }
}

/** The JSON of the schema's own encoding of `value`: what a rendered body must equal (tests). */
export const encodedBody = <A, I>(precomputed: Precomputed<A, I>, value: A): string =>
  JSON.stringify(Schema.encodeSync(precomputed.schema)(value))

/** The body of a rendered answer as text; undefined when `render` handed the value back. */
export const renderedBody = (rendered: unknown): string | undefined => {
  if (!HttpServerResponse.isServerResponse(rendered)) return undefined
  if (rendered.body._tag !== "Uint8Array") throw new Error(`a ${rendered.body._tag} body`)
  return new TextDecoder().decode(rendered.body.body)
}
