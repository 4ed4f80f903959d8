/**
 * The paid owner actions (spec/relayer.md §4): `POST /v1/consolidate`, `/v1/shield-templates`,
 * `/v1/rotate-owner` and `/v1/ping`, each an owner-signed vault call with an optional fee claim.
 */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import type { Schema } from "effect"
import { Wire } from "../../../schema/errors.js"
import {
  ConsolidateRequest,
  PingRequest,
  RotateOwnerRequest,
  ShieldTemplatesRequest,
  TxHashResponse
} from "../../../schema/relayer.js"
import { type ErrorsOf, withErrors } from "../../http/declare.js"

/** Every refusal of an owner-action endpoint. */
export const ownerActionErrors = [
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

export type ActionError = ErrorsOf<typeof ownerActionErrors>

const ownerActionEndpoint = <const Name extends string, P extends Schema.Schema.Any>(
  name: Name,
  path: `/v1/${string}`,
  payload: P
) =>
  HttpApiEndpoint.post(name, path)
    .setPayload(payload)
    .addSuccess(TxHashResponse)
    .pipe(withErrors(ownerActionErrors))

export class RelayerActionsGroup extends HttpApiGroup.make("actions")
  .add(ownerActionEndpoint("consolidate", "/v1/consolidate", ConsolidateRequest))
  .add(ownerActionEndpoint("shieldTemplates", "/v1/shield-templates", ShieldTemplatesRequest))
  .add(ownerActionEndpoint("rotateOwner", "/v1/rotate-owner", RotateOwnerRequest))
  .add(ownerActionEndpoint("ping", "/v1/ping", PingRequest)) {}
