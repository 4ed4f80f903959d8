/** The handler of `POST /v1/bind` (src/attestor/binds/api.ts): the `BindSignatures` service. */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { AttestorApi } from "../api.js"
import { BindSignatures } from "./BindSignatures.js"

export const AttestorBindsHandlers = HttpApiBuilder.group(AttestorApi, "binds", (handlers) =>
  Effect.map(BindSignatures, (binds) => handlers.handle("bind", ({ payload }) => binds.sign(payload)))
)
