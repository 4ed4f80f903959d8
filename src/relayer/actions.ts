/**
 * The owner-action and bind routes (spec/relayer.md §4): each endpoint declared with every refusal
 * it can answer, and its handler (`relayedWrite`: decoded in the handler so that malformed bodies
 * count among the outcomes of `relayer_actions_total`).
 */
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Effect, Layer, type Schema } from "effect"
import { Wire } from "../../schema/errors.js"
import {
  CancelBindRequest,
  ConsolidateRequest,
  FinalizeBindRequest,
  PingRequest,
  ProposeBindRequest,
  RotateOwnerRequest,
  ShieldTemplatesRequest,
  TxHashResponse
} from "../../schema/relayer.js"
import { AccountReader } from "./AccountReader.js"
import { OwnerActions, OwnerActionsLive } from "./action.js"
import { Binds, BindsLive } from "./bind.js"
import { recordActionOutcome } from "./claimMetrics.js"
import { IdRateLimit } from "./rateLimits.js"
import { NonceReservations } from "./reservations.js"
import { TxPreflight } from "./simulate.js"
import { DenyList } from "./validation/denyList.js"
import { VaultSignatures } from "./validation/signatures.js"
import { relayedWrite } from "./writeRoute.js"

/** A paid owner action: the refusals of `ActionError` (src/relayer/action.ts). */
const ownerActionEndpoint = <const Name extends string, P extends Schema.Schema.Any>(
  name: Name,
  path: `/v1/${string}`,
  payload: P
) =>
  HttpApiEndpoint.post(name, path)
    .setPayload(payload)
    .addSuccess(TxHashResponse)
    .addError(Wire.BadRequest)
    .addError(Wire.DeadlineTooSoon)
    .addError(Wire.RelayerMismatch)
    .addError(Wire.InvalidAmount)
    .addError(Wire.DataHashMismatch)
    .addError(Wire.AdapterNotAllowed)
    .addError(Wire.InvalidTemplates)
    .addError(Wire.RecipientDenied)
    .addError(Wire.InvalidSignature)
    .addError(Wire.NotFound)
    .addError(Wire.NonceMismatch)
    .addError(Wire.FeeTooLow)
    .addError(Wire.SimulationFailed)
    .addError(Wire.GasCapExceeded)
    .addError(Wire.RateLimited)
    .addError(Wire.Unavailable)

/** An unpaid bind transaction: the refusals of `BindError` (src/relayer/bind.ts). */
const bindEndpoint = <const Name extends string, P extends Schema.Schema.Any>(
  name: Name,
  path: `/v1/${string}`,
  payload: P
) =>
  HttpApiEndpoint.post(name, path)
    .setPayload(payload)
    .addSuccess(TxHashResponse)
    .addError(Wire.BadRequest)
    .addError(Wire.DeadlineTooSoon)
    .addError(Wire.InvalidSignature)
    .addError(Wire.InsufficientAttestations)
    .addError(Wire.NotFound)
    .addError(Wire.RecipientDenied)
    .addError(Wire.BindState)
    .addError(Wire.NonceMismatch)
    .addError(Wire.SimulationFailed)
    .addError(Wire.GasCapExceeded)
    .addError(Wire.RateLimited)
    .addError(Wire.Unavailable)

export class RelayerActionsGroup extends HttpApiGroup.make("actions")
  .add(ownerActionEndpoint("consolidate", "/v1/consolidate", ConsolidateRequest))
  .add(ownerActionEndpoint("shieldTemplates", "/v1/shield-templates", ShieldTemplatesRequest))
  .add(ownerActionEndpoint("rotateOwner", "/v1/rotate-owner", RotateOwnerRequest))
  .add(ownerActionEndpoint("ping", "/v1/ping", PingRequest)) {}

export class RelayerBindsGroup extends HttpApiGroup.make("binds")
  .add(bindEndpoint("cancelBind", "/v1/cancel-bind", CancelBindRequest))
  .add(bindEndpoint("proposeBind", "/v1/propose-bind", ProposeBindRequest))
  .add(bindEndpoint("finalizeBind", "/v1/finalize-bind", FinalizeBindRequest)) {}

// Handlers are built against a view of the relayer API holding only these groups (see claims.ts).
const ActionsApiView = HttpApi.make("relayer").add(RelayerActionsGroup).add(RelayerBindsGroup)

export const actionsHandlers = HttpApiBuilder.group(ActionsApiView, "actions", (handlers) =>
  Effect.map(OwnerActions, (actions) =>
    handlers
      .handleRaw(
        "consolidate",
        relayedWrite(ConsolidateRequest, recordActionOutcome("consolidate"))(actions.consolidate)
      )
      .handleRaw(
        "shieldTemplates",
        relayedWrite(ShieldTemplatesRequest, recordActionOutcome("shield-templates"))(actions.shieldTemplates)
      )
      .handleRaw(
        "rotateOwner",
        relayedWrite(RotateOwnerRequest, recordActionOutcome("rotate-owner"))(actions.rotateOwner)
      )
      .handleRaw("ping", relayedWrite(PingRequest, recordActionOutcome("ping"))(actions.ping))
  )
)

export const bindsHandlers = HttpApiBuilder.group(ActionsApiView, "binds", (handlers) =>
  Effect.map(Binds, (binds) =>
    handlers
      .handleRaw(
        "cancelBind",
        relayedWrite(CancelBindRequest, recordActionOutcome("cancel-bind"))(binds.cancelBind)
      )
      .handleRaw(
        "proposeBind",
        relayedWrite(ProposeBindRequest, recordActionOutcome("propose-bind"))(binds.proposeBind)
      )
      .handleRaw(
        "finalizeBind",
        relayedWrite(FinalizeBindRequest, recordActionOutcome("finalize-bind"))(binds.finalizeBind)
      )
  )
)

/** The owner-action and bind routes with the live pipelines. */
export const RelayerActionsLive = Layer.mergeAll(actionsHandlers, bindsHandlers).pipe(
  Layer.provide(Layer.mergeAll(OwnerActionsLive, BindsLive)),
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
