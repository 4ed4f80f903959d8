/** The handler of `POST /v1/claim` (src/relayer/api/claims.ts): the `Claims` service. */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { RelayerApi } from "../api/index.js"
import { Claims } from "../Claims.js"

export const RelayerClaimsHandlers = HttpApiBuilder.group(RelayerApi, "claims", (handlers) =>
  Effect.map(Claims, (claims) => handlers.handle("claim", ({ payload }) => claims.submit(payload)))
)
