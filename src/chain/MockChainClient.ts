/**
 * A `ChainClient` for unit tests of logic above the chain: stub the operations a test expects,
 * and any other one dies with "ChainClient.<op> not stubbed", so an unexpected chain access
 * shows up as a failure instead of a silent default.
 */
import type { Layer } from "effect"
import { type MemberKinds, stubbed, stubLayer } from "../stubLayer.js"
import { ChainClient, type ChainClientShape } from "./ChainClient.js"

const operations: MemberKinds<ChainClientShape> = {
  chainId: "effect",
  blockNumber: "effect",
  getBlock: "function",
  getBalance: "function",
  getCode: "function",
  getTransactionCount: "function",
  readContract: "function",
  call: "function",
  estimateGas: "function",
  getLogs: "function",
  getTransactionReceipt: "function",
  getTransaction: "function",
  gasPrice: "effect",
  estimateFeesPerGas: "effect",
  sendRawTransaction: "function"
}

/** A complete `ChainClientShape` from the given stubs. */
export const makeMockChainClient: (overrides: Partial<ChainClientShape>) => ChainClientShape = stubbed(
  "ChainClient",
  operations
)

/** The `ChainClient` layer for a unit test. */
export const mockChainClient: (overrides: Partial<ChainClientShape>) => Layer.Layer<ChainClient> = stubLayer(
  ChainClient,
  operations
)
