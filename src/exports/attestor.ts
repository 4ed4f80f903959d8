/**
 * `fee-vault-services/attestor`: the attestor's layers and settings, for an operator's own Effect
 * program that embeds the service (docs/architecture.md "Entry points").
 *
 *   Layer.launch(AttestorLive)   // the whole service, settings from the environment
 *
 * What it holds: the whole service and its parts (layers/attestor.ts); the settings, read from the
 * environment or a `ConfigProvider` (docs/operations.md); the HTTP API; the chain client and
 * storage shared with the relayer. Re-exports only: each name stays defined beside the code it
 * names.
 */

export { Attestor } from "../../layers/attestor.js"
export { AttestorApi } from "../attestor/api.js"
export { ChainClient, type ChainClientShape } from "../chain/ChainClient.js"
export { ChainId } from "../chain/chainId.js"
export { AttestorSettings, type AttestorSettingsShape, loadAttestorSettings } from "../config/attestor.js"
export { storageLayer } from "../store/sql.js"
