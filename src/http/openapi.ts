/**
 * The OpenAPI document says what clients really receive. HttpApi documents its built-in decode
 * error as `{ _tag, issues, message }`, but the renderer answers every schema violation with the
 * service's `{ error, code: "bad_request" }`, so that built-in is removed from the document.
 */
import * as OpenApi from "@effect/platform/OpenApi"

const builtInSchemas = ["HttpApiDecodeError", "Issue", "PropertyKey"]
const builtInRef = "#/components/schemas/HttpApiDecodeError"

type Json = Record<string, unknown>

const isObject = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)

/** Replaces `anyOf: [HttpApiDecodeError, X]` by `X`, everywhere in the document. */
const withoutBuiltInDecodeError = (node: unknown): unknown => {
  if (Array.isArray(node)) return node.map(withoutBuiltInDecodeError)
  if (!isObject(node)) return node
  const out: Json = {}
  for (const [key, value] of Object.entries(node)) out[key] = withoutBuiltInDecodeError(value)
  const anyOf = out.anyOf
  if (Array.isArray(anyOf)) {
    const kept = anyOf.filter((s) => !(isObject(s) && s.$ref === builtInRef))
    if (kept.length !== anyOf.length) {
      delete out.anyOf
      if (kept.length === 1) Object.assign(out, kept[0])
      else out.anyOf = kept
    }
  }
  if (out.description === "The request did not match the expected schema") {
    out.description = "Malformed JSON, a schema violation, or a value out of range"
  }
  return out
}

export const serviceDocument = (options: { readonly title: string; readonly description: string }) =>
  OpenApi.annotations({
    title: options.title,
    version: "1",
    description: options.description,
    transform: (spec) => {
      const cleaned = withoutBuiltInDecodeError(spec) as Record<string, Json>
      const schemas = cleaned.components?.schemas
      if (isObject(schemas)) for (const name of builtInSchemas) delete schemas[name]
      return cleaned
    }
  })
