/**
 * A `ChainClient` for unit tests of logic above the chain: stub the operations a test expects,
 * and any other one dies with "ChainClient.<op> not stubbed", so an unexpected chain access
 * shows up as a failure instead of a silent default.
 */
import { Effect, Layer } from "effect"
import { ChainClient, type ChainClientShape } from "./ChainClient.js"

// Whether each operation is an Effect value or a function returning one. Typed against the
// interface, so a new operation does not compile until it is listed here.
const operations = {
  chainId: "value",
  blockNumber: "value",
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
  gasPrice: "value",
  estimateFeesPerGas: "value",
  sendRawTransaction: "function"
} as const satisfies Record<keyof ChainClientShape, "value" | "function">

const notStubbed = (operation: string) => Effect.dieMessage(`ChainClient.${operation} not stubbed`)

/** A complete `ChainClientShape` from the given stubs. */
export const makeMockChainClient = (overrides: Partial<ChainClientShape>): ChainClientShape => {
  const shape: Record<string, unknown> = {}
  for (const [operation, kind] of Object.entries(operations)) {
    shape[operation] = kind === "value" ? notStubbed(operation) : () => notStubbed(operation)
  }
  // Every key of `operations` is set above, so the object is complete.
  return { ...(shape as unknown as ChainClientShape), ...overrides }
}

/** The `ChainClient` layer for a unit test. */
export const mockChainClient = (overrides: Partial<ChainClientShape>): Layer.Layer<ChainClient> =>
  Layer.succeed(ChainClient, makeMockChainClient(overrides))
