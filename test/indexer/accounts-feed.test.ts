/**
 * The `/v1/accounts` feed above the indexer, with the indexer stubbed: refusals while disabled or
 * not ready, the body built from a snapshot, and the conditional-request and encoding rules.
 */
import type { HttpServerResponse } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Schema, TestClock } from "effect"
import { getAddress, type Hex, keccak256, numberToHex } from "viem"
import { AccountsResponse } from "../../schema/relayer.js"
import type { ChainClientShape } from "../../src/chain/ChainClient.js"
import { ChainUnavailable } from "../../src/chain/errors.js"
import { mockChainClient } from "../../src/chain/MockChainClient.js"
import { Indexer, type IndexerShape } from "../../src/indexer/Indexer.js"
import { AccountsFeed, acceptsGzip, accountsFeedLayer, etagMatches } from "../../src/relayer/accounts.js"
import { AccountsProjection } from "../../src/store/projections/AccountsProjection.js"

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

const bodyOf = (response: HttpServerResponse.HttpServerResponse) =>
  response.body._tag === "Uint8Array" ? Buffer.from(response.body.body).toString("utf8") : ""

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
      const body = Schema.decodeUnknownSync(AccountsResponse)(JSON.parse(bodyOf(response)))
      expect(body.block).toBe(9)
      expect(body.accounts.map((a) => a.id)).toEqual([...projection.accounts.keys()].sort())
      const etag = response.headers.etag as string
      expect((yield* feed.respond({ "if-none-match": etag })).status).toBe(304)
      expect((yield* feed.respond({ "if-none-match": `W/${etag}, "other"` })).status).toBe(304)
      expect((yield* feed.respond({ "if-none-match": '"other"' })).status).toBe(200)
    }).pipe(Effect.provide(withIndexer(ready)))
  )
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
