/** The handlers of the owner actions (src/relayer/api/actions.ts): the `OwnerActions` service. */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { RelayerApi } from "../api/index.js"
import { OwnerActions } from "../OwnerActions.js"

export const RelayerActionsHandlers = HttpApiBuilder.group(RelayerApi, "actions", (handlers) =>
  Effect.map(OwnerActions, (actions) =>
    handlers
      .handle("consolidate", ({ payload }) => actions.consolidate(payload))
      .handle("shieldTemplates", ({ payload }) => actions.shieldTemplates(payload))
      .handle("rotateOwner", ({ payload }) => actions.rotateOwner(payload))
      .handle("ping", ({ payload }) => actions.ping(payload))
  )
)
