/**
 * The claim route: POST /v1/claim declared with every refusal it can answer, and its handler. The
 * handler decodes the body itself (the route declares it, so the OpenAPI document and typed
 * clients still see the schema) so that a malformed body is counted among the claim outcomes too.
 */
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiError, HttpApiGroup } from "@effect/platform"
import { Cause, Effect, Exit, Layer, Option, Schema } from "effect"
import { errorCatalog, Wire } from "../../schema/errors.js"
import { ClaimRequest, TxHashResponse } from "../../schema/relayer.js"
import { AccountReader } from "./AccountReader.js"
import { Claims, ClaimsLive } from "./claim.js"
import { recordClaimOutcome } from "./claimMetrics.js"
import { IdRateLimit } from "./rateLimits.js"
import { TxPreflight } from "./simulate.js"
import { DenyList } from "./validation/denyList.js"
import { VaultSignatures } from "./validation/signatures.js"

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

const decodeClaimRequest = Schema.decodeUnknown(ClaimRequest)

/** The handlers alone; `Claims` comes from the caller (tests give a stub). */
export const claimsHandlers = HttpApiBuilder.group(ClaimsApiView, "claims", (handlers) =>
  Effect.map(Claims, (claims) =>
    handlers.handleRaw("claim", ({ request }) =>
      request.json.pipe(
        // The body guard already refused anything that is not a JSON object.
        Effect.orDie,
        Effect.flatMap((body) => decodeClaimRequest(body)),
        Effect.catchTag("ParseError", (error) =>
          Effect.flatMap(HttpApiError.HttpApiDecodeError.fromParseError(error), Effect.fail)
        ),
        Effect.flatMap(claims.submit),
        Effect.onExit(
          Exit.match({
            onSuccess: () => recordClaimOutcome("ok"),
            onFailure: (cause) =>
              Option.match(Cause.failureOption(cause), {
                onSome: (error) =>
                  recordClaimOutcome(
                    error._tag === "HttpApiDecodeError" ? "bad_request" : errorCatalog[error._tag].code
                  ),
                // A client that hangs up is no outcome; a defect is answered as 500 `internal`.
                onNone: () => (Cause.isInterruptedOnly(cause) ? Effect.void : recordClaimOutcome("internal"))
              })
          })
        )
      )
    )
  )
)

/** POST /v1/claim with the live pipeline; needs the settings, chain, fee oracle and hot key. */
export const RelayerClaimsLive = claimsHandlers.pipe(
  Layer.provide(ClaimsLive),
  Layer.provide(
    Layer.mergeAll(
      AccountReader.layer,
      DenyList.layer,
      VaultSignatures.layer,
      TxPreflight.layer,
      IdRateLimit.layer
    )
  )
)
