/**
 * Fetching and decoding the vault's logs: the adaptive `eth_getLogs` range (shrinks on "too many
 * results" and timeouts, grows back within the ceiling, gives up only at a single block) against a
 * mocked chain, and decoding a log into the store's JSON form.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import {
  type AbiEvent,
  decodeEventLog,
  encodeAbiParameters,
  encodeEventTopics,
  getAddress,
  type Hex,
  keccak256,
  type Log,
  numberToHex
} from "viem"
import { feeVaultAbi } from "../../contracts/abi.js"
import { type ChainClientShape, ChainUnavailable, RpcRejected } from "../../src/chain/ChainClient.js"
import { makeMockChainClient } from "../../src/chain/MockChainClient.js"
import { decodeVaultLog, makeLogFetcher, minedLog } from "../../src/indexer/logs.js"

const VAULT = getAddress(numberToHex(0xbeef, { size: 20 }))

/** A chain whose getLogs refuses ranges wider than `limit` blocks, and records every request. */
const chainWithLimit = (
  limit: number,
  fail: (from: number, to: number) => "timeout" | undefined = () => undefined
) => {
  const requests: Array<[number, number]> = []
  const getLogs = ((req: { fromBlock: bigint; toBlock: bigint }) => {
    const from = Number(req.fromBlock)
    const to = Number(req.toBlock)
    requests.push([from, to])
    if (fail(from, to) === "timeout")
      return Effect.fail(
        new ChainUnavailable({
          operation: "eth_getLogs",
          reason: "request timed out",
          attempts: 3,
          cause: undefined
        })
      )
    if (to - from + 1 > limit)
      return Effect.fail(
        new RpcRejected({
          operation: "eth_getLogs",
          code: -32005,
          httpStatus: undefined,
          rpcMessage: "query returned more than 10000 results",
          kind: "range_too_large",
          cause: undefined
        })
      )
    return Effect.succeed([] as Log[])
  }) as unknown as ChainClientShape["getLogs"]
  return { chain: makeMockChainClient({ getLogs }), requests }
}

describe("the adaptive log range", () => {
  it.effect("halves on too many results and fetches a whole span in allowed ranges", () =>
    Effect.gen(function* () {
      const { chain, requests } = chainWithLimit(300)
      const fetcher = yield* makeLogFetcher(chain, VAULT, { maxBlockRange: 1000 })
      yield* fetcher.fetchAll(1, 1000)
      // 1000 refused, 500 refused, 250 accepted; growth stops below the size that failed.
      expect(requests.slice(0, 3)).toEqual([
        [1, 1000],
        [1, 500],
        [1, 250]
      ])
      const accepted = requests.filter(([from, to]) => to - from + 1 <= 300)
      expect(accepted[0]?.[0]).toBe(1)
      expect(accepted[accepted.length - 1]?.[1]).toBe(1000)
      for (let i = 1; i < accepted.length; i++) expect(accepted[i]?.[0]).toBe((accepted[i - 1]?.[1] ?? 0) + 1)
      expect(yield* fetcher.currentSize).toBeLessThanOrEqual(250)
    })
  )

  it.effect("grows back after successes, never above the ceiling", () =>
    Effect.gen(function* () {
      let limit = 10
      const { chain, requests } = chainWithLimit(Number.POSITIVE_INFINITY, (from, to) =>
        to - from + 1 > limit ? "timeout" : undefined
      )
      const fetcher = yield* makeLogFetcher(chain, VAULT, { maxBlockRange: 64 })
      yield* fetcher.fetchSome(1, 10_000)
      expect(yield* fetcher.currentSize).toBeLessThanOrEqual(10)
      limit = Number.POSITIVE_INFINITY
      let from = 100
      for (let i = 0; i < 40; i++) from = (yield* fetcher.fetchSome(from, 100_000)).toBlock + 1
      expect(yield* fetcher.currentSize).toBe(64)
      expect(Math.max(...requests.map(([a, b]) => b - a + 1))).toBe(64)
    })
  )

  it.effect("fails when even one block is too much", () =>
    Effect.gen(function* () {
      const { chain } = chainWithLimit(0)
      const fetcher = yield* makeLogFetcher(chain, VAULT, { maxBlockRange: 8 })
      const error = yield* Effect.flip(fetcher.fetchSome(5, 100))
      expect(error._tag).toBe("RpcRejected")
    })
  )
})

describe("decoding vault logs", () => {
  it("turns a log into the stored form with exact decimal amounts", () => {
    const id = keccak256("0x01")
    const asset = getAddress(numberToHex(0x1001, { size: 20 }))
    const from = getAddress(numberToHex(0x2002, { size: 20 }))
    const amount = 2n ** 200n + 1n
    const raw = {
      address: VAULT,
      blockNumber: 7n,
      blockHash: keccak256("0x07"),
      logIndex: 3,
      transactionHash: keccak256("0x70"),
      transactionIndex: 0,
      removed: false,
      topics: encodeEventTopics({ abi: feeVaultAbi, eventName: "Deposited", args: { id, asset, from } }) as [
        Hex,
        ...Hex[]
      ],
      data: encodeAbiParameters([{ type: "uint256" }], [amount])
    } as unknown as Log
    const stored = Either.flatMap(minedLog(raw), decodeVaultLog)
    expect(Either.getOrThrow(stored)).toEqual({
      blockNumber: 7,
      blockHash: keccak256("0x07"),
      logIndex: 3,
      txHash: keccak256("0x70"),
      eventName: "Deposited",
      args: { id, asset, from, amount: amount.toString() }
    })
    const unknown = Either.flatMap(minedLog({ ...raw, topics: [keccak256("0x")] } as Log), decodeVaultLog)
    expect(Either.isLeft(unknown)).toBe(true)
  })
})

describe("decoding every vault event", () => {
  const events = feeVaultAbi.filter((item) => item.type === "event") as unknown as ReadonlyArray<AbiEvent>
  let n = 0
  const sample = (type: string): unknown => {
    n++
    switch (type) {
      case "address":
        return getAddress(numberToHex(BigInt(keccak256(numberToHex(n))) >> 96n, { size: 20 }))
      case "bytes32":
        return keccak256(numberToHex(n))
      case "uint256":
        return BigInt(keccak256(numberToHex(n))) >> BigInt(n % 200)
      case "uint8":
        return 1 + (n % 2)
      case "bool":
        return n % 2 === 0
      case "bytes":
        return "0xdeadbeef"
      default:
        throw new Error(`no sample for ${type}`)
    }
  }
  const json = (v: unknown) =>
    JSON.parse(JSON.stringify(v, (_, x) => (typeof x === "bigint" ? x.toString() : x)))

  it.each(events.map((e) => [e.name, e] as const))("%s decodes as viem decodes it", (_, event) => {
    const args: Record<string, unknown> = {}
    for (const input of event.inputs) args[input.name as string] = sample(input.type)
    const nonIndexed = event.inputs.filter((i) => i.indexed !== true)
    const topics = encodeEventTopics({ abi: [event], eventName: event.name, args } as never) as [
      Hex,
      ...Hex[]
    ]
    const data = encodeAbiParameters(nonIndexed, nonIndexed.map((i) => args[i.name as string]) as never)
    const log = {
      blockNumber: 1n,
      blockHash: keccak256("0x01"),
      logIndex: 0,
      transactionHash: keccak256("0x02"),
      topics,
      data
    } as unknown as Log
    const ours = Either.getOrThrow(Either.flatMap(minedLog(log), decodeVaultLog))
    const viem = decodeEventLog({ abi: [event], topics, data, strict: true })
    expect(ours.eventName).toBe(viem.eventName)
    expect(ours.args).toEqual(json(viem.args ?? {}))
  })

  it("refuses data that does not fit the event", () => {
    const event = events.find((e) => e.name === "Registered") as AbiEvent
    const topics = encodeEventTopics({
      abi: [event],
      eventName: "Registered",
      args: { id: keccak256("0x01") }
    } as never) as [Hex, ...Hex[]]
    // Four words where Registered has five.
    const words = [
      numberToHex(1, { size: 32 }),
      numberToHex(2, { size: 32 }),
      keccak256("0x"),
      numberToHex(0, { size: 32 })
    ]
    const log = {
      blockNumber: 1n,
      blockHash: keccak256("0x01"),
      logIndex: 0,
      transactionHash: keccak256("0x02"),
      topics,
      data: `0x${words.map((w) => w.slice(2)).join("")}`
    } as unknown as Log
    expect(Either.isLeft(Either.flatMap(minedLog(log), decodeVaultLog))).toBe(true)
  })
})
