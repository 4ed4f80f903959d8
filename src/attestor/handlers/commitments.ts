/** The handler of `POST /v1/commitment` (src/attestor/api/commitments.ts). */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Redacted } from "effect"
import { AttestorSettings } from "../../config/attestor.js"
import { AttestorApi } from "../api/index.js"
import { commitmentKeys, commitRequest } from "../commitment.js"

export const AttestorCommitmentsLive = HttpApiBuilder.group(AttestorApi, "commitments", (handlers) =>
  Effect.map(AttestorSettings, (settings) => {
    const commit = commitRequest(
      commitmentKeys(Redacted.value(settings.signingKey), Redacted.value(settings.pepper))
    )
    return handlers.handle("commitment", ({ payload }) => commit(payload))
  })
)
