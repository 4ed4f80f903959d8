/**
 * `POST /v1/commitment` (docs/attestor.md §2 CommitmentResponse, §4 rules 1-5) as a service: the
 * rules and the commitment are `commitmentRules.ts`'s; this captures the settings' signing key and
 * pepper (checked once, at start) and the handle lookups of the settings' mode (`HandleLookups`).
 */
import { Context, Effect, Layer, Redacted } from "effect"
import type { CommitmentRequest, CommitmentResponse } from "../../../schema/attestor.js"
import { wasmKeccak256 } from "../../chain/keccak.js"
import { AttestorSettings } from "../../config/attestor.js"
import { HandleLookups } from "../lookups/HandleLookups.js"
import type { CommitmentError } from "./api.js"
import { commitmentKeys, commitRequest, type WithPayment } from "./commitmentRules.js"

export interface CommitmentsShape {
  /**
   * Refuses or commits a decoded request (a fresh nonce per call); `paymentSignature` is the
   * request's `PAYMENT-SIGNATURE` header, which pays for a handle lookup in paid mode.
   */
  readonly commit: (
    request: CommitmentRequest,
    paymentSignature: string | undefined
  ) => Effect.Effect<WithPayment<CommitmentResponse>, CommitmentError>
}

export class Commitments extends Context.Tag("Commitments")<Commitments, CommitmentsShape>() {
  static readonly layer: Layer.Layer<Commitments, never, AttestorSettings | HandleLookups> = Layer.effect(
    Commitments,
    Effect.gen(function* () {
      const settings = yield* AttestorSettings
      const commit = commitRequest(
        commitmentKeys(settings.signingKey, Redacted.value(settings.pepper), yield* wasmKeccak256),
        (yield* HandleLookups).lookup
      )
      return { commit }
    })
  )
}
