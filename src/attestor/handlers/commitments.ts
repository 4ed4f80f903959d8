/**
 * The handler of `POST /v1/commitment` (src/attestor/api/commitments.ts), with the handle lookups
 * the settings allow: none (`off`) or free resolution (`free`, local development).
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Option, Redacted } from "effect"
import { NotFound, Unavailable, Unsupported } from "../../../schema/errors.js"
import { AttestorSettings, type AttestorSettingsShape } from "../../config/attestor.js"
import { AttestorApi } from "../api/index.js"
import { commitmentKeys, commitRequest, type HandleLookup, noLookups } from "../commitment.js"
import { handleResolvers } from "../handles/resolvers.js"

export const HANDLE_NOT_FOUND = "no user has this handle on this platform"
export const DIRECTORY_UNAVAILABLE = "the platform's directory is not answering: try again later"

/** The lookups of these settings: each handle resolved with its platform's directory. */
export const handleLookupOf = (settings: AttestorSettingsShape): HandleLookup => {
  if (settings.handleLookupMode !== "free") return noLookups
  const resolvers = handleResolvers(settings.handleResolvers)
  return (platform, handle) => {
    const resolve = resolvers[platform]
    if (resolve === undefined)
      return Effect.fail(
        new Unsupported({ message: `${platform} handles cannot be looked up here: send the numeric userId` })
      )
    return resolve(handle).pipe(
      Effect.mapError(() => new Unavailable({ message: DIRECTORY_UNAVAILABLE })),
      Effect.flatMap(
        Option.match({
          onNone: () => Effect.fail(new NotFound({ message: HANDLE_NOT_FOUND })),
          onSome: Effect.succeed
        })
      )
    )
  }
}

export const AttestorCommitmentsLive = HttpApiBuilder.group(AttestorApi, "commitments", (handlers) =>
  Effect.map(AttestorSettings, (settings) => {
    const commit = commitRequest(
      commitmentKeys(Redacted.value(settings.signingKey), Redacted.value(settings.pepper)),
      handleLookupOf(settings)
    )
    return handlers.handle("commitment", ({ payload }) => commit(payload))
  })
)
