/** `GET /v1/accounts` (docs/relayer.md §4): every indexed account, with `ETag`, 304 and gzip. */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { Schema } from "effect"
import { Wire } from "../../../schema/errors.js"
import { AccountsResponse } from "../../../schema/relayer.js"

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
