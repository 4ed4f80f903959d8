/**
 * `GET /v1/accounts` (docs/relayer.md §4): every indexed account as `{ chainId, vault, block,
 * accounts }`. The body is precomputed once per projection version, re-serializing only the
 * accounts near a change, and compressed at most once per version, so a request costs writing
 * bytes already there, not a rebuild. The identity body is never assembled in one buffer: it is
 * written as the buckets' own buffers in order, so the relayer holds each byte of it once.
 *
 * The `ETag` is a digest of the body's content, so it changes exactly when the content does; the gzip
 * representation carries the same tag with a `-gzip` suffix, and `If-None-Match` with either
 * answers 304. With the indexer disabled the route refuses with 400 `unsupported`; before the
 * index covers its first range, and when it is stale with the chain not answering (the shared
 * rule of `src/indexer/freshness.ts`), with 503 `unavailable`.
 */
import { createHash } from "node:crypto"
import { createGzip } from "node:zlib"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Context, Effect, Layer, Stream } from "effect"
import { Unavailable, Unsupported } from "../../schema/errors.js"
import { ChainClient } from "../chain/ChainClient.js"
import { requireServable } from "../indexer/freshness.js"
import { type AccountsSnapshot, Indexer } from "../indexer/Indexer.js"
import { ACCOUNT_BUCKETS } from "../store/projections/AccountsProjection.js"
import { accountJson } from "../store/projections/accounts.js"

export const ACCOUNTS_CACHE_CONTROL = "public, max-age=15"

export interface AccountsRequestHeaders {
  readonly "if-none-match"?: string | undefined
  readonly "accept-encoding"?: string | undefined
}

/** One version of the response body. */
interface PreparedBody {
  readonly epoch: number
  readonly version: number
  /** Identifies the content: a digest over the body's parts, without quotes. */
  readonly digest: string
  /**
   * The identity body in order: the prefix, the non-empty buckets' buffers with commas between,
   * the suffix. The buckets' buffers are shared with the cache, not copied.
   */
  readonly parts: ReadonlyArray<Uint8Array>
  /** Bytes of the identity body: the sum of the parts' lengths. */
  readonly length: number
  gzipped: Promise<Uint8Array> | undefined
}

/** Accounts whose id starts with the same byte, in id order, as JSON array elements. */
interface Bucket {
  /** The projection and bucket version it was built from. */
  readonly epoch: number
  readonly version: number
  readonly bytes: Buffer
  readonly digest: Buffer
}

const COMMA = Buffer.from(",")
const SUFFIX = Buffer.from("]}")

/**
 * Builds bodies from snapshots, reusing what did not change since the last one: the projection
 * groups accounts in buckets by the first byte of their id (ids are hashes, so buckets stay
 * even) and versions each bucket, so a new body re-serializes only the buckets that changed and
 * concatenates the rest as they were, already in id order.
 */
export class AccountsBodyCache {
  private readonly buckets: Array<Bucket | undefined> = new Array(ACCOUNT_BUCKETS).fill(undefined)
  private current: PreparedBody | undefined

  /** The body of `snapshot`; call only while the snapshot cannot change (inside `Indexer.read`). */
  prepare(snapshot: AccountsSnapshot): PreparedBody {
    const { epoch } = snapshot.projection
    if (this.current?.epoch === epoch && this.current.version === snapshot.version) return this.current
    const prefix = Buffer.from(
      `{"chainId":${snapshot.chainId},"vault":"${snapshot.vault}","block":${snapshot.block},"accounts":[`
    )
    const parts: Array<Buffer> = [prefix]
    const digest = createHash("sha256").update(prefix)
    for (let b = 0; b < ACCOUNT_BUCKETS; b++) {
      const { version, ids } = snapshot.projection.bucket(b)
      let bucket = this.buckets[b]
      if (bucket === undefined || bucket.epoch !== epoch || bucket.version !== version) {
        const fragments: Array<string> = []
        for (const id of [...ids].sort()) {
          const state = snapshot.accounts.get(id)
          const json = state === undefined ? undefined : accountJson(state)
          if (json !== undefined) fragments.push(json)
        }
        const bytes = Buffer.from(fragments.join(","))
        bucket = { epoch, version, bytes, digest: createHash("sha256").update(bytes).digest() }
        this.buckets[b] = bucket
      }
      if (bucket.bytes.length === 0) continue
      if (parts.length > 1) parts.push(COMMA)
      parts.push(bucket.bytes)
      digest.update(bucket.digest)
    }
    parts.push(SUFFIX)
    let length = 0
    for (const part of parts) length += part.length
    this.current = {
      epoch,
      version: snapshot.version,
      digest: digest.digest("base64url").slice(0, 32),
      parts,
      length,
      gzipped: undefined
    }
    return this.current
  }
}

/** The gzip representation of a body given in parts, compressed as one stream (no whole identity copy). */
export const gzipParts = (parts: ReadonlyArray<Uint8Array>): Promise<Buffer> =>
  new Promise((resolve, reject) => {
    const gzip = createGzip()
    const out: Array<Buffer> = []
    gzip.on("data", (chunk: Buffer) => out.push(chunk))
    gzip.on("end", () => resolve(Buffer.concat(out)))
    gzip.on("error", reject)
    for (const part of parts) gzip.write(part)
    gzip.end()
  })

const GZIP_SUFFIX = "-gzip"

/** Whether `Accept-Encoding` admits gzip (present and not refused with `q=0`). */
export const acceptsGzip = (header: string | undefined): boolean => {
  if (header === undefined) return false
  for (const part of header.split(",")) {
    const [coding, ...params] = part.trim().toLowerCase().split(";")
    if (coding !== "gzip" && coding !== "x-gzip" && coding !== "*") continue
    const q = params.map((p) => p.trim()).find((p) => p.startsWith("q="))
    if (q === undefined || Number(q.slice(2)) > 0) return true
  }
  return false
}

/** Whether `If-None-Match` names the current content (in either representation), or is `*`. */
export const etagMatches = (header: string | undefined, digest: string): boolean => {
  if (header === undefined) return false
  for (const raw of header.split(",")) {
    const tag = raw.trim()
    if (tag === "*") return true
    const opaque = tag.replace(/^W\//, "").replace(/^"|"$/g, "")
    if (opaque === digest || opaque === `${digest}${GZIP_SUFFIX}`) return true
  }
  return false
}

export interface AccountsFeedShape {
  readonly respond: (
    headers: AccountsRequestHeaders
  ) => Effect.Effect<HttpServerResponse.HttpServerResponse, Unsupported | Unavailable>
}

export class AccountsFeed extends Context.Tag("AccountsFeed")<AccountsFeed, AccountsFeedShape>() {}

export const ACCOUNTS_NOT_READY = "the account index is not ready yet"
export const ACCOUNTS_STALE_CHAIN_DOWN = "the account index is stale and the chain RPC is not answering"

export const makeAccountsFeed = Effect.gen(function* () {
  const indexer = yield* Indexer
  const chain = yield* ChainClient
  const cache = new AccountsBodyCache()

  const respond: AccountsFeedShape["respond"] = (headers) =>
    Effect.gen(function* () {
      if (!indexer.enabled)
        return yield* Effect.fail(
          new Unsupported({ message: "this relayer runs without an indexer (INDEXER_ENABLED=false)" })
        )
      const body = yield* indexer.read((snapshot) =>
        snapshot === undefined ? undefined : cache.prepare(snapshot)
      )
      if (body === undefined) return yield* Effect.fail(new Unavailable({ message: ACCOUNTS_NOT_READY }))
      yield* requireServable([yield* indexer.status], ACCOUNTS_STALE_CHAIN_DOWN).pipe(
        Effect.provideService(ChainClient, chain)
      )
      const gzipped = acceptsGzip(headers["accept-encoding"])
      const common = {
        etag: `"${body.digest}${gzipped ? GZIP_SUFFIX : ""}"`,
        "cache-control": ACCOUNTS_CACHE_CONTROL,
        vary: "Accept-Encoding"
      }
      if (etagMatches(headers["if-none-match"], body.digest))
        return HttpServerResponse.empty({ status: 304, headers: common })
      if (!gzipped)
        return HttpServerResponse.stream(Stream.fromIterable(body.parts), {
          contentType: "application/json",
          contentLength: body.length,
          headers: common
        })
      body.gzipped ??= gzipParts(body.parts)
      const compressed = yield* Effect.promise(() => body.gzipped as Promise<Uint8Array>)
      return HttpServerResponse.uint8Array(compressed, {
        contentType: "application/json",
        headers: { ...common, "content-encoding": "gzip" }
      })
    })

  return { respond } satisfies AccountsFeedShape
})

export const accountsFeedLayer: Layer.Layer<AccountsFeed, never, Indexer | ChainClient> = Layer.effect(
  AccountsFeed,
  makeAccountsFeed
)
