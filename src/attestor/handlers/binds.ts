/** The handler of `POST /v1/bind` (src/attestor/api/binds.ts): signatures for the session's escrows. */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { AttestorApi } from "../api/index.js"
import { bindConfig, signBinds } from "../bindSigning.js"

export const AttestorBindsLive = HttpApiBuilder.group(AttestorApi, "binds", (handlers) =>
  Effect.map(bindConfig, (config) => {
    const sign = signBinds(config)
    return handlers.handle("bind", ({ payload }) => sign(payload))
  })
)
