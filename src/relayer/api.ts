/**
 * The relayer's HTTP API (spec/relayer.md §4): each endpoint with its request, response and
 * error schemas. The server, the OpenAPI document and the typed client all derive from this.
 */
import { HttpApi, HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Wire } from "../../schema/errors.js"
import { AccountsResponse, HealthResponse } from "../../schema/relayer.js"
import { serviceDocument } from "../http/openapi.js"
import { metricsEndpoint } from "../http/operator.js"
import { RelayerActionsGroup, RelayerBindsGroup } from "./actions.js"
import { RelayerClaimsGroup } from "./claims.js"
import { QuoteGroup } from "./quote.js"
import { TransactionsGroup } from "./transactions.js"

export const healthEndpoint = HttpApiEndpoint.get("health", "/v1/health")
  .addSuccess(HealthResponse)
  .addError(Wire.Unavailable)

export class RelayerOperatorGroup extends HttpApiGroup.make("operator")
  .add(healthEndpoint)
  .add(metricsEndpoint) {}

/** Every indexed account; served precomputed with `ETag`, 304 and gzip (src/relayer/accounts.ts). */
export const accountsEndpoint = HttpApiEndpoint.get("accounts", "/v1/accounts")
  .setHeaders(
    Schema.Struct({
      "if-none-match": Schema.optional(Schema.String),
      "accept-encoding": Schema.optional(Schema.String)
    })
  )
  .addSuccess(AccountsResponse)
  .addError(Wire.Unsupported)
  .addError(Wire.Unavailable)

export class RelayerAccountsGroup extends HttpApiGroup.make("accounts").add(accountsEndpoint) {}

export class RelayerApi extends HttpApi.make("relayer")
  .add(RelayerOperatorGroup)
  .add(QuoteGroup)
  .add(TransactionsGroup)
  .add(RelayerAccountsGroup)
  .add(RelayerClaimsGroup)
  .add(RelayerActionsGroup)
  .add(RelayerBindsGroup)
  .addError(Wire.BadRequest)
  .addError(Wire.PayloadTooLarge)
  .addError(Wire.RateLimited)
  .addError(Wire.Internal)
  .annotateContext(
    serviceDocument({
      title: "Fee vault relayer",
      description: "Submits owner-signed vault transactions from the relayer's hot key (spec/relayer.md)."
    })
  ) {}
