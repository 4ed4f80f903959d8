/**
 * The relayer's HTTP API (docs/relayer.md §4), assembled from its endpoint groups: the server, the
 * OpenAPI document and the typed client (src/client.ts) all derive from it. Handlers live in
 * src/relayer/handlers/.
 */
import { serviceApi } from "../../http/declare.js"
import { RelayerAccountsGroup } from "./accounts.js"
import { RelayerActionsGroup } from "./actions.js"
import { RelayerBindsGroup } from "./binds.js"
import { RelayerClaimsGroup } from "./claims.js"
import { RelayerOperatorGroup } from "./operator.js"
import { QuoteGroup } from "./quote.js"
import { TransactionsGroup } from "./transactions.js"

export class RelayerApi extends serviceApi("relayer", {
  title: "Fee vault relayer",
  description: "Submits owner-signed vault transactions from the relayer's hot key (docs/relayer.md)."
})
  .add(RelayerOperatorGroup)
  .add(QuoteGroup)
  .add(TransactionsGroup)
  .add(RelayerAccountsGroup)
  .add(RelayerClaimsGroup)
  .add(RelayerActionsGroup)
  .add(RelayerBindsGroup) {}
