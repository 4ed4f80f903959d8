/** The handler of `POST /v1/escrows` (src/attestor/escrows/api.ts): the `SessionEscrows` service. */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { AttestorApi } from "../api.js"
import { SessionEscrows } from "./SessionEscrows.js"

export const AttestorEscrowsHandlers = HttpApiBuilder.group(AttestorApi, "escrows", (handlers) =>
  Effect.map(SessionEscrows, (escrows) => handlers.handle("escrows", ({ payload }) => escrows.list(payload)))
)
