/**
 * Serving a whole API with only some of its groups implemented: every endpoint of the other groups
 * dies with "<group>.<endpoint> not stubbed", so a test that reaches one fails loudly instead of
 * needing a hand-written stub per group.
 */
import { type HttpApi, HttpApiBuilder, type HttpApiGroup } from "@effect/platform"
import { Effect, Layer } from "effect"

type AnyHandlers = {
  handle: (name: string, handler: () => Effect.Effect<never>) => AnyHandlers
}

export const withUnstubbedGroups = <
  Id extends string,
  Groups extends HttpApiGroup.HttpApiGroup.Any,
  E,
  R,
  A,
  HE,
  HR
>(
  api: HttpApi.HttpApi<Id, Groups, E, R>,
  implemented: { readonly groups: ReadonlyArray<string>; readonly layer: Layer.Layer<A, HE, HR> }
): Layer.Layer<HttpApiGroup.HttpApiGroup.ToService<Id, Groups>, HE, HR> => {
  const groups = api.groups as unknown as Record<
    string,
    { readonly endpoints: Record<string, { readonly name: string }> }
  >
  const dying = Object.entries(groups)
    .filter(([name]) => !implemented.groups.includes(name))
    .map(
      ([name, group]) =>
        HttpApiBuilder.group(
          api as never,
          name as never,
          ((handlers: AnyHandlers) =>
            Object.values(group.endpoints).reduce(
              (h, endpoint) =>
                h.handle(endpoint.name, () => Effect.dieMessage(`${name}.${endpoint.name} not stubbed`)),
              handlers
            )) as never
        ) as unknown as Layer.Layer<unknown>
    )
  return Layer.mergeAll(implemented.layer, ...dying) as never
}
