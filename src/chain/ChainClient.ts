/**
 * The chain as the services see it: viem behind an Effect service with typed failures. Routes
 * and background work depend on this interface only, so tests can provide a mocked chain
 * (`MockChainClient.ts`).
 *
 * Every operation is one JSON-RPC exchange (or a few, for fee estimation) with a per-request
 * timeout. Transient failures (`ChainUnavailable`) are retried with jittered exponential backoff
 * for a bounded number of attempts; reverts and rejections are returned at once, since repeating
 * the same request cannot change the answer. While an endpoint has stopped answering, its circuit
 * (`circuit.ts`) refuses requests at once, without retries, until a probe is answered.
 */
import { Cause, Context, Duration, Effect, Exit, Layer, Option, Schedule } from "effect"
import {
  type Abi,
  type AbiEvent,
  type Address,
  BlockNotFoundError,
  type ContractFunctionArgs,
  type ContractFunctionName,
  type ContractFunctionParameters,
  createPublicClient,
  type DecodeFunctionResultParameters,
  decodeFunctionResult,
  type EncodeFunctionDataParameters,
  encodeFunctionData,
  type GetLogsParameters,
  type GetLogsReturnType,
  type Hash,
  type Hex,
  keccak256,
  type MaybeAbiEventName,
  type MaybeExtractEventArgsFromAbi,
  type PublicClient,
  type ReadContractReturnType,
  type Transaction,
  TransactionNotFoundError,
  type TransactionReceipt,
  TransactionReceiptNotFoundError
} from "viem"
import { CIRCUIT_OPEN, type CircuitSettings, makeCircuit } from "./circuit.js"
import {
  BlockNotFound,
  type ChainRequestError,
  ChainResultInvalid,
  ChainReverted,
  ChainUnavailable,
  classifyRpcMessage,
  decodeRevert,
  interpretFailure,
  isAlreadyKnown,
  RpcRejected
} from "./errors.js"
import { countRpcRequest } from "./metrics.js"
import { rpcTransport } from "./rpcTransport.js"

export {
  BlockNotFound,
  type ChainRequestError,
  ChainResultInvalid,
  ChainReverted,
  ChainUnavailable,
  classifyRpcError,
  classifyRpcMessage,
  decodeRevert,
  RpcRejected,
  type RpcRejectionKind
} from "./errors.js"

// ---------------------------------------------------------------------------------------------
// Interface

/** Tags that always name a mined block (unlike `pending`). */
export type MinedBlockTag = "latest" | "safe" | "finalized" | "earliest"

export type GetBlockRequest =
  | { readonly blockNumber: bigint; readonly blockHash?: undefined; readonly tag?: undefined }
  | { readonly blockHash: Hash; readonly blockNumber?: undefined; readonly tag?: undefined }
  | { readonly tag?: MinedBlockTag; readonly blockNumber?: undefined; readonly blockHash?: undefined }

/** What the services need of a block header: position, identity, link to its parent, time. */
export interface ChainBlock {
  readonly number: bigint
  readonly hash: Hash
  readonly parentHash: Hash
  readonly timestamp: bigint
}

export type ReadContractRequest<
  abi extends Abi | readonly unknown[],
  functionName extends ContractFunctionName<abi, "pure" | "view">,
  args extends ContractFunctionArgs<abi, "pure" | "view", functionName>
> = ContractFunctionParameters<abi, "pure" | "view", functionName, args> & {
  /** Read at this block instead of the latest. */
  readonly blockNumber?: bigint | undefined
}

export interface CallRequest {
  readonly from?: Address | undefined
  readonly to: Address
  readonly data: Hex
  readonly value?: bigint | undefined
  readonly gas?: bigint | undefined
  readonly blockNumber?: bigint | undefined
  /** Declares custom errors the callee may revert with, beside the client's `errorAbi`. */
  readonly errorAbi?: Abi | undefined
}

export interface EstimateGasRequest {
  readonly from: Address
  readonly to: Address
  readonly data: Hex
  readonly value?: bigint | undefined
  /** Declares custom errors the callee may revert with, beside the client's `errorAbi`. */
  readonly errorAbi?: Abi | undefined
}

/** `eth_getLogs` over an inclusive block range; with `event` or `events` the logs come decoded. */
export type GetLogsRequest<
  abiEvent extends AbiEvent | undefined,
  abiEvents extends readonly AbiEvent[] | readonly unknown[] | undefined,
  strict extends boolean | undefined
> = {
  readonly address?: Address | Address[] | undefined
  readonly fromBlock: bigint
  readonly toBlock: bigint
} & (
  | {
      readonly event: abiEvent
      readonly events?: undefined
      readonly args?: MaybeExtractEventArgsFromAbi<abiEvents, MaybeAbiEventName<abiEvent>> | undefined
      readonly strict?: strict | undefined
    }
  | {
      readonly event?: undefined
      readonly events: abiEvents
      readonly args?: undefined
      readonly strict?: strict | undefined
    }
  | {
      readonly event?: undefined
      readonly events?: undefined
      readonly args?: undefined
      readonly strict?: undefined
    }
)

export interface FeesPerGas {
  readonly maxFeePerGas: bigint
  readonly maxPriorityFeePerGas: bigint
}

export interface ChainClientShape {
  readonly chainId: Effect.Effect<number, ChainRequestError>
  readonly blockNumber: Effect.Effect<bigint, ChainRequestError>
  /** The latest block when called without a request. */
  readonly getBlock: (
    request?: GetBlockRequest
  ) => Effect.Effect<ChainBlock, ChainRequestError | BlockNotFound>
  readonly getBalance: (address: Address, blockNumber?: bigint) => Effect.Effect<bigint, ChainRequestError>
  /** `0x` when there is no code at the address. */
  readonly getCode: (address: Address, blockNumber?: bigint) => Effect.Effect<Hex, ChainRequestError>
  readonly getTransactionCount: (
    address: Address,
    blockTag?: "latest" | "pending"
  ) => Effect.Effect<number, ChainRequestError>
  /** Typed like viem's `readContract`; reverts are decoded with the call's ABI and `errorAbi`. */
  readonly readContract: <
    const abi extends Abi | readonly unknown[],
    functionName extends ContractFunctionName<abi, "pure" | "view">,
    const args extends ContractFunctionArgs<abi, "pure" | "view", functionName>
  >(
    request: ReadContractRequest<abi, functionName, args>
  ) => Effect.Effect<
    ReadContractReturnType<abi, functionName, args>,
    ChainRequestError | ChainReverted | ChainResultInvalid
  >
  /** Raw `eth_call`: the return data, `0x` when there is none. */
  readonly call: (request: CallRequest) => Effect.Effect<Hex, ChainRequestError | ChainReverted>
  readonly estimateGas: (
    request: EstimateGasRequest
  ) => Effect.Effect<bigint, ChainRequestError | ChainReverted>
  readonly getLogs: <
    const abiEvent extends AbiEvent | undefined = undefined,
    const abiEvents extends readonly AbiEvent[] | readonly unknown[] | undefined = abiEvent extends AbiEvent
      ? [abiEvent]
      : undefined,
    strict extends boolean | undefined = undefined
  >(
    request: GetLogsRequest<abiEvent, abiEvents, strict>
  ) => Effect.Effect<GetLogsReturnType<abiEvent, abiEvents, strict, bigint, bigint>, ChainRequestError>
  readonly getTransactionReceipt: (
    hash: Hash
  ) => Effect.Effect<Option.Option<TransactionReceipt>, ChainRequestError>
  readonly getTransaction: (hash: Hash) => Effect.Effect<Option.Option<Transaction>, ChainRequestError>
  readonly gasPrice: Effect.Effect<bigint, ChainRequestError>
  readonly estimateFeesPerGas: Effect.Effect<FeesPerGas, ChainRequestError>
  /**
   * Broadcasts a signed transaction through the send RPC (the private one when configured) and
   * returns its hash. A node that already knows the transaction counts as success, so a retry
   * after a lost answer is harmless.
   */
  readonly sendRawTransaction: (serialized: Hex) => Effect.Effect<Hash, ChainRequestError>
}

export class ChainClient extends Context.Tag("ChainClient")<ChainClient, ChainClientShape>() {
  static readonly layer = (options: ChainClientOptions): Layer.Layer<ChainClient> =>
    Layer.sync(ChainClient, () => makeChainClient(options))
}

export interface ChainClientOptions {
  readonly rpcUrl: string
  /** Where signed transactions go (a private RPC); the main RPC when absent. */
  readonly sendRpcUrl?: string | undefined
  /** Per request, including reading the response. */
  readonly timeoutMs: number
  /** Attempts after the first for transient failures. Default 2. */
  readonly retries?: number | undefined
  /** First backoff delay; doubles per attempt (jittered), capped at 5 s. Default 100 ms. */
  readonly retryBaseDelayMs?: number | undefined
  /** Custom errors to decode reverts with, e.g. the vault's ABI. */
  readonly errorAbi?: Abi | undefined
  /** The circuit breaker of each endpoint (`circuit.ts`); without it, the circuits never open. */
  readonly circuit?: CircuitSettings | undefined
}

// ---------------------------------------------------------------------------------------------
// Implementation

const MAX_BACKOFF = Duration.seconds(5)

const backoff = (retries: number, baseDelayMs: number) =>
  Schedule.exponential(Duration.millis(baseDelayMs), 2).pipe(
    Schedule.jittered,
    Schedule.modifyDelay((_, delay) => Duration.min(delay, MAX_BACKOFF)),
    Schedule.intersect(Schedule.recurs(Math.max(0, retries)))
  )

const noAbis: ReadonlyArray<Abi> = []

const makeViemClient = (url: string, timeoutMs: number): PublicClient =>
  createPublicClient({
    transport: rpcTransport(url, { timeoutMs }),
    // Off-chain lookups (EIP-3668) would let any called contract make this process fetch URLs.
    ccipRead: false,
    cacheTime: 0
  })

/** Resolves to `undefined` instead of rejecting when viem reports "not found" with `notFound`. */
const orUndefined = <A>(promise: Promise<A>, notFound: (error: unknown) => boolean): Promise<A | undefined> =>
  promise.catch((error: unknown) => {
    if (notFound(error)) return undefined
    throw error
  })

export const makeChainClient = (options: ChainClientOptions): ChainClientShape => {
  const client = makeViemClient(options.rpcUrl, options.timeoutMs)
  const sendClient =
    options.sendRpcUrl === undefined ? client : makeViemClient(options.sendRpcUrl, options.timeoutMs)
  const schedule = backoff(options.retries ?? 2, options.retryBaseDelayMs ?? 100)
  const clientAbis = options.errorAbi === undefined ? noAbis : [options.errorAbi]
  const circuitSettings = options.circuit ?? { failures: 0, probeAfterMs: 0 }
  const rpcCircuit = makeCircuit(circuitSettings, "rpc")
  // The send RPC is another endpoint, which may fail on its own.
  const sendCircuit = options.sendRpcUrl === undefined ? rpcCircuit : makeCircuit(circuitSettings, "send")
  const circuitOf = (operation: string) => (operation === "eth_sendRawTransaction" ? sendCircuit : rpcCircuit)

  /**
   * One attempt of a request. With `revertAbis` a revert is a `ChainReverted` decoded with them;
   * without, a revert cannot be meant and is reported as the node's rejection.
   */
  function attempt<A>(
    operation: string,
    attemptNumber: number,
    run: (signal: AbortSignal) => Promise<A>
  ): Effect.Effect<A, ChainRequestError>
  function attempt<A>(
    operation: string,
    attemptNumber: number,
    run: (signal: AbortSignal) => Promise<A>,
    revertAbis: ReadonlyArray<Abi>
  ): Effect.Effect<A, ChainRequestError | ChainReverted>
  function attempt<A>(
    operation: string,
    attemptNumber: number,
    run: (signal: AbortSignal) => Promise<A>,
    revertAbis?: ReadonlyArray<Abi>
  ): Effect.Effect<A, ChainRequestError | ChainReverted> {
    const circuit = circuitOf(operation)
    return Effect.flatMap(circuit.admit, (admit) =>
      admit === "refuse"
        ? Effect.fail(
            new ChainUnavailable({
              operation,
              reason: CIRCUIT_OPEN,
              attempts: attemptNumber,
              cause: undefined
            })
          )
        : once(operation, attemptNumber, run, revertAbis).pipe(
            Effect.onExit((exit) =>
              circuit.settle(
                admit === "probe",
                Exit.match(exit, {
                  onSuccess: () => "answered" as const,
                  onFailure: (cause) =>
                    Option.match(Cause.failureOption(cause), {
                      // Interrupted, or a fault of ours: nothing said of the endpoint.
                      onNone: () => "neither" as const,
                      onSome: (error) => (error._tag === "ChainUnavailable" ? "unanswered" : "answered")
                    })
                })
              )
            )
          )
    ).pipe(Effect.onExit((exit) => countRpcRequest(operation, exit)))
  }

  /** One attempt that went out to the node. */
  function once<A>(
    operation: string,
    attemptNumber: number,
    run: (signal: AbortSignal) => Promise<A>,
    revertAbis?: ReadonlyArray<Abi>
  ): Effect.Effect<A, ChainRequestError | ChainReverted> {
    return Effect.tryPromise({ try: run, catch: (cause) => cause }).pipe(
      Effect.catchAll((cause): Effect.Effect<never, ChainRequestError | ChainReverted> => {
        const failure = interpretFailure(cause)
        switch (failure._tag) {
          case "Transient":
            return Effect.fail(
              new ChainUnavailable({ operation, reason: failure.reason, attempts: attemptNumber, cause })
            )
          case "Reverted": {
            if (revertAbis === undefined)
              return Effect.fail(
                new RpcRejected({
                  operation,
                  code: 3,
                  httpStatus: undefined,
                  rpcMessage: failure.nodeMessage,
                  kind: "other",
                  cause
                })
              )
            const decoded = decodeRevert(failure.data, revertAbis, failure.nodeMessage)
            return Effect.fail(new ChainReverted({ operation, data: failure.data, ...decoded, cause }))
          }
          case "Rejected":
            return Effect.fail(
              new RpcRejected({
                operation,
                code: failure.code,
                httpStatus: failure.httpStatus,
                rpcMessage: failure.message,
                kind: classifyRpcMessage(failure.message),
                cause
              })
            )
          case "Unknown":
            // Not the node's or the network's doing: invalid arguments or a bug.
            return Effect.die(cause)
        }
      })
    )
  }

  /** Runs `once` until it succeeds, fails for good, or runs out of attempts for a transient failure. */
  const retrying = <A, E>(
    operation: string,
    once: (attemptNumber: number) => Effect.Effect<A, E | ChainUnavailable>
  ): Effect.Effect<A, E | ChainUnavailable> =>
    Effect.suspend(() => {
      let attempts = 0
      return Effect.suspend(() => once(++attempts)).pipe(
        // Not while the circuit is open: the next attempt would be refused as well.
        Effect.retry({
          schedule,
          while: (error) => error instanceof ChainUnavailable && error.reason !== CIRCUIT_OPEN
        })
      )
    }).pipe(
      // Named by its operation; the stack trace a span takes by default would always point here,
      // and taking it is a measurable share of a request's cost.
      Effect.withSpan(`ChainClient.${operation}`, { captureStackTrace: false })
    )

  const request = <A>(operation: string, run: (signal: AbortSignal) => Promise<A>) =>
    retrying(operation, (n) => attempt(operation, n, run))

  const simulate = <A>(
    operation: string,
    run: (signal: AbortSignal) => Promise<A>,
    abis: ReadonlyArray<Abi>
  ) => retrying(operation, (n) => attempt(operation, n, run, abis))

  const call = (req: CallRequest): Effect.Effect<Hex, ChainRequestError | ChainReverted> =>
    simulate(
      "eth_call",
      (signal) =>
        client
          .call({
            account: req.from,
            to: req.to,
            data: req.data,
            value: req.value,
            gas: req.gas,
            blockNumber: req.blockNumber,
            requestOptions: { signal }
          })
          .then((result) => result.data ?? "0x"),
      req.errorAbi === undefined ? clientAbis : [req.errorAbi, ...clientAbis]
    )

  const readContract = <
    const abi extends Abi | readonly unknown[],
    functionName extends ContractFunctionName<abi, "pure" | "view">,
    const args extends ContractFunctionArgs<abi, "pure" | "view", functionName>
  >(
    req: ReadContractRequest<abi, functionName, args>
  ): Effect.Effect<
    ReadContractReturnType<abi, functionName, args>,
    ChainRequestError | ChainReverted | ChainResultInvalid
  > => {
    const operation = `eth_call(${req.functionName})`
    // Arguments that do not fit the ABI are the caller's bug: encoding throws, which is a defect.
    return Effect.sync(() =>
      encodeFunctionData({
        abi: req.abi,
        functionName: req.functionName,
        args: req.args
      } as EncodeFunctionDataParameters)
    ).pipe(
      Effect.flatMap((data) =>
        simulate(
          operation,
          (signal) =>
            client
              .call({ to: req.address, data, blockNumber: req.blockNumber, requestOptions: { signal } })
              .then((result) => result.data ?? "0x"),
          [req.abi as Abi, ...clientAbis]
        )
      ),
      Effect.flatMap((data) =>
        Effect.try({
          try: () =>
            decodeFunctionResult({
              abi: req.abi,
              functionName: req.functionName,
              args: req.args,
              data
            } as DecodeFunctionResultParameters) as ReadContractReturnType<abi, functionName, args>,
          catch: (cause) =>
            new ChainResultInvalid({
              operation,
              reason:
                data === "0x" ? "empty return data (no contract at the address?)" : "undecodable return data",
              cause
            })
        })
      )
    )
  }

  const describeBlock = (req: GetBlockRequest): string =>
    req.blockNumber !== undefined
      ? `number ${req.blockNumber}`
      : req.blockHash !== undefined
        ? `hash ${req.blockHash}`
        : `tag ${req.tag ?? "latest"}`

  return {
    chainId: request("eth_chainId", () => client.getChainId()),
    blockNumber: request("eth_blockNumber", () => client.getBlockNumber({ cacheTime: 0 })),
    getBlock: (req = {}) =>
      request("eth_getBlock", () =>
        orUndefined(
          req.blockNumber !== undefined
            ? client.getBlock({ blockNumber: req.blockNumber })
            : req.blockHash !== undefined
              ? client.getBlock({ blockHash: req.blockHash })
              : client.getBlock({ blockTag: req.tag ?? "latest" }),
          (error) => error instanceof BlockNotFoundError
        )
      ).pipe(
        Effect.flatMap((block) =>
          block === undefined || block.number === null || block.hash === null
            ? Effect.fail(new BlockNotFound({ block: describeBlock(req) }))
            : Effect.succeed({
                number: block.number,
                hash: block.hash,
                parentHash: block.parentHash,
                timestamp: block.timestamp
              })
        )
      ),
    getBalance: (address, blockNumber) =>
      request("eth_getBalance", () => client.getBalance({ address, blockNumber })),
    getCode: (address, blockNumber) =>
      request("eth_getCode", () => client.getCode({ address, blockNumber }).then((code) => code ?? "0x")),
    getTransactionCount: (address, blockTag = "latest") =>
      request("eth_getTransactionCount", () => client.getTransactionCount({ address, blockTag })),
    readContract,
    call,
    estimateGas: (req) =>
      simulate(
        "eth_estimateGas",
        () =>
          // `prepare: false`: exactly one eth_estimateGas, no filling of fees or nonce first.
          // The latest block, named: geth, reth and erigon take it by default, anvil and hardhat
          // the pending one, which first executes every transaction in their pool.
          client.estimateGas({
            account: req.from,
            to: req.to,
            data: req.data,
            value: req.value,
            blockTag: "latest",
            prepare: false
          }),
        req.errorAbi === undefined ? clientAbis : [req.errorAbi, ...clientAbis]
      ),
    getLogs: <
      const abiEvent extends AbiEvent | undefined = undefined,
      const abiEvents extends readonly AbiEvent[] | readonly unknown[] | undefined = abiEvent extends AbiEvent
        ? [abiEvent]
        : undefined,
      strict extends boolean | undefined = undefined
    >(
      req: GetLogsRequest<abiEvent, abiEvents, strict>
    ) =>
      request(
        "eth_getLogs",
        () =>
          client.getLogs(req as GetLogsParameters<abiEvent, abiEvents, strict, bigint, bigint>) as Promise<
            GetLogsReturnType<abiEvent, abiEvents, strict, bigint, bigint>
          >
      ),
    getTransactionReceipt: (hash) =>
      request("eth_getTransactionReceipt", () =>
        orUndefined(
          client.getTransactionReceipt({ hash }),
          (error) => error instanceof TransactionReceiptNotFoundError
        )
      ).pipe(Effect.map(Option.fromNullable)),
    getTransaction: (hash) =>
      request("eth_getTransactionByHash", () =>
        orUndefined(client.getTransaction({ hash }), (error) => error instanceof TransactionNotFoundError)
      ).pipe(Effect.map(Option.fromNullable)),
    gasPrice: request("eth_gasPrice", () => client.getGasPrice()),
    estimateFeesPerGas: request("estimateFeesPerGas", () =>
      client
        .estimateFeesPerGas()
        .then(({ maxFeePerGas, maxPriorityFeePerGas }) => ({ maxFeePerGas, maxPriorityFeePerGas }))
    ),
    sendRawTransaction: (serialized) =>
      request("eth_sendRawTransaction", () =>
        sendClient.sendRawTransaction({ serializedTransaction: serialized }).catch((error: unknown) => {
          // The hash of a typed or legacy envelope is the hash of its bytes; blob transactions in
          // network form carry sidecars outside the hash, so they keep the error.
          if (isAlreadyKnown(error) && !serialized.startsWith("0x03")) return keccak256(serialized)
          throw error
        })
      )
  }
}
