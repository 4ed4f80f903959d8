/** The handlers of the bind transactions (src/relayer/api/binds.ts): the `BindTransactions` service. */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { RelayerApi } from "../api/index.js"
import { BindTransactions } from "../BindTransactions.js"

export const RelayerBindsHandlers = HttpApiBuilder.group(RelayerApi, "binds", (handlers) =>
  Effect.map(BindTransactions, (binds) =>
    handlers
      .handle("cancelBind", ({ payload }) => binds.cancelBind(payload))
      .handle("proposeBind", ({ payload }) => binds.proposeBind(payload))
      .handle("finalizeBind", ({ payload }) => binds.finalizeBind(payload))
  )
)
