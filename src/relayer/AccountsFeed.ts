/**
 * `GET /v1/accounts` (docs/relayer.md §4): every indexed account as `{ chainId, vault, block,
 * accounts }`. The body is precomputed once per projection version, re-serializing and
 * compressing only the accounts near a change, so a gzip request costs writing bytes already
 * there, not a rebuild. Only the compressed form is kept (src/http/piecewiseGzip.ts): at 100k
 * accounts 4.5 MB instead of 33.5 MB, for an identity request inflated as it is sent.
 *
 * The `ETag` is a digest of the body's content, so it changes exactly when the content does; the gzip
 * representation carries the same tag with a `-gzip` suffix, and `If-None-Match` with either
 * answers 304. With the indexer disabled the route refuses with 400 `unsupported`; before the
 * index covers its first range, and when it is stale with the chain not answering (the shared
 * rule of `src/indexer/freshness.ts`), with 503 `unavailable`.
 */
import { createHash } from "node:crypto"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Context, Effect, Layer, Stream } from "effect"
import { Unavailable, Unsupported } from "../../schema/errors.js"
import { ChainClient } from "../chain/ChainClient.js"
import { type DeflatedPiece, deflatePiece, gzipMember, inflatedPieces } from "../http/piecewiseGzip.js"
import { requireServable } from "../indexer/freshness.js"
import { type AccountsSnapshot, Indexer } from "../indexer/Indexer.js"
import { ACCOUNT_BUCKETS } from "../store/projections/AccountsProjection.js"
import { accountJson } from "../store/projections/accounts.js"

export const ACCOUNTS_CACHE_CONTROL = "public, max-age=15"

export interface AccountsRequestHeaders {
  readonly "if-none-match"?: string | undefined
  readonly "accept-encoding"?: string | undefined
}

/** One version of the response body, kept compressed only (src/http/piecewiseGzip.ts). */
interface PreparedBody {
  readonly epoch: number
  readonly version: number
  /** Identifies the content: a digest over the body's parts, without quotes. */
  readonly digest: string
  /**
   * The body in order, each part compressed on its own: the prefix, the non-empty groups of
   * buckets with commas between, the suffix. The groups' pieces are shared with the cache, not copied.
   */
  readonly pieces: ReadonlyArray<DeflatedPiece>
  /** Bytes of the identity body: the sum of the pieces' uncompressed lengths. */
  readonly length: number
  /** The gzip representation's buffers in order, and their total length. */
  readonly gzip: { readonly parts: ReadonlyArray<Uint8Array>; readonly length: number }
}

/**
 * Group `g`: the accounts of buckets `g·size` to `g·size + size − 1` (ids starting with those
 * bytes), in id order, as JSON array elements compressed on their own.
 */
interface Group {
  /** The projection and the versions of its buckets it was built from. */
  readonly epoch: number
  readonly size: number
  readonly versions: ReadonlyArray<number>
  readonly piece: DeflatedPiece
  readonly digest: Buffer
}

const COMMA = deflatePiece(",")
const SUFFIX = deflatePiece("]}")

/**
 * About this many accounts per compressed piece (some 40 KB of JSON): DEFLATE looks back 32 KB, so
 * pieces this large compress about as well as the whole body at once.
 */
const ACCOUNTS_PER_GROUP = 128

/**
 * Buckets per group: a power of two, so groups are fixed ranges of buckets, chosen from the
 * number of accounts alone. The same content is therefore cut and compressed the same way in
 * every replica, and its gzip bytes are the same under the same tag.
 */
export const groupSize = (accounts: number): number => {
  let size = 1
  while (size < ACCOUNT_BUCKETS && (accounts * size) / ACCOUNT_BUCKETS < ACCOUNTS_PER_GROUP) size *= 2
  return size
}

/**
 * Builds bodies from snapshots, reusing what did not change since the last one: the projection
 * groups accounts in buckets by the first byte of their id (ids are hashes, so buckets stay
 * even) and versions each bucket, so a new body re-serializes and compresses only the groups of
 * buckets that changed and takes the rest as they were, already in id order. A group's JSON lives
 * only while it is compressed: the relayer holds the compressed body alone (about a seventh of it).
 */
export class AccountsBodyCache {
  private groups: Array<Group | undefined> = []
  private current: PreparedBody | undefined

  /** The body already prepared for `snapshot`, if there is one. */
  prepared(snapshot: AccountsSnapshot): PreparedBody | undefined {
    const current = this.current
    return current?.epoch === snapshot.projection.epoch && current.version === snapshot.version
      ? current
      : undefined
  }

  /** The groups a body of `snapshot` would compress again. */
  staleGroups(snapshot: AccountsSnapshot): ReadonlyArray<number> {
    const size = groupSize(snapshot.accounts.size)
    const stale: Array<number> = []
    for (let g = 0; g < ACCOUNT_BUCKETS / size; g++) if (this.stale(snapshot, size, g)) stale.push(g)
    return stale
  }

  /** Compresses group `g` of `snapshot` again unless it is current; call inside `Indexer.read`. */
  refresh(snapshot: AccountsSnapshot, g: number): void {
    const size = groupSize(snapshot.accounts.size)
    if (g < ACCOUNT_BUCKETS / size && this.stale(snapshot, size, g)) this.build(snapshot, size, g)
  }

  /** The body of `snapshot`; call only while the snapshot cannot change (inside `Indexer.read`). */
  prepare(snapshot: AccountsSnapshot): PreparedBody {
    const ready = this.prepared(snapshot)
    if (ready !== undefined) return ready
    const prefix = Buffer.from(
      `{"chainId":${snapshot.chainId},"vault":"${snapshot.vault}","block":${snapshot.block},"accounts":[`
    )
    const pieces: Array<DeflatedPiece> = [deflatePiece(prefix)]
    const digest = createHash("sha256").update(prefix)
    const size = groupSize(snapshot.accounts.size)
    let listed = 0
    for (let g = 0; g < ACCOUNT_BUCKETS / size; g++) {
      const group = this.stale(snapshot, size, g) ? this.build(snapshot, size, g) : (this.groups[g] as Group)
      if (group.piece.length === 0) continue
      if (listed++ > 0) pieces.push(COMMA)
      pieces.push(group.piece)
      digest.update(group.digest)
    }
    pieces.push(SUFFIX)
    let length = 0
    for (const piece of pieces) length += piece.length
    this.current = {
      epoch: snapshot.projection.epoch,
      version: snapshot.version,
      digest: digest.digest("base64url").slice(0, 32),
      pieces,
      length,
      gzip: gzipMember(pieces)
    }
    return this.current
  }

  private stale(snapshot: AccountsSnapshot, size: number, g: number): boolean {
    const group = this.groups[g]
    if (group === undefined || group.epoch !== snapshot.projection.epoch || group.size !== size) return true
    for (let i = 0; i < size; i++)
      if (snapshot.projection.bucket(g * size + i).version !== group.versions[i]) return true
    return false
  }

  private build(snapshot: AccountsSnapshot, size: number, g: number): Group {
    if (this.groups.length !== ACCOUNT_BUCKETS / size)
      this.groups = new Array(ACCOUNT_BUCKETS / size).fill(undefined)
    const buckets = Array.from({ length: size }, (_, i) => snapshot.projection.bucket(g * size + i))
    const fragments: Array<string> = []
    for (const bucket of buckets)
      for (const id of [...bucket.ids].sort()) {
        const state = snapshot.accounts.get(id)
        const json = state === undefined ? undefined : accountJson(state)
        if (json !== undefined) fragments.push(json)
      }
    const bytes = Buffer.from(fragments.join(","))
    const group: Group = {
      epoch: snapshot.projection.epoch,
      size,
      versions: buckets.map((bucket) => bucket.version),
      piece: deflatePiece(bytes),
      digest: createHash("sha256").update(bytes).digest()
    }
    this.groups[g] = group
    return group
  }
}

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

export const ACCOUNTS_NOT_READY = "the account index is not ready yet"
export const ACCOUNTS_STALE_CHAIN_DOWN = "the account index is stale and the chain RPC is not answering"

/** Lets the event loop run other work (I/O, other requests) before going on. */
const nextTurn = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

export const makeAccountsFeed = Effect.gen(function* () {
  const indexer = yield* Indexer
  const chain = yield* ChainClient
  const cache = new AccountsBodyCache()

  // One rebuild at a time: requests that arrive meanwhile wait for it instead of doing it again.
  const rebuilding = yield* Effect.makeSemaphore(1)
  /**
   * A new body: the stale groups compressed one per turn of the event loop (at 100k accounts, a
   * cold start compresses 256 groups, about a second of work), then the body assembled from one
   * snapshot, compressing again only what changed in between.
   */
  const rebuild = rebuilding.withPermits(1)(
    Effect.gen(function* () {
      const stale = yield* indexer.read((snapshot) =>
        snapshot === undefined || cache.prepared(snapshot) !== undefined ? [] : cache.staleGroups(snapshot)
      )
      for (const g of stale) {
        yield* indexer.read((snapshot) => {
          if (snapshot !== undefined) cache.refresh(snapshot, g)
        })
        yield* nextTurn
      }
      return yield* indexer.read((snapshot) => (snapshot === undefined ? undefined : cache.prepare(snapshot)))
    })
  )

  const respond: AccountsFeedShape["respond"] = (headers) =>
    Effect.gen(function* () {
      if (!indexer.enabled)
        return yield* Effect.fail(
          new Unsupported({ message: "this relayer runs without an indexer (INDEXER_ENABLED=false)" })
        )
      const body =
        (yield* indexer.read((snapshot) =>
          snapshot === undefined ? undefined : cache.prepared(snapshot)
        )) ?? (yield* rebuild)
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
        // A Node stream, piped with backpressure: each identity response holds a window of the
        // inflated bytes, not the whole body.
        return HttpServerResponse.raw(inflatedPieces(body.pieces), {
          contentType: "application/json",
          contentLength: body.length,
          headers: common
        })
      return HttpServerResponse.stream(Stream.fromIterable(body.gzip.parts), {
        contentType: "application/json",
        contentLength: body.gzip.length,
        headers: { ...common, "content-encoding": "gzip" }
      })
    })

  return { respond } satisfies AccountsFeedShape
})

export class AccountsFeed extends Context.Tag("AccountsFeed")<AccountsFeed, AccountsFeedShape>() {
  static readonly layer: Layer.Layer<AccountsFeed, never, Indexer | ChainClient> = Layer.effect(
    AccountsFeed,
    makeAccountsFeed
  )
}
