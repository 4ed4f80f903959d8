/** The handler of `POST /v1/escrows` (src/attestor/api/escrows.ts): the session's escrows. */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { AttestorApi } from "../api/index.js"
import { sessionEscrows } from "../escrows.js"
import { authenticate } from "../SessionStore.js"

export const AttestorEscrowsLive = HttpApiBuilder.group(AttestorApi, "escrows", (handlers) =>
  Effect.succeed(
    handlers.handle("escrows", ({ payload }) =>
      Effect.flatMap(authenticate(payload.session, payload.loginSecret), sessionEscrows)
    )
  )
)
