/**
 * `POST /v1/public-handle` (docs/attestor.md §2 PublicHandle response, §4) as a service: the flow is
 * `publicHandleRules.ts`'s; this captures the settings' signing key and pepper, the handle lookups of
 * the settings' mode, the chain id and the record of public commitments.
 */
import { Context, Effect, Layer, Redacted } from "effect"
import type { PublicHandleRequest, PublicHandleResponse } from "../../../schema/attestor.js"
import { ChainId } from "../../chain/chainId.js"
import { wasmKeccak256 } from "../../chain/keccak.js"
import { AttestorSettings } from "../../config/attestor.js"
import { commitmentKeys, type WithPayment } from "../commitments/commitmentRules.js"
import { HandleLookups } from "../lookups/HandleLookups.js"
import type { PublicHandleError } from "./api.js"
import { PublicCommitments } from "./PublicCommitments.js"
import { issuePublicHandle } from "./publicHandleRules.js"

export interface PublicHandlesShape {
  /** Resolves, commits, signs and records a decoded request, paid with `paymentSignature` in paid mode. */
  readonly issue: (
    request: PublicHandleRequest,
    paymentSignature: string | undefined
  ) => Effect.Effect<WithPayment<PublicHandleResponse>, PublicHandleError>
}

export class PublicHandles extends Context.Tag("PublicHandles")<PublicHandles, PublicHandlesShape>() {
  static readonly layer: Layer.Layer<
    PublicHandles,
    never,
    AttestorSettings | HandleLookups | ChainId | PublicCommitments
  > = Layer.effect(
    PublicHandles,
    Effect.gen(function* () {
      const settings = yield* AttestorSettings
      const issue = issuePublicHandle({
        keys: commitmentKeys(settings.signingKey, Redacted.value(settings.pepper), yield* wasmKeccak256),
        signer: settings.signingKey,
        lookup: (yield* HandleLookups).lookup,
        chainId: (yield* ChainId).get,
        publics: yield* PublicCommitments
      })
      return { issue }
    })
  )
}
