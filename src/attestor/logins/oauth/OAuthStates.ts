/**
 * OAuth states (docs/attestor.md §3 "OAuth state", §4 "OAuth start / callback / verify rules", §8):
 * `POST /v1/oauth/:platform/start` stores the intent of a login (platform, stealth owner, ids,
 * redirect, PKCE verifier, login challenge) under a fresh random state; the provider's callback presents the state
 * and takes the intent back, once.
 *
 * - The state is 32 random bytes, base64url; the database keeps only its SHA-256 (migration 0024),
 *   and a state is found by that digest alone, so nothing is compared here.
 * - Single use: taking a state deletes its row in the same statement that reads it, so two
 *   callbacks presenting one state (on one replica or two) cannot both get the intent. Peeking reads
 *   a state's times and leaves it: fedsocial's verify refuses a nonce never issued before it
 *   spends an RPC call on the message, and takes it only once the message holds.
 * - A state lives `ttlSeconds` (10 minutes by default) on the attestor's clock (Effect's `Clock`);
 *   an expired one reads as unknown. Expired rows are deleted when states are stored, at most once
 *   a minute per process, and each state stored deletes up to two expired rows besides.
 * - Bounded (docs/attestor.md §8): a start needs no credential, so the live states one client
 *   address holds (`maxPerClient`, `OAUTH_STATES_PER_CLIENT`) and all clients together hold
 *   (`maxTotal`, `OAUTH_STATES_MAX`) are capped; past either, `put` fails with `OAuthStatesFull` and
 *   stores nothing, and the route answers 429 `rate_limited` with `Retry-After` until the first of
 *   those states expires. An expired state no longer counts. The address is stored only as an
 *   HMAC under a key derived from the pepper (migration 0033), which a reader of the database
 *   cannot reverse by trying every address. A client's count and its insert run in one transaction
 *   under a transaction lock of the client's digest, so concurrent starts of one client never pass
 *   its bound; the total is counted without a lock, so concurrent starts of different clients may
 *   pass it by at most one per open transaction (the pool's connections, 8 per replica on
 *   PostgreSQL; one on the embedded database, which runs them one at a time). The two expired rows
 *   each state deletes keep the table within about twice the total bound whatever the pruning's pace.
 *
 * Nothing of a state, its intent or its verifier reaches a log line, a metric or an error message.
 */
import { createHmac, randomBytes } from "node:crypto"
import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Data, Effect, Layer, Option, Redacted, Schema } from "effect"
import { OAuthPlatform } from "../../../../schema/attestor.js"
import { RateLimited, Unavailable } from "../../../../schema/errors.js"
import { Address, Bytes32 } from "../../../../schema/primitives.js"
import { atMostEvery } from "../../../background/throttle.js"
import { nowSeconds } from "../../../clock.js"
import type { AttestorSettingsShape } from "../../../config/attestor.js"
import { advisoryKey, transactionLock } from "../../../store/advisoryLock.js"
import { deleteExpired, type ExpiringRowsConfig } from "../../../store/expiringRows.js"
import { stubLayer } from "../../../stubLayer.js"
import { storageDigest } from "../SessionStore.js"

/** What a login was started for: fixed before the user meets the provider. */
export interface OAuthIntent {
  readonly platform: OAuthPlatform
  readonly stealthOwner: Address
  /** Escrow ids the login is for; empty: every escrow of the user. */
  readonly ids: ReadonlyArray<Bytes32>
  /** Where the callback sends the browser; none: the callback answers JSON. */
  readonly redirect: string | undefined
  /** The PKCE verifier, for a platform with PKCE. */
  readonly codeVerifier: string | undefined
  /** The client's login challenge (docs/protocol.md §10 "Login challenge"); none: started without. */
  readonly loginChallenge: Bytes32 | undefined
}

/** The database did not answer; the cause stays here, never in a response or a log line. */
export class OAuthStateStoreError extends Data.TaggedError("OAuthStateStoreError")<{
  readonly operation: string
  readonly cause: SqlError
}> {
  override get message() {
    return `OAuth state store failed during ${this.operation}`
  }
}

/** A bound of the live states is reached: nothing was stored. Names no client. */
export class OAuthStatesFull extends Data.TaggedError("OAuthStatesFull")<{
  /** `client`: the starting client's own bound; `total`: all clients' together. */
  readonly bound: "client" | "total"
  /** Seconds until the first state that counts against the bound expires. */
  readonly retryAfterSeconds: number
}> {
  override get message() {
    return `the ${this.bound} bound of live OAuth states is reached`
  }
}

const STATES_FULL: Readonly<Record<OAuthStatesFull["bound"], string>> = {
  client:
    "too many logins started from this address and not finished: finish one, or retry once one has expired",
  total: "too many logins started and not finished on this attestor: retry later"
}

/**
 * What a start answers when its state is not stored: 429 `rate_limited` with `Retry-After` at a
 * bound, 503 `unavailable` when the database does not answer.
 */
export const startRefusal = (error: OAuthStateStoreError | OAuthStatesFull): RateLimited | Unavailable =>
  error._tag === "OAuthStatesFull"
    ? new RateLimited({ message: STATES_FULL[error.bound], retryAfterSeconds: error.retryAfterSeconds })
    : new Unavailable({ message: "the login state store is not answering" })

export interface OAuthStatesShape {
  /**
   * Stores `intent` under a fresh state (or under `state` when the login makes its own, as the
   * fedsocial nonce), counted against `client` (the address the per-IP limit counts the request
   * under, `clientKey` of src/http/rateLimit.ts); the state is shown to the provider once.
   */
  readonly put: (
    intent: OAuthIntent,
    options: { readonly client: string; readonly state?: string }
  ) => Effect.Effect<
    { readonly state: string; readonly expiresAt: number },
    OAuthStateStoreError | OAuthStatesFull
  >
  /**
   * The intent of `state` started for `platform`, taken once, with when its state was made and
   * when it expires (unix seconds); none for an unknown, used or expired state, or one of another
   * platform, which is left to its own login (a fedsocial nonce, which a relay sees, cannot be
   * burnt through an OAuth callback).
   */
  readonly take: (
    state: string,
    platform: OAuthPlatform
  ) => Effect.Effect<
    Option.Option<OAuthIntent & { readonly startedAt: number; readonly expiresAt: number }>,
    OAuthStateStoreError
  >
  /**
   * When the live state `state` of `platform` was made and when it expires, left in place; none
   * exactly when `take` would find none now.
   */
  readonly peek: (
    state: string,
    platform: OAuthPlatform
  ) => Effect.Effect<
    Option.Option<{ readonly startedAt: number; readonly expiresAt: number }>,
    OAuthStateStoreError
  >
}

export class OAuthStates extends Context.Tag("OAuthStates")<OAuthStates, OAuthStatesShape>() {
  static readonly layer = (config: OAuthStatesConfig): Layer.Layer<OAuthStates, never, SqlClient> =>
    Layer.effect(OAuthStates, makeOAuthStates(config))

  /** For tests: the members given; any other use dies naming it (src/stubLayer.ts). */
  static readonly test = stubLayer(OAuthStates, { put: "function", take: "function", peek: "function" })
}

export interface OAuthStatesConfig extends ExpiringRowsConfig {
  /** Live states one client address may hold (`OAUTH_STATES_PER_CLIENT`). */
  readonly maxPerClient: number
  /** Live states of all clients together (`OAUTH_STATES_MAX`). */
  readonly maxTotal: number
  /** Keys the digest a client address is stored as (`clientDigestKey`). */
  readonly clientDigestKey: Uint8Array
}

/**
 * The key of the client digests: an HMAC of a fixed label under the pepper, so every replica
 * stores one address alike and the pepper itself keys nothing new. The label is not of the
 * `<platformId>:<userId>` form `attestorSalt` keys.
 */
export const clientDigestKey = (pepper: Uint8Array): Uint8Array =>
  createHmac("sha256", pepper).update("attestor oauth state clients", "utf8").digest()

/** The states' configuration from the attestor's settings. */
export const oauthStatesConfig = (
  settings: Pick<
    AttestorSettingsShape,
    "oauthStateTtlSeconds" | "oauthStatesPerClient" | "oauthStatesMax" | "pepper"
  >
): OAuthStatesConfig => ({
  ttlSeconds: settings.oauthStateTtlSeconds,
  maxPerClient: settings.oauthStatesPerClient,
  maxTotal: settings.oauthStatesMax,
  clientDigestKey: clientDigestKey(Redacted.value(settings.pepper))
})

/** Expired rows each stored state deletes besides: more than it adds, so they never pile up. */
const EXPIRED_PER_PUT = 2

const STATE_BYTES = 32

interface StateRow {
  readonly platform: string
  readonly stealth_owner: string
  readonly ids: unknown
  readonly redirect: string | null
  readonly code_verifier: string | null
  readonly login_challenge: string | null
  readonly created_at: string
  readonly expires_at: string
}

const decodeStored = Schema.decodeUnknown(
  Schema.Struct({
    platform: OAuthPlatform,
    stealthOwner: Address,
    ids: Schema.Array(Bytes32),
    loginChallenge: Schema.UndefinedOr(Bytes32)
  })
)

export const makeOAuthStates = (config: OAuthStatesConfig) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const whenDue = yield* atMostEvery(config.pruneIntervalSeconds ?? 60)
    const failed = (operation: string) => (cause: SqlError) => new OAuthStateStoreError({ operation, cause })

    const pruneIfDue = (now: number) =>
      whenDue(
        now,
        deleteExpired(sql, "attestor_oauth_states", "state_hash", now).pipe(
          Effect.asVoid,
          Effect.catchTag("SqlError", () =>
            Effect.logWarning("pruning expired OAuth states failed; will retry")
          )
        )
      )

    const whenFullLogDue = yield* atMostEvery(60)
    const clientDigest = (client: string) =>
      createHmac("sha256", config.clientDigestKey).update(client, "utf8").digest("hex")

    /**
     * How many live states (up to `bound`: the count stops there) a client's digest holds, or all
     * clients with none, and when the first of them expires.
     */
    const live = (digest: string | undefined, bound: number, now: number) =>
      Effect.map(
        sql<{ readonly n: number; readonly first: string | number | null }>`
          SELECT count(*)::int AS n, min(expires_at) AS first FROM (
            SELECT expires_at FROM attestor_oauth_states
            WHERE expires_at > ${now} ${digest === undefined ? sql`` : sql`AND client_digest = ${digest}`}
            ORDER BY expires_at LIMIT ${bound}) counted`,
        (rows) => ({ n: rows[0]?.n ?? 0, first: Number(rows[0]?.first ?? now) })
      )

    /** Fails with `OAuthStatesFull` when the bound is reached. */
    const within = (bound: "client" | "total", digest: string | undefined, max: number, now: number) =>
      Effect.flatMap(live(digest, max, now), ({ n, first }) =>
        n < max
          ? Effect.void
          : Effect.fail(new OAuthStatesFull({ bound, retryAfterSeconds: Math.max(1, first - now) }))
      )

    const warnIfFull = (now: number) => (full: OAuthStatesFull) =>
      full.bound === "total"
        ? whenFullLogDue(
            now,
            Effect.logWarning(
              "OAuth states are at OAUTH_STATES_MAX: login starts are refused 429 until states are used or expire"
            )
          )
        : Effect.void

    /** Expired rows beyond this state's, best effort (the periodic pruning goes on). */
    const trimExpired = (now: number) =>
      deleteExpired(sql, "attestor_oauth_states", "state_hash", now, EXPIRED_PER_PUT).pipe(
        Effect.asVoid,
        Effect.catchTag("SqlError", () =>
          Effect.logWarning("deleting expired OAuth states failed; will retry")
        )
      )

    const put: OAuthStatesShape["put"] = (intent, options) =>
      Effect.gen(function* () {
        const now = yield* nowSeconds
        const state = options.state ?? randomBytes(STATE_BYTES).toString("base64url")
        const expiresAt = now + config.ttlSeconds
        const digest = clientDigest(options.client)
        yield* Effect.gen(function* () {
          // One client's starts one at a time: its count cannot be passed by its own concurrent starts.
          yield* transactionLock(sql, advisoryKey(`attestor-oauth-client:${digest}`))
          yield* within("client", digest, config.maxPerClient, now)
          yield* within("total", undefined, config.maxTotal, now)
          yield* sql`
            INSERT INTO attestor_oauth_states
              (state_hash, platform, stealth_owner, ids, redirect, code_verifier, login_challenge,
               client_digest, created_at, expires_at)
            VALUES (${storageDigest(state)}, ${intent.platform}, ${intent.stealthOwner},
              ${JSON.stringify(intent.ids)}::jsonb, ${intent.redirect ?? null}, ${intent.codeVerifier ?? null},
              ${intent.loginChallenge ?? null}, ${digest}, ${now}, ${expiresAt})`
        }).pipe(
          sql.withTransaction,
          Effect.catchTag("SqlError", (cause) => Effect.fail(failed("storing an OAuth state")(cause))),
          Effect.tapErrorTag("OAuthStatesFull", warnIfFull(now))
        )
        yield* trimExpired(now)
        yield* pruneIfDue(now)
        return { state, expiresAt }
      })

    const take: OAuthStatesShape["take"] = (state, platform) =>
      Effect.gen(function* () {
        const now = yield* nowSeconds
        const rows = yield* sql<StateRow>`
          DELETE FROM attestor_oauth_states WHERE state_hash = ${storageDigest(state)} AND platform = ${platform}
          RETURNING platform, stealth_owner, ids, redirect, code_verifier, login_challenge, created_at, expires_at`.pipe(
          Effect.mapError(failed("taking an OAuth state"))
        )
        const row = rows[0]
        if (row === undefined || Number(row.expires_at) <= now) return Option.none()
        // Only this module writes the table: a row that does not decode is a bug, not a refusal.
        const stored = yield* Effect.orDie(
          decodeStored({
            platform: row.platform,
            stealthOwner: row.stealth_owner,
            ids: typeof row.ids === "string" ? JSON.parse(row.ids) : row.ids,
            loginChallenge: row.login_challenge ?? undefined
          })
        )
        return Option.some({
          ...stored,
          redirect: row.redirect ?? undefined,
          codeVerifier: row.code_verifier ?? undefined,
          startedAt: Number(row.created_at),
          expiresAt: Number(row.expires_at)
        })
      })

    const peek: OAuthStatesShape["peek"] = (state, platform) =>
      Effect.gen(function* () {
        const now = yield* nowSeconds
        const rows = yield* sql<Pick<StateRow, "created_at" | "expires_at">>`
          SELECT created_at, expires_at FROM attestor_oauth_states
          WHERE state_hash = ${storageDigest(state)} AND platform = ${platform}`.pipe(
          Effect.mapError(failed("reading an OAuth state"))
        )
        const row = rows[0]
        if (row === undefined || Number(row.expires_at) <= now) return Option.none()
        return Option.some({ startedAt: Number(row.created_at), expiresAt: Number(row.expires_at) })
      })

    return { put, take, peek } satisfies OAuthStatesShape
  })
