/**
 * The `/v1/accounts` feed above the indexer, with the indexer stubbed: refusals while disabled or
 * not ready, the body built from a snapshot, and the conditional-request and encoding rules.
 */
import type { Readable } from "node:stream"
import { buffer } from "node:stream/consumers"
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
  etagMatches,
  groupSize
} from "../../src/relayer/AccountsFeed.js"
import { AccountsProjection } from "../../src/store/projections/AccountsProjection.js"
import { accountJson } from "../../src/store/projections/accounts.js"

const USDT = getAddress(numberToHex(0x1001, { size: 20 }))
const VAULT = getAddress(numberToHex(0xbeef, { size: 20 }))

/** Without stubs the chain dies when asked: a fresh index never asks it. */
const withIndexer = (indexer: IndexerShape, chain: Partial<ChainClientShape> = {}) =>
  AccountsFeed.layer.pipe(
    Layer.provide(Layer.succeed(Indexer, indexer)),
    Layer.provide(mockChainClient(chain))
  )

const chainDown: Partial<ChainClientShape> = {
  blockNumber: Effect.fail(
    new ChainUnavailable({ operation: "eth_blockNumber", reason: "no answer", attempts: 3, cause: undefined })
  )
}
const chainUp: Partial<ChainClientShape> = { blockNumber: Effect.succeed(12n) }

/**
 * Registers account `i` in block `block`, of `kind`; with kind 2, two in three get a fallback, so
 * the records differ in shape.
 */
const register = (p: AccountsProjection, i: number, block: number, kind: 1 | 2 = 1): Hex => {
  const id = keccak256(numberToHex(i))
  p.apply({
    name: "Registered",
    id,
    kind,
    owner: getAddress(numberToHex(i + 1, { size: 20 })),
    commitment: id,
    fallbackRecipient: getAddress(numberToHex(kind === 2 ? i % 3 : 0, { size: 20 })),
    fallbackDelay: kind === 2 ? BigInt(i % 3) * 3600n : 0n,
    blockNumber: block,
    blockHash: keccak256(numberToHex(block)),
    logIndex: i
  })
  return id
}

/** What the indexer hands a reader: `p` as of `block`. */
const snapshotOf = (p: AccountsProjection, block: number) => ({
  chainId: 31337,
  vault: VAULT,
  block,
  hash: keccak256(numberToHex(block)) as Hex,
  version: p.version,
  accounts: p.accounts,
  projection: p
})

const projection = new AccountsProjection({ settlementAsset: USDT })
projection.reset(0)
for (let i = 0; i < 600; i++) register(projection, i, 7)

const ready: IndexerShape = {
  enabled: true,
  status: Effect.succeed({ state: "following", block: 9, head: 9, leader: true }),
  read: (f) => Effect.sync(() => f(snapshotOf(projection, 9)))
}

/** The bytes a response carries, whichever form its body has. */
const bytesOf = (response: HttpServerResponse.HttpServerResponse) =>
  Effect.gen(function* () {
    const body = response.body
    if (body._tag === "Uint8Array") return Buffer.from(body.body)
    if (body._tag === "Stream")
      return Buffer.concat(Chunk.toReadonlyArray(yield* Stream.runCollect(body.stream)))
    if (body._tag === "Raw") return yield* Effect.promise(() => buffer(body.body as Readable))
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
        AccountsFeed.layer.pipe(Layer.provide(Indexer.disabled), Layer.provide(mockChainClient({})))
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
      expect(gzipped.headers["content-length"]).toBe(String(compressed.length))
      expect(gunzipSync(compressed).equals(bytes)).toBe(true)
      // Compressed piece by piece, about as small as compressing the whole at once.
      expect(compressed.length).toBeLessThan(gzipSync(bytes).length * 1.1)
      expect(
        (yield* feed.respond({ "accept-encoding": "gzip", "if-none-match": gzipped.headers.etag })).status
      ).toBe(304)
    }).pipe(Effect.provide(withIndexer(ready)))
  )

  it("re-serializes only changed buckets and still equals the whole list, in order", () => {
    const p = new AccountsProjection({ settlementAsset: USDT })
    p.reset(0)
    // 2,000 accounts: eight groups of 32 buckets (groupSize).
    for (let i = 0; i < 2_000; i++) register(p, i, 5, 2)
    const cache = new AccountsBodyCache()
    const snapshot = (block: number) => snapshotOf(p, block)
    // The gzip member's trailer (CRC-32, length) is checked by gunzip: the combined CRC must be right.
    const join = (body: ReturnType<typeof cache.prepare>) =>
      gunzipSync(Buffer.concat(body.gzip.parts)).toString("utf8")
    const first = cache.prepare(snapshot(5))
    expect(join(first)).toBe(expectedBody(p, 5))
    expect(first.length).toBe(Buffer.byteLength(expectedBody(p, 5)))
    expect(first.gzip.length).toBe(Buffer.concat(first.gzip.parts).length)
    const id = register(p, 2_000, 6, 2)
    p.apply({
      name: "Deposited",
      id,
      asset: USDT,
      from: USDT,
      amount: 7n,
      blockNumber: 6,
      blockHash: keccak256(numberToHex(6)),
      logIndex: 2_001
    })
    const second = cache.prepare(snapshot(6))
    expect(second.digest).not.toBe(first.digest)
    expect(join(second)).toBe(expectedBody(p, 6))
    expect(second.length).toBe(Buffer.byteLength(expectedBody(p, 6)))
    // The groups the change did not touch are the very pieces of the first body, not compressed
    // again: only the prefix (its block) and the new account's group are new.
    expect(groupSize(p.accounts.size)).toBe(32)
    expect(second.pieces.filter((piece) => !first.pieces.includes(piece))).toHaveLength(2)
  })
})

describe("a body built while the index moves", () => {
  it.effect("is compressed across turns of the event loop, and still one snapshot's list", () =>
    Effect.gen(function* () {
      const p = new AccountsProjection({ settlementAsset: USDT })
      p.reset(0)
      // Eight groups (groupSize): the build takes several turns.
      for (let i = 0; i < 2_000; i++) register(p, i, 5)
      let block = 5
      let reads = 0
      let turns = 0
      // The follower's work between the build's turns: a new account on the third read.
      const moving: IndexerShape = {
        ...ready,
        read: (f) =>
          Effect.sync(() => {
            if (++reads === 3) register(p, 2_000, ++block)
            return f(snapshotOf(p, block))
          })
      }
      const feed = yield* AccountsFeed.pipe(Effect.provide(withIndexer(moving)))
      const ticking = setInterval(() => turns++, 0)
      const [first, second] = yield* Effect.all([feed.respond({}), feed.respond({})], {
        concurrency: "unbounded"
      }).pipe(Effect.ensuring(Effect.sync(() => clearInterval(ticking))))
      expect(turns).toBeGreaterThan(2)
      expect(yield* bodyOf(first)).toBe(expectedBody(p, 6))
      // The second request waited for the first one's build instead of doing it again.
      expect(second.headers.etag).toBe(first.headers.etag)
      expect(JSON.parse(yield* bodyOf(second)).accounts).toHaveLength(2_001)
    })
  )
})

describe("compressed groups", () => {
  it("hold about 128 accounts each, in as few buckets as that takes, from the count alone", () => {
    expect(groupSize(0)).toBe(256)
    expect(groupSize(600)).toBe(64)
    expect(groupSize(2_000)).toBe(32)
    expect(groupSize(32_768)).toBe(1)
    expect(groupSize(100_000)).toBe(1)
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
