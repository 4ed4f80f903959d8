/**
 * The attestor's HTTP API (spec/attestor.md §4): each endpoint with its request, response and
 * error schemas. The server, the OpenAPI document and the typed client all derive from this.
 */
import { HttpApi, HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { AttestorHealthResponse } from "../../schema/attestor.js"
import { Wire } from "../../schema/errors.js"
import { serviceDocument } from "../http/openapi.js"
import { metricsEndpoint } from "../http/operator.js"
import { AttestorBindsGroup } from "./binds.js"
import { AttestorCommitmentsGroup } from "./commitment.js"
import { AttestorEscrowsGroup } from "./escrows.js"
import { AttestorInfoGroup } from "./info.js"
import { AttestorLoginsGroup } from "./logins.js"

export const attestorHealthEndpoint = HttpApiEndpoint.get("health", "/v1/health").addSuccess(
  AttestorHealthResponse
)

export class AttestorOperatorGroup extends HttpApiGroup.make("operator")
  .add(attestorHealthEndpoint)
  .add(metricsEndpoint) {}

export class AttestorApi extends HttpApi.make("attestor")
  .add(AttestorOperatorGroup)
  .add(AttestorInfoGroup)
  .add(AttestorCommitmentsGroup)
  .add(AttestorLoginsGroup)
  .add(AttestorEscrowsGroup)
  .add(AttestorBindsGroup)
  .addError(Wire.BadRequest)
  .addError(Wire.PayloadTooLarge)
  .addError(Wire.RateLimited)
  .addError(Wire.Internal)
  .annotateContext(
    serviceDocument({
      title: "Fee vault attestor",
      description:
        "Issues handle commitments, verifies social logins and signs BindOwner for a key chosen before login (spec/attestor.md)."
    })
  ) {}
