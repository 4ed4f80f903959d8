/**
 * The handler of `POST /v1/commitment` (src/attestor/api/commitments.ts), with the handle lookups
 * of the settings' mode (`HandleLookups`).
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Redacted } from "effect"
import { wasmKeccak256 } from "../../chain/keccak.js"
import { AttestorSettings } from "../../config/attestor.js"
import { AttestorApi } from "../api/index.js"
import { commitmentKeys, commitRequest } from "../commitment.js"
import { HandleLookups } from "../handles/HandleLookups.js"
import { answerWithPayment } from "./payment.js"

export const AttestorCommitmentsLive = HttpApiBuilder.group(AttestorApi, "commitments", (handlers) =>
  Effect.gen(function* () {
    const settings = yield* AttestorSettings
    const commit = commitRequest(
      commitmentKeys(
        Redacted.value(settings.signingKey),
        Redacted.value(settings.pepper),
        yield* wasmKeccak256
      ),
      (yield* HandleLookups).lookup
    )
    return handlers.handle("commitment", ({ payload, headers }) =>
      answerWithPayment(commit(payload, headers["payment-signature"]))
    )
  })
)
