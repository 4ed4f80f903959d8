/** The handler of `GET /v1/accounts` (src/relayer/api/accounts.ts): the precomputed feed. */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { AccountsFeed } from "../AccountsFeed.js"
import { RelayerApi } from "../api/index.js"

export const RelayerAccountsHandlers = HttpApiBuilder.group(RelayerApi, "accounts", (handlers) =>
  Effect.map(AccountsFeed, (feed) => handlers.handle("accounts", ({ headers }) => feed.respond(headers)))
)
