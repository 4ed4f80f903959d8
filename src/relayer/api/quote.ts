/** `GET /v1/config` and `GET /v1/quote` (docs/relayer.md §2 RelayerConfig and QuoteResponse, §4). */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { Wire } from "../../../schema/errors.js"
import { QuoteQuery, QuoteResponse, RelayerConfig } from "../../../schema/relayer.js"

export const configEndpoint = HttpApiEndpoint.get("config", "/v1/config")
  .addSuccess(RelayerConfig)
  .addError(Wire.Unavailable)

/**
 * No amount: the fee depends only on asset, adapter, action and flags. A legacy `amount`
 * parameter is not part of `QuoteQuery`, so it is dropped when the query is decoded.
 */
export const quoteEndpoint = HttpApiEndpoint.get("quote", "/v1/quote")
  .setUrlParams(QuoteQuery)
  .addSuccess(QuoteResponse)
  .addError(Wire.BadRequest)
  .addError(Wire.AdapterNotAllowed)
  .addError(Wire.Unavailable)

export class QuoteGroup extends HttpApiGroup.make("quote").add(configEndpoint).add(quoteEndpoint) {}
