/**
 * The claim route: POST /v1/claim declared with every refusal it can answer, and its handler
 * (`relayedWrite`: decoded in the handler so that malformed bodies count among the outcomes).
 */
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Effect, Layer } from "effect"
import { Wire } from "../../schema/errors.js"
import { ClaimRequest, TxHashResponse } from "../../schema/relayer.js"
import { AccountReader } from "./AccountReader.js"
import { Claims, ClaimsLive } from "./claim.js"
import { recordClaimOutcome } from "./claimMetrics.js"
import { IdRateLimit } from "./rateLimits.js"
import { NonceReservations } from "./reservations.js"
import { TxPreflight } from "./simulate.js"
import { DenyList } from "./validation/denyList.js"
import { VaultSignatures } from "./validation/signatures.js"
import { relayedWrite } from "./writeRoute.js"

export const claimEndpoint = HttpApiEndpoint.post("claim", "/v1/claim")
  .setPayload(ClaimRequest)
  .addSuccess(TxHashResponse)
  .addError(Wire.BadRequest)
  .addError(Wire.DeadlineTooSoon)
  .addError(Wire.RelayerMismatch)
  .addError(Wire.InvalidAmount)
  .addError(Wire.DataHashMismatch)
  .addError(Wire.AdapterNotAllowed)
  .addError(Wire.InvalidSignature)
  .addError(Wire.FeeTooLow)
  .addError(Wire.RecipientDenied)
  .addError(Wire.NotFound)
  .addError(Wire.NonceMismatch)
  .addError(Wire.SimulationFailed)
  .addError(Wire.GasCapExceeded)
  .addError(Wire.RateLimited)
  .addError(Wire.Unavailable)

export class RelayerClaimsGroup extends HttpApiGroup.make("claims").add(claimEndpoint) {}

/*
 * The handlers are built against a view of the relayer API holding only this group: they register
 * under the same API id and group name, and the full API (api.ts) can import the group from here
 * without an import cycle.
 */
const ClaimsApiView = HttpApi.make("relayer").add(RelayerClaimsGroup)

/** The handlers alone; `Claims` comes from the caller (tests give a stub). */
export const claimsHandlers = HttpApiBuilder.group(ClaimsApiView, "claims", (handlers) =>
  Effect.map(Claims, (claims) =>
    handlers.handleRaw("claim", relayedWrite(ClaimRequest, recordClaimOutcome)(claims.submit))
  )
)

/** POST /v1/claim with the live pipeline; needs the settings, chain, database, fee oracle and hot key. */
export const RelayerClaimsLive = claimsHandlers.pipe(
  Layer.provide(ClaimsLive),
  Layer.provide(
    Layer.mergeAll(
      AccountReader.layer,
      DenyList.layer,
      VaultSignatures.layer,
      TxPreflight.layer,
      IdRateLimit.layer,
      NonceReservations.layer
    )
  )
)
