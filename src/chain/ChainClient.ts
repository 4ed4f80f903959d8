/**
 * The chain as the services see it: viem behind an Effect service with typed failures. Routes
 * and background work depend on this interface only, so tests can provide a mocked chain.
 */
import { Context, Data, Duration, Effect, Layer, Schedule } from "effect"
import { createPublicClient, http, type PublicClient } from "viem"

/** The RPC could not be reached or did not answer in time: worth retrying, never the caller's fault. */
export class ChainUnavailable extends Data.TaggedError("ChainUnavailable")<{
  readonly operation: string
  readonly cause: unknown
}> {
  override get message() {
    return `chain unavailable during ${this.operation}`
  }
}

export interface ChainClientShape {
  readonly chainId: Effect.Effect<number, ChainUnavailable>
  readonly blockNumber: Effect.Effect<bigint, ChainUnavailable>
}

export class ChainClient extends Context.Tag("ChainClient")<ChainClient, ChainClientShape>() {}

export interface ChainClientOptions {
  readonly rpcUrl: string
  readonly timeoutMs: number
  /** Attempts after the first for transient failures. */
  readonly retries?: number
}

const transientRetry = (retries: number) =>
  Schedule.exponential(Duration.millis(100), 2).pipe(
    Schedule.jittered,
    Schedule.intersect(Schedule.recurs(retries))
  )

export const makeChainClient = (client: PublicClient, retries: number): ChainClientShape => {
  const call = <A>(operation: string, f: () => Promise<A>) =>
    Effect.tryPromise({ try: f, catch: (cause) => new ChainUnavailable({ operation, cause }) }).pipe(
      Effect.retry(transientRetry(retries))
    )
  return {
    chainId: call("eth_chainId", () => client.getChainId()),
    blockNumber: call("eth_blockNumber", () => client.getBlockNumber({ cacheTime: 0 }))
  }
}

export const chainClientLayer = (options: ChainClientOptions) =>
  Layer.sync(ChainClient, () =>
    makeChainClient(
      createPublicClient({ transport: http(options.rpcUrl, { timeout: options.timeoutMs, retryCount: 0 }) }),
      options.retries ?? 2
    )
  )
