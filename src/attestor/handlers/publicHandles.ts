/** The handler of `POST /v1/public-handle` (src/attestor/api/publicHandles.ts). */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Redacted } from "effect"
import { ChainId } from "../../chain/chainId.js"
import { wasmKeccak256 } from "../../chain/keccak.js"
import { AttestorSettings } from "../../config/attestor.js"
import { AttestorApi } from "../api/index.js"
import { commitmentKeys } from "../commitment.js"
import { HandleLookups } from "../handles/HandleLookups.js"
import { PublicCommitments } from "../PublicCommitments.js"
import { issuePublicHandle } from "../publicHandle.js"
import { answerWithPayment } from "./payment.js"

export const AttestorPublicHandlesLive = HttpApiBuilder.group(AttestorApi, "publicHandles", (handlers) =>
  Effect.gen(function* () {
    const settings = yield* AttestorSettings
    const issue = issuePublicHandle({
      keys: commitmentKeys(
        Redacted.value(settings.signingKey),
        Redacted.value(settings.pepper),
        yield* wasmKeccak256
      ),
      signingKey: Redacted.value(settings.signingKey),
      lookup: (yield* HandleLookups).lookup,
      chainId: (yield* ChainId).get,
      publics: yield* PublicCommitments
    })
    return handlers.handle("publicHandle", ({ payload, headers }) =>
      answerWithPayment(issue(payload, headers["payment-signature"]))
    )
  })
)
