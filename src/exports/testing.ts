/**
 * `fee-vault-services/testing`: what a project needs to test code composed with the services'
 * layers (docs/architecture.md "Entry points"): a mocked `ChainClient`, `stubLayer` for any other
 * service, an embedded database, and a devnet (anvil with the reference contracts deployed, and the
 * services' settings for it).
 *
 * For tests only: the services never load this module (test/packaging/entry-points.test.ts). The
 * devnet needs the optional peers `@foundry-rs/anvil` (the node) and `@uniswap/v4-periphery`
 * (Permit2's code for paid lookups).
 */

export { feeVaultAbi, testTokenAbi } from "../../contracts/abi.js"
export { type DevnetDeployment, devnetAccount, devnetClients, devnetRoles } from "../../contracts/deploy.js"
export {
  attestorEnv,
  DEVNET_HINT_PRIVATE_KEY,
  DEVNET_MESSENGER_BOT_TOKEN,
  DEVNET_METRICS_TOKEN,
  DEVNET_PEPPER,
  DEVNET_SAMPLE_USER,
  Devnet,
  type DevnetChain,
  type DevnetChainOptions,
  DevnetError,
  type DevnetLayerOptions,
  type DevnetMember,
  devnetChain,
  devnetKeys,
  devnetMember,
  freeLoopbackPort,
  type RunningDevnet,
  type RunningMember,
  relayerEnv,
  withSettings,
  writeDevnetFile
} from "../../layers/devnet.js"
export { type AnvilInstance, type AnvilOptions, AnvilStartError, startAnvil } from "../chain/anvil.js"
export { makeMockChainClient, mockChainClient } from "../chain/MockChainClient.js"
export { type MemberKinds, stubbed, stubLayer } from "../stubLayer.js"
export { type EmbeddedDatabaseOptions, embeddedDatabase } from "../testing/embeddedDatabase.js"
