/**
 * The `/v1/accounts` feed above the indexer, with the indexer stubbed: refusals while disabled or
 * not ready, the body built from a snapshot, and the conditional-request and encoding rules.
 */
import { gunzipSync, gzipSync } from "node:zlib"
import type { HttpServerResponse } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Layer, Schema, Stream, TestClock } from "effect"
import { getAddress, type Hex, keccak256, numberToHex } from "viem"
import { AccountsResponse } from "../../schema/relayer.js"
import type { ChainClientShape } from "../../src/chain/ChainClient.js"
import { ChainUnavailable } from "../../src/chain/errors.js"
import { mockChainClient } from "../../src/chain/MockChainClient.js"
import { Indexer, type IndexerShape } from "../../src/indexer/Indexer.js"
import {
  AccountsBodyCache,
  AccountsFeed,
  acceptsGzip,
  accountsFeedLayer,
  etagMatches
} from "../../src/relayer/accounts.js"
import { AccountsProjection } from "../../src/store/projections/AccountsProjection.js"
import { accountJson } from "../../src/store/projections/accounts.js"

const USDT = getAddress(numberToHex(0x1001, { size: 20 }))
const VAULT = getAddress(numberToHex(0xbeef, { size: 20 }))

/** Without stubs the chain dies when asked: a fresh index never asks it. */
const withIndexer = (indexer: IndexerShape, chain: Partial<ChainClientShape> = {}) =>
  accountsFeedLayer.pipe(
    Layer.provide(Layer.succeed(Indexer, indexer)),
    Layer.provide(mockChainClient(chain))
  )

const chainDown: Partial<ChainClientShape> = {
  blockNumber: Effect.fail(
    new ChainUnavailable({ operation: "eth_blockNumber", reason: "no answer", attempts: 3, cause: undefined })
  )
}
const chainUp: Partial<ChainClientShape> = { blockNumber: Effect.succeed(12n) }

const projection = new AccountsProjection({ settlementAsset: USDT })
projection.reset(0)
for (let i = 0; i < 600; i++) {
  const id = keccak256(numberToHex(i))
  projection.apply({
    name: "Registered",
    id,
    kind: 1,
    owner: getAddress(numberToHex(i + 1, { size: 20 })),
    commitment: id,
    fallbackRecipient: getAddress(numberToHex(0, { size: 20 })),
    fallbackDelay: 0n,
    blockNumber: 7,
    blockHash: keccak256("0x07"),
    logIndex: i
  })
}

const ready: IndexerShape = {
  enabled: true,
  status: Effect.succeed({ state: "following", block: 9, head: 9, leader: true }),
  read: (f) =>
    Effect.sync(() =>
      f({
        chainId: 31337,
        vault: VAULT,
        block: 9,
        hash: keccak256("0x09") as Hex,
        version: projection.version,
        accounts: projection.accounts,
        projection
      })
    )
}

/** The bytes a response carries, whichever form its body has. */
const bytesOf = (response: HttpServerResponse.HttpServerResponse) =>
  Effect.gen(function* () {
    const body = response.body
    if (body._tag === "Uint8Array") return Buffer.from(body.body)
    if (body._tag === "Stream")
      return Buffer.concat(Chunk.toReadonlyArray(yield* Stream.runCollect(body.stream)))
    return Buffer.alloc(0)
  })

const bodyOf = (response: HttpServerResponse.HttpServerResponse) =>
  Effect.map(bytesOf(response), (bytes) => bytes.toString("utf8"))

/** The body as one string, written independently of the bucket cache: the bytes the feed must serve. */
const expectedBody = (p: AccountsProjection, block: number) => {
  const fragments = [...p.accounts.keys()]
    .sort()
    .map((id) => accountJson(p.accounts.get(id) as NonNullable<ReturnType<typeof p.accounts.get>>))
    .filter((json) => json !== undefined)
  return `{"chainId":31337,"vault":"${VAULT}","block":${block},"accounts":[${fragments.join(",")}]}`
}

describe("the accounts feed", () => {
  it.effect("refuses with unsupported when the indexer is disabled", () =>
    Effect.gen(function* () {
      const feed = yield* AccountsFeed
      const error = yield* Effect.flip(feed.respond({}))
      expect(error._tag).toBe("Unsupported")
    }).pipe(
      Effect.provide(
        accountsFeedLayer.pipe(Layer.provide(Indexer.disabled), Layer.provide(mockChainClient({})))
      )
    )
  )

  it.effect("answers unavailable until the index covers a block", () =>
    Effect.gen(function* () {
      const feed = yield* AccountsFeed
      const error = yield* Effect.flip(feed.respond({}))
      expect(error._tag).toBe("Unavailable")
    }).pipe(Effect.provide(withIndexer({ ...ready, read: (f) => Effect.sync(() => f(undefined)) })))
  )

  it.effect("serves every registered account in id order, then 304 for its tag", () =>
    Effect.gen(function* () {
      const feed = yield* AccountsFeed
      const response = yield* feed.respond({})
      expect(response.status).toBe(200)
      const body = Schema.decodeUnknownSync(AccountsResponse)(JSON.parse(yield* bodyOf(response)))
      expect(body.block).toBe(9)
      expect(body.accounts.map((a) => a.id)).toEqual([...projection.accounts.keys()].sort())
      const etag = response.headers.etag as string
      expect((yield* feed.respond({ "if-none-match": etag })).status).toBe(304)
      expect((yield* feed.respond({ "if-none-match": `W/${etag}, "other"` })).status).toBe(304)
      expect((yield* feed.respond({ "if-none-match": '"other"' })).status).toBe(200)
    }).pipe(Effect.provide(withIndexer(ready)))
  )
})

describe("the body's representations", () => {
  it.effect("identity is the whole list in one piece, with its length; gzip decompresses to it", () =>
    Effect.gen(function* () {
      const feed = yield* AccountsFeed
      const identity = yield* feed.respond({})
      const bytes = yield* bytesOf(identity)
      expect(bytes.toString("utf8")).toBe(expectedBody(projection, 9))
      expect(identity.headers["content-length"]).toBe(String(bytes.length))
      expect(identity.headers["content-type"]).toBe("application/json")
      expect(identity.headers["cache-control"]).toBe("public, max-age=15")
      const gzipped = yield* feed.respond({ "accept-encoding": "gzip" })
      expect(gzipped.headers["content-encoding"]).toBe("gzip")
      expect(gzipped.headers.etag).toBe(`${(identity.headers.etag as string).slice(0, -1)}-gzip"`)
      const compressed = yield* bytesOf(gzipped)
      expect(gunzipSync(compressed).equals(bytes)).toBe(true)
      // Compressed as one stream from the parts: the same bytes as compressing the whole at once.
      expect(compressed.equals(gzipSync(bytes))).toBe(true)
      expect(
        (yield* feed.respond({ "accept-encoding": "gzip", "if-none-match": gzipped.headers.etag })).status
      ).toBe(304)
    }).pipe(Effect.provide(withIndexer(ready)))
  )

  it("re-serializes only changed buckets and still equals the whole list, in order", () => {
    const p = new AccountsProjection({ settlementAsset: USDT })
    p.reset(0)
    const register = (i: number, block: number) => {
      const id = keccak256(numberToHex(i))
      p.apply({
        name: "Registered",
        id,
        kind: 2,
        owner: getAddress(numberToHex(i + 1, { size: 20 })),
        commitment: id,
        fallbackRecipient: getAddress(numberToHex(i % 3, { size: 20 })),
        fallbackDelay: BigInt(i % 3) * 3600n,
        blockNumber: block,
        blockHash: keccak256(numberToHex(block)),
        logIndex: i
      })
      return id
    }
    for (let i = 0; i < 300; i++) register(i, 5)
    const cache = new AccountsBodyCache()
    const snapshot = (block: number) => ({
      chainId: 31337,
      vault: VAULT,
      block,
      hash: keccak256(numberToHex(block)) as Hex,
      version: p.version,
      accounts: p.accounts,
      projection: p
    })
    const join = (parts: ReadonlyArray<Uint8Array>) => Buffer.concat(parts).toString("utf8")
    const first = cache.prepare(snapshot(5))
    expect(join(first.parts)).toBe(expectedBody(p, 5))
    expect(first.length).toBe(Buffer.byteLength(expectedBody(p, 5)))
    const id = register(300, 6)
    p.apply({
      name: "Deposited",
      id,
      asset: USDT,
      from: USDT,
      amount: 7n,
      blockNumber: 6,
      blockHash: keccak256(numberToHex(6)),
      logIndex: 301
    })
    const second = cache.prepare(snapshot(6))
    expect(second.digest).not.toBe(first.digest)
    expect(join(second.parts)).toBe(expectedBody(p, 6))
    expect(second.length).toBe(Buffer.byteLength(expectedBody(p, 6)))
    // The buckets the change did not touch are the very buffers of the first body.
    const shared = second.parts.filter((part) => first.parts.includes(part))
    expect(shared.length).toBeGreaterThan(100)
  })
})

describe("a stale index (shared rule, src/indexer/freshness.ts)", () => {
  const retrying: IndexerShape = {
    ...ready,
    status: Effect.succeed({ state: "retrying", block: 9, head: 9, leader: true })
  }
  // Following, but its last head read is long past: a step hangs on an RPC that does not answer.
  const silent: IndexerShape = {
    ...ready,
    status: Effect.succeed({ state: "following", block: 9, head: 9, leader: true, freshUntil: 1 })
  }

  it.effect("whose last step failed is 503 unavailable when the chain does not answer", () =>
    Effect.gen(function* () {
      const feed = yield* AccountsFeed
      const error = yield* Effect.flip(feed.respond({}))
      expect(error._tag).toBe("Unavailable")
      // Not even a 304: the client's copy is as stale as ours.
      expect((yield* Effect.flip(feed.respond({ "if-none-match": "*" })))._tag).toBe("Unavailable")
    }).pipe(Effect.provide(withIndexer(retrying, chainDown)))
  )

  it.effect("that has not read the head for a while is 503 unavailable when the chain does not answer", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(2)
      const feed = yield* AccountsFeed
      expect((yield* Effect.flip(feed.respond({})))._tag).toBe("Unavailable")
    }).pipe(Effect.provide(withIndexer(silent, chainDown)))
  )

  it.effect("serves its last index while the chain answers", () =>
    Effect.gen(function* () {
      const feed = yield* AccountsFeed
      expect((yield* feed.respond({})).status).toBe(200)
    }).pipe(Effect.provide(withIndexer(retrying, chainUp)))
  )
})

describe("request headers", () => {
  it("accepts gzip unless refused with q=0", () => {
    expect(acceptsGzip(undefined)).toBe(false)
    expect(acceptsGzip("gzip")).toBe(true)
    expect(acceptsGzip("br, gzip;q=0.5")).toBe(true)
    expect(acceptsGzip("gzip;q=0")).toBe(false)
    expect(acceptsGzip("identity")).toBe(false)
    expect(acceptsGzip("*")).toBe(true)
  })

  it("matches either representation's tag, weak or strong, or *", () => {
    expect(etagMatches('"abc"', "abc")).toBe(true)
    expect(etagMatches('"abc-gzip"', "abc")).toBe(true)
    expect(etagMatches('W/"abc"', "abc")).toBe(true)
    expect(etagMatches("*", "abc")).toBe(true)
    expect(etagMatches('"abd", "x"', "abc")).toBe(false)
    expect(etagMatches(undefined, "abc")).toBe(false)
  })
})
