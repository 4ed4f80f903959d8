/**
 * Services for tests from the members a test stubs: every other member dies with
 * "<Service>.<member> not stubbed" when used, so an unexpected call shows up as a failure instead
 * of a silent default. The member list is typed against the service's interface, so a new member
 * does not compile until it is listed. Outside src/testing because the services build their
 * placeholder layers with it too, and the services load nothing from there.
 */
import { type Context, Effect, Layer } from "effect"

/** How each member of a service is used: an Effect value, a function returning one, or plain data. */
export type MemberKinds<S> = { readonly [K in keyof S]-?: "effect" | "function" | "data" }

/** A complete `S` from `stubs`; the unstubbed members die (or throw, for plain data) when used. */
export const stubbed =
  <S extends object>(service: string, members: MemberKinds<S>) =>
  (stubs: Partial<S>): S => {
    const shape: Record<string, unknown> = {}
    for (const [member, kind] of Object.entries(members) as Array<[string, MemberKinds<S>[keyof S]]>) {
      if (member in stubs) {
        shape[member] = (stubs as Record<string, unknown>)[member]
        continue
      }
      const message = `${service}.${member} not stubbed`
      if (kind === "effect") shape[member] = Effect.dieMessage(message)
      else if (kind === "function") shape[member] = () => Effect.dieMessage(message)
      else
        Object.defineProperty(shape, member, {
          enumerable: true,
          get: () => {
            throw new Error(message)
          }
        })
    }
    // Every member is set above, from the stubs or dying.
    return shape as S
  }

/** The layer of `tag` built by `stubbed`. */
export const stubLayer =
  <I, S extends object>(tag: Context.Tag<I, S>, members: MemberKinds<S>) =>
  (stubs: Partial<S>): Layer.Layer<I> =>
    Layer.succeed(tag, stubbed<S>(tag.key, members)(stubs))
