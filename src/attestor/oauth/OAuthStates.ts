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
 *   a minute per process.
 *
 * Nothing of a state, its intent or its verifier reaches a log line, a metric or an error message.
 */
import { randomBytes } from "node:crypto"
import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Data, Effect, Layer, Option, Schema } from "effect"
import { OAuthPlatform } from "../../../schema/attestor.js"
import { Address, Bytes32 } from "../../../schema/primitives.js"
import { atMostEvery } from "../../background/throttle.js"
import { nowSeconds } from "../../clock.js"
import { deleteExpired, type ExpiringRowsConfig } from "../../store/expiringRows.js"
import { stubLayer } from "../../stubLayer.js"
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

export interface OAuthStatesShape {
  /**
   * Stores `intent` under a fresh state (or under `state` when the login makes its own, as the
   * fedsocial nonce); the state is shown to the provider once.
   */
  readonly put: (
    intent: OAuthIntent,
    options?: { readonly state?: string }
  ) => Effect.Effect<{ readonly state: string; readonly expiresAt: number }, OAuthStateStoreError>
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

export type OAuthStatesConfig = ExpiringRowsConfig

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

    const put: OAuthStatesShape["put"] = (intent, options) =>
      Effect.gen(function* () {
        const now = yield* nowSeconds
        const state = options?.state ?? randomBytes(STATE_BYTES).toString("base64url")
        const expiresAt = now + config.ttlSeconds
        yield* sql`
          INSERT INTO attestor_oauth_states
            (state_hash, platform, stealth_owner, ids, redirect, code_verifier, login_challenge,
             created_at, expires_at)
          VALUES (${storageDigest(state)}, ${intent.platform}, ${intent.stealthOwner},
            ${JSON.stringify(intent.ids)}::jsonb, ${intent.redirect ?? null}, ${intent.codeVerifier ?? null},
            ${intent.loginChallenge ?? null}, ${now}, ${expiresAt})`.pipe(
          Effect.mapError(failed("storing an OAuth state"))
        )
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
