/**
 * Fetching the vault's logs: `eth_getLogs` over block ranges whose size adapts to the provider
 * (halved on "too many results"/range errors and timeouts, grown again after successes, never
 * above the configured ceiling; the sizing is decided in `decisions.ts`), and decoding each log
 * into the event store's form.
 */
import { Data, Effect, Either, Metric, Ref } from "effect"
import {
  type AbiEvent,
  type Address,
  decodeEventLog,
  getAddress,
  type Hex,
  type Log,
  toEventSelector
} from "viem"
import { feeVaultAbi } from "../../contracts/abi.js"
import {
  type ChainClientShape,
  type ChainRequestError,
  ChainUnavailable,
  classifyRpcError
} from "../chain/ChainClient.js"
import type { StoredEvent } from "../store/EventStore.js"
import { afterLogsAnswered, afterLogsRefused, initialSizer, logRequest } from "./decisions.js"
import { countRpcError, rangeSize } from "./metrics.js"

/** A vault log that matches no event of the vault's ABI. */
export class UndecodableLog extends Data.TaggedError("UndecodableLog")<{
  readonly blockNumber: number
  readonly logIndex: number
}> {
  override get message() {
    return `vault log at block ${this.blockNumber} index ${this.logIndex} matches no known event`
  }
}

/** A log the node returned without the position a mined log has (a pending log). */
export class IncompleteLog extends Data.TaggedError("IncompleteLog")<{
  readonly reason: string
}> {}

const vaultEvents: ReadonlyMap<Hex, AbiEvent> = new Map(
  feeVaultAbi
    .filter((item): item is Extract<typeof item, { type: "event" }> => item.type === "event")
    .map((event) => [toEventSelector(event), event as AbiEvent])
)

/** JSON of decoded arguments: uint256 values become exact decimal strings. */
const toJson = (value: unknown): unknown => {
  if (typeof value === "bigint") return value.toString()
  if (Array.isArray(value)) return value.map(toJson)
  if (typeof value === "object" && value !== null) {
    const out: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(value)) out[k] = toJson(v)
    return out
  }
  return value
}

export interface MinedLog {
  readonly blockNumber: number
  readonly blockHash: Hex
  readonly logIndex: number
  readonly transactionHash: Hex
  readonly topics: readonly Hex[]
  readonly data: Hex
}

export const minedLog = (log: Log): Either.Either<MinedLog, IncompleteLog> =>
  log.blockNumber === null || log.blockHash === null || log.logIndex === null || log.transactionHash === null
    ? Either.left(new IncompleteLog({ reason: "a log without block, index or transaction" }))
    : Either.right({
        blockNumber: Number(log.blockNumber),
        blockHash: log.blockHash,
        logIndex: log.logIndex,
        transactionHash: log.transactionHash,
        topics: log.topics as readonly Hex[],
        data: log.data
      })

/**
 * Events whose parameters are all one-word static types are decoded word by word: the vault's
 * account events are all of this kind, and a backfill decodes every one of them. The rest (and
 * anything that does not fit the expected layout) goes through viem's decoder.
 */
/** A word's value, or undefined when the word is not a valid encoding of the type. */
type WordDecoder = (word: string) => unknown

const ZERO_PADDING = "000000000000000000000000"

const wordDecoders: Readonly<Record<string, WordDecoder>> = {
  address: (word) => (word.startsWith(ZERO_PADDING) ? checksummed(`0x${word.slice(24)}`) : undefined),
  bytes32: (word) => `0x${word}`,
  bool: (word) => {
    const n = BigInt(`0x${word}`)
    return n === 0n ? false : n === 1n ? true : undefined
  },
  uint8: (word) => {
    const n = BigInt(`0x${word}`)
    return n <= 255n ? Number(n) : undefined
  },
  uint256: (word) => BigInt(`0x${word}`).toString()
}

/** Checksumming costs a keccak; assets, relayers and the zero address come back again and again. */
const CHECKSUM_CACHE_SIZE = 4096
const checksumCache = new Map<string, Address>()
const checksummed = (lower: string): Address => {
  const hit = checksumCache.get(lower)
  if (hit !== undefined) return hit
  const address = getAddress(lower)
  if (checksumCache.size >= CHECKSUM_CACHE_SIZE) checksumCache.clear()
  checksumCache.set(lower, address)
  return address
}

interface StaticLayout {
  readonly name: string
  readonly indexed: ReadonlyArray<readonly [string, WordDecoder]>
  readonly data: ReadonlyArray<readonly [string, WordDecoder]>
}

const staticLayouts: ReadonlyMap<Hex, StaticLayout> = new Map(
  [...vaultEvents].flatMap(([selector, event]) => {
    const indexed: Array<readonly [string, WordDecoder]> = []
    const data: Array<readonly [string, WordDecoder]> = []
    for (const input of event.inputs) {
      const decoder = wordDecoders[input.type]
      if (decoder === undefined || input.name === undefined) return []
      ;(input.indexed === true ? indexed : data).push([input.name, decoder])
    }
    return [[selector, { name: event.name, indexed, data }] as const]
  })
)

const WORD = /^[0-9a-f]*$/

const decodeStatic = (layout: StaticLayout, log: MinedLog): Record<string, unknown> | undefined => {
  const data = log.data.slice(2).toLowerCase()
  if (
    log.topics.length !== layout.indexed.length + 1 ||
    data.length !== layout.data.length * 64 ||
    !WORD.test(data)
  )
    return undefined
  const args: Record<string, unknown> = {}
  for (let i = 0; i < layout.indexed.length; i++) {
    const [name, decode] = layout.indexed[i] as readonly [string, WordDecoder]
    const topic = (log.topics[i + 1] as string).slice(2).toLowerCase()
    if (topic.length !== 64 || !WORD.test(topic)) return undefined
    const value = decode(topic)
    if (value === undefined) return undefined
    args[name] = value
  }
  for (let i = 0; i < layout.data.length; i++) {
    const [name, decode] = layout.data[i] as readonly [string, WordDecoder]
    const value = decode(data.slice(i * 64, (i + 1) * 64))
    if (value === undefined) return undefined
    args[name] = value
  }
  return args
}

/** The stored form of one vault log. */
export const decodeVaultLog = (log: MinedLog): Either.Either<StoredEvent, UndecodableLog> => {
  const undecodable = () =>
    Either.left(new UndecodableLog({ blockNumber: log.blockNumber, logIndex: log.logIndex }))
  const selector = log.topics[0]?.toLowerCase() as Hex | undefined
  const event = selector === undefined ? undefined : vaultEvents.get(selector)
  if (event === undefined || selector === undefined) return undecodable()
  const stored = (eventName: string, args: Record<string, unknown>) =>
    Either.right({
      blockNumber: log.blockNumber,
      blockHash: log.blockHash,
      logIndex: log.logIndex,
      txHash: log.transactionHash,
      eventName,
      args
    })
  const layout = staticLayouts.get(selector)
  const fast = layout === undefined ? undefined : decodeStatic(layout, log)
  if (layout !== undefined && fast !== undefined) return stored(layout.name, fast)
  try {
    const decoded = decodeEventLog({
      abi: [event],
      topics: log.topics as [Hex, ...Hex[]],
      data: log.data,
      strict: true
    })
    return stored(decoded.eventName, toJson(decoded.args ?? {}) as Record<string, unknown>)
  } catch {
    return undecodable()
  }
}

export interface LogRangeOptions {
  /** The largest range ever asked for. */
  readonly maxBlockRange: number
}

export interface LogFetcher {
  /**
   * Logs of the vault from `fromBlock` up to at most `toBlock` in one request: the range is cut to
   * the current size, and cut again on range errors. Answers which block the logs reach.
   */
  readonly fetchSome: (
    fromBlock: number,
    toBlock: number
  ) => Effect.Effect<{ readonly toBlock: number; readonly logs: ReadonlyArray<Log> }, ChainRequestError>
  /** Every log of `fromBlock..toBlock`, in as many requests as it takes. */
  readonly fetchAll: (
    fromBlock: number,
    toBlock: number
  ) => Effect.Effect<ReadonlyArray<Log>, ChainRequestError>
  readonly currentSize: Effect.Effect<number>
}

/** The provider refused the range as too large, or gave up on it in time: a smaller range may pass. */
const rangeTooLarge = (error: ChainRequestError): boolean =>
  classifyRpcError(error) === "range_too_large" ||
  (error instanceof ChainUnavailable && /timed out|timeout/i.test(error.reason))

export const makeLogFetcher = (
  chain: ChainClientShape,
  vault: Address,
  options: LogRangeOptions
): Effect.Effect<LogFetcher> =>
  Effect.gen(function* () {
    const state = yield* Ref.make(initialSizer(options.maxBlockRange))

    const fetchSome: LogFetcher["fetchSome"] = (fromBlock, toBlock) =>
      Effect.gen(function* () {
        while (true) {
          const request = logRequest(yield* Ref.get(state), fromBlock, toBlock)
          const attempt = yield* Effect.either(
            chain.getLogs({ address: vault, fromBlock: BigInt(request.from), toBlock: BigInt(request.to) })
          )
          if (Either.isRight(attempt)) {
            const sizer = yield* Ref.updateAndGet(state, (s) => afterLogsAnswered(s, options.maxBlockRange))
            yield* Metric.set(rangeSize, sizer.size)
            return { toBlock: request.to, logs: attempt.right }
          }
          const error = attempt.left
          yield* countRpcError(classifyRpcError(error) === "other" ? error._tag : classifyRpcError(error))
          const next = afterLogsRefused(request, rangeTooLarge(error))
          if (next._tag === "GiveUp") return yield* Effect.fail(error)
          yield* Ref.set(state, next.sizer)
          yield* Metric.set(rangeSize, next.sizer.size)
        }
      })

    const fetchAll: LogFetcher["fetchAll"] = (fromBlock, toBlock) =>
      Effect.gen(function* () {
        const logs: Array<Log> = []
        let from = fromBlock
        while (from <= toBlock) {
          const part = yield* fetchSome(from, toBlock)
          logs.push(...part.logs)
          from = part.toBlock + 1
        }
        return logs
      })

    return { fetchSome, fetchAll, currentSize: Effect.map(Ref.get(state), (s) => s.size) }
  })
