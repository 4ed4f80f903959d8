/**
 * `fee-vault-services/relayer`: the relayer's layers and settings, for an operator's own Effect
 * program that embeds the service, and for a project that composes part of it (the claim path,
 * say) in its tests (docs/architecture.md "Entry points").
 *
 *   Layer.launch(RelayerLive)                     // the whole service, settings from the environment
 *   writeServices.pipe(Layer.provide(...checks))  // the write endpoints' services over your stubs
 *
 * What it holds: the whole service and its parts (layers/relayer.ts); the settings, read from the
 * environment or a `ConfigProvider` (docs/operations.md); the HTTP API and handlers; the write
 * endpoints' services (`Claims`, `OwnerActions`, `BindTransactions`) over the one `Relay` step
 * (docs/relayer.md §4), and each tag the write path stands on with its live layer, to keep or
 * replace; the hot key's `TxSender`; the chain client and storage shared with the attestor.
 * Re-exports only: each name stays defined beside the code it names.
 */

export { Relayer } from "../../layers/relayer.js"
export { ChainClient, type ChainClientShape } from "../chain/ChainClient.js"
export { ChainId } from "../chain/chainId.js"
export {
  loadRelayerSettings,
  RelayerSettings,
  type RelayerSettingsShape,
  relayerSettingsWarnings
} from "../config/relayer.js"
export { MetricsEndpoint } from "../http/MetricsEndpoint.js"
export { localSigner, type Signer } from "../keys/Signer.js"
export {
  AccountReader,
  type AccountReaderShape,
  type AccountSnapshot,
  type VaultAccount
} from "../relayer/AccountReader.js"
export { RelayerApi } from "../relayer/api/index.js"
export { BindBudget, type BindBudgetShape } from "../relayer/BindBudget.js"
export { BindTransactions, type BindTransactionsShape } from "../relayer/BindTransactions.js"
export { Claims, type ClaimsShape } from "../relayer/Claims.js"
export { FeeOracle, type FeeOracleShape, type Quote, type QuoteRequest } from "../relayer/FeeOracle.js"
export { RelayerHandlers } from "../relayer/handlers/index.js"
export { IdRateLimit } from "../relayer/IdRateLimit.js"
export { NonceReservations } from "../relayer/NonceReservations.js"
export { OwnerActions, type OwnerActionsShape } from "../relayer/OwnerActions.js"
export { Relay, type RelayShape } from "../relayer/Relay.js"
export { RelayerHealth, type RelayerHealthShape } from "../relayer/RelayerHealth.js"
export { RevertCooldowns } from "../relayer/RevertCooldowns.js"
export { TxPreflight, type TxPreflightShape } from "../relayer/TxPreflight.js"
export { DenyList } from "../relayer/validation/DenyList.js"
export { VaultSignatures, type VaultSignaturesShape } from "../relayer/validation/VaultSignatures.js"
export { storageLayer } from "../store/sql.js"
export {
  type TxRequest,
  TxSender,
  type TxSenderShape,
  type TxSubmitError,
  txSenderOptions
} from "../txsender/TxSender.js"
