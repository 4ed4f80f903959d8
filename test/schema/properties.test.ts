/**
 * Every exported schema of the wire language, driven by its own arbitrary: a generated value
 * encodes to JSON-safe data that decodes back to the same value, and that wire form is a fixed
 * point (decoding and re-encoding it changes nothing).
 */
import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Schema } from "effect"
import * as attestor from "../../schema/attestor.js"
import * as primitives from "../../schema/primitives.js"
import * as relayer from "../../schema/relayer.js"

const schemasOf = (
  module: Record<string, unknown>
): Array<[string, Schema.Schema<unknown, unknown, never>]> =>
  Object.entries(module).flatMap(([name, value]) =>
    Schema.isSchema(value) ? [[name, value as Schema.Schema<unknown, unknown, never>]] : []
  )

const modules = { primitives, relayer, attestor }

describe.each(Object.entries(modules))("%s", (_, module) => {
  const schemas = schemasOf(module)

  it("exports schemas", () => {
    expect(schemas.length).toBeGreaterThan(0)
  })

  for (const [name, schema] of schemas) {
    const encode = Schema.encodeSync(schema)
    const decode = Schema.decodeUnknownSync(schema)

    it.prop(
      `${name}: encode then decode is the identity, the wire form is a fixed point`,
      [Arbitrary.make(schema)],
      ([value]) => {
        const wire = encode(value)
        // What travels is JSON: the encoded form must survive a JSON round trip unchanged.
        const json: unknown = JSON.parse(JSON.stringify(wire))
        expect(json).toStrictEqual(wire)
        const decoded = decode(json)
        expect(decoded).toStrictEqual(value)
        expect(encode(decoded)).toStrictEqual(wire)
      },
      { fastCheck: { numRuns: 60 } }
    )
  }
})
