/**
 * The paid owner actions (docs/relayer.md §4): `POST /v1/consolidate`, `/v1/shield-templates`,
 * `/v1/rotate-owner` and `/v1/ping`, each an owner-signed vault call with an optional fee claim.
 */
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { Wire } from "../../../schema/errors.js"
import {
  ConsolidateRequest,
  PingRequest,
  RotateOwnerRequest,
  ShieldTemplatesRequest,
  TxHashResponse
} from "../../../schema/relayer.js"
import { type ErrorOf, postEndpoint } from "../../http/declare.js"

const errors = [
  Wire.BadRequest,
  Wire.DeadlineTooSoon,
  Wire.RelayerMismatch,
  Wire.InvalidAmount,
  Wire.DataHashMismatch,
  Wire.AdapterNotAllowed,
  Wire.InvalidTemplates,
  Wire.RecipientDenied,
  Wire.InvalidSignature,
  Wire.NotFound,
  Wire.NonceMismatch,
  Wire.FeeTooLow,
  Wire.SimulationFailed,
  Wire.GasCapExceeded,
  Wire.RateLimited,
  Wire.Unavailable
] as const
const success = TxHashResponse

const pingEndpoint = postEndpoint("ping", "/v1/ping", { payload: PingRequest, success, errors })

/** Every refusal of an owner-action endpoint: the `OwnerActions` service's error channel. */
export type ActionError = ErrorOf<typeof pingEndpoint>

export class RelayerActionsGroup extends HttpApiGroup.make("actions")
  .add(postEndpoint("consolidate", "/v1/consolidate", { payload: ConsolidateRequest, success, errors }))
  .add(
    postEndpoint("shieldTemplates", "/v1/shield-templates", {
      payload: ShieldTemplatesRequest,
      success,
      errors
    })
  )
  .add(postEndpoint("rotateOwner", "/v1/rotate-owner", { payload: RotateOwnerRequest, success, errors }))
  .add(pingEndpoint) {}
