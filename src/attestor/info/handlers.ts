/** The handler of `GET /v1/info` (src/attestor/info/api.ts): the `InfoDocument` service. */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { AttestorApi } from "../api.js"
import { InfoDocument } from "./InfoDocument.js"

export const AttestorInfoHandlers = HttpApiBuilder.group(AttestorApi, "info", (handlers) =>
  Effect.map(InfoDocument, (info) => handlers.handle("info", () => info.current))
)
