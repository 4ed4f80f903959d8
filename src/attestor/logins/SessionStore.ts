/**
 * Sessions (docs/attestor.md §2 Session, §3, §5): a verified login bound to the stealth owner and
 * escrow ids chosen before it, `{ platform, userId, stealthOwner, ids }`, valid `SESSION_TTL_SECONDS`
 * (15 minutes by default) from its creation, then gone.
 *
 * - The client holds an opaque token: 32 random bytes, base64url (43 characters of the
 *   `SessionToken` alphabet). The database keeps only its SHA-256, and a session is found by that
 *   digest alone: no token, and no secret derived from one, is ever compared here, so there is
 *   nothing to compare in non-constant time.
 * - Expiry is by time on the attestor's clock (Effect's `Clock`, so tests can move it): a session
 *   is valid while `now < expiresAt`. An unknown or expired token reads as none; the routes
 *   answer 401 `invalid_session` (docs/protocol.md §7).
 * - Rows live in the database (migration 0020), so sessions survive a restart and are shared by
 *   replicas; expired rows are deleted opportunistically, at most once a minute per process, when
 *   a session is created.
 * - A login started with a login challenge (docs/protocol.md §10 "Login challenge") keeps it with
 *   its session: `authenticate` then wants the client's `loginSecret`, whose SHA-256 must equal the
 *   challenge (compared in constant time), and a session made without one refuses any secret. A
 *   token alone, taken from a redirect the client did not start (login CSRF), is of no use.
 * - A contest (`POST /v1/bind` with `contest: true`) ends the sessions of the same platform and
 *   user id created at or before the contesting one (`endOthers`): one of them may be someone
 *   else's login as that user. A newer session stays: it may be the user's own fresh login, and a
 *   session someone else holds cannot, by contesting, end the user's logins made after it. The
 *   contest's time is recorded per user, and a login started before it makes no session
 *   (`create`'s `startedAt`, `LoginStartedBeforeContest`): a login prepared as the user before the
 *   contest (an OAuth state, a signed fedsocial message, a messenger payload) cannot be redeemed
 *   after it. Both take a transaction lock of the user, so on replicas sharing the database a
 *   contest and a session's creation never interleave.
 * - A login that must be single-use (the messenger widget payload, docs/attestor.md §3) names a digest of
 *   its payload; the digest is recorded in the same transaction that creates the session, and a
 *   second creation with it fails with `LoginAlreadyUsed`. The record is kept until the payload
 *   would have been refused as too old anyway.
 *
 * Nothing about a session (token, digest, user, key or ids) reaches a log line, a metric or an
 * error message.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto"
import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Data, Effect, Layer, Option, Schema } from "effect"
import { type LoginChallenge, type LoginSecret, Session, SessionToken } from "../../../schema/attestor.js"
import { InvalidSession, Unavailable } from "../../../schema/errors.js"
import { atMostEvery } from "../../background/throttle.js"
import { nowSeconds } from "../../clock.js"
import { advisoryKey, transactionLock } from "../../store/advisoryLock.js"
import { deleteExpired, type ExpiringRowsConfig } from "../../store/expiringRows.js"
import { stubLayer } from "../../stubLayer.js"

/** A session as read back: what it stands for and when it stops being valid (unix seconds). */
export interface StoredSession extends Session {
  readonly expiresAt: number
  /** The challenge the login was started with; none: started without one. */
  readonly loginChallenge: LoginChallenge | undefined
}

export interface CreatedSession extends StoredSession {
  readonly token: SessionToken
}

/** Marks a login payload as used once the session exists. */
export interface SingleUse {
  /** Identifies the payload; hashed again before it is stored. */
  readonly key: string
  /** Unix seconds after which the payload is refused as too old anyway: the record goes then. */
  readonly until: number
}

/** The single-use login payload already made a session. */
export class LoginAlreadyUsed extends Data.TaggedError("LoginAlreadyUsed")<{}> {
  override get message() {
    return "this login was already used"
  }
}

/** The login was started before the user's last contest (docs/protocol.md §10 "Contests"). */
export class LoginStartedBeforeContest extends Data.TaggedError("LoginStartedBeforeContest")<{}> {
  override get message() {
    return LOGIN_BEFORE_CONTEST
  }
}

/** The database did not answer; the cause stays here, never in a response or a log line. */
export class SessionStoreError extends Data.TaggedError("SessionStoreError")<{
  readonly operation: string
  readonly cause: SqlError
}> {
  override get message() {
    return `session store failed during ${this.operation}`
  }
}

export interface SessionStoreShape {
  /** Lifetime of a new session, in seconds. */
  readonly ttlSeconds: number
  /**
   * Stores a new session and returns its token, shown to the client once. With `startedAt` (unix
   * seconds: when the login began, e.g. its OAuth state was made), a login started before the
   * user's last contest fails with `LoginStartedBeforeContest`, checked in the transaction that
   * stores the session.
   */
  readonly create: (
    session: Session,
    options?: {
      readonly singleUse?: SingleUse
      readonly loginChallenge?: LoginChallenge | undefined
      readonly startedAt?: number | undefined
    }
  ) => Effect.Effect<CreatedSession, LoginAlreadyUsed | LoginStartedBeforeContest | SessionStoreError>
  /** The session of a token while it is valid; none for an unknown or expired token. */
  readonly read: (token: SessionToken) => Effect.Effect<Option.Option<StoredSession>, SessionStoreError>
  /**
   * A contest by the session of `keep` (docs/attestor.md §4 "POST /v1/bind"), in one transaction:
   * records `now` as the user's last contest (same platform and user id), and ends the user's
   * sessions created at or before `keep`'s, but `keep`'s own: one of them may not be the user's.
   * How many ended.
   */
  readonly endOthers: (
    session: Pick<Session, "platform" | "userId">,
    keep: SessionToken,
    now: number
  ) => Effect.Effect<number, SessionStoreError>
}

export class SessionStore extends Context.Tag("SessionStore")<SessionStore, SessionStoreShape>() {
  /** The store on the SQL client (migrations applied), with sessions living `ttlSeconds`. */
  static readonly layer = (config: SessionStoreConfig): Layer.Layer<SessionStore, never, SqlClient> =>
    Layer.effect(SessionStore, makeSessionStore(config))

  /** For tests: the members given; any other use dies naming it (src/stubLayer.ts). */
  static readonly test = stubLayer(SessionStore, {
    ttlSeconds: "data",
    create: "function",
    read: "function",
    endOthers: "function"
  })
}

export type SessionStoreConfig = ExpiringRowsConfig

const TOKEN_BYTES = 32

const newToken = (): SessionToken =>
  Schema.decodeSync(SessionToken)(randomBytes(TOKEN_BYTES).toString("base64url"))

/** What the database keeps of a token or a single-use key. */
export const storageDigest = (value: string): string =>
  createHash("sha256").update(value, "utf8").digest("hex")

interface SessionRow {
  readonly platform: string
  readonly user_id: string
  readonly stealth_owner: string
  readonly ids: unknown
  readonly login_challenge: string | null
  readonly expires_at: string
}

const decodeSession = Schema.decodeUnknown(Session)

/** The transaction lock of a user that orders its contests and its sessions' creation. */
const userLockKey = (session: Pick<Session, "platform" | "userId">) =>
  advisoryKey(`attestor-user:${session.platform}:${session.userId}`)

export const makeSessionStore = (config: SessionStoreConfig) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const ttlSeconds = config.ttlSeconds
    const whenDue = yield* atMostEvery(config.pruneIntervalSeconds ?? 60)
    const failed = (operation: string) => (cause: SqlError) => new SessionStoreError({ operation, cause })

    /** Deletes expired rows; best effort, a failure is logged without data and tried again later. */
    const pruneExpired = (now: number) =>
      Effect.gen(function* () {
        yield* deleteExpired(sql, "attestor_sessions", "token_hash", now)
        yield* deleteExpired(sql, "attestor_used_logins", "digest", now)
      }).pipe(
        // Its own transaction, a savepoint when `create` runs inside a caller's (fedsocial's): a
        // failed pruning on PostgreSQL must not abort the transaction that makes the session.
        sql.withTransaction,
        Effect.catchTag("SqlError", () => Effect.logWarning("pruning expired sessions failed; will retry"))
      )

    const pruneIfDue = (now: number) => whenDue(now, pruneExpired(now))

    const create: SessionStoreShape["create"] = (session, options) =>
      Effect.gen(function* () {
        const now = yield* nowSeconds
        const token = newToken()
        const expiresAt = now + ttlSeconds
        const singleUse = options?.singleUse
        const loginChallenge = options?.loginChallenge
        const startedAt = options?.startedAt
        yield* Effect.gen(function* () {
          if (startedAt !== undefined) {
            // After a contest of the user that committed first, or before one that waits.
            yield* transactionLock(sql, userLockKey(session))
            const contested = yield* sql<{ readonly contested_at: string | number }>`
              SELECT contested_at FROM attestor_user_contests
              WHERE platform = ${session.platform} AND user_id = ${session.userId}`
            const last = contested[0]
            if (last !== undefined && startedAt < Number(last.contested_at))
              return yield* Effect.fail(new LoginStartedBeforeContest())
          }
          if (singleUse !== undefined) {
            const claimed = yield* sql<{ readonly digest: string }>`
              INSERT INTO attestor_used_logins (digest, expires_at)
              VALUES (${storageDigest(singleUse.key)}, ${Math.max(singleUse.until, now)})
              ON CONFLICT (digest) DO NOTHING
              RETURNING digest`
            if (claimed.length === 0) return yield* Effect.fail(new LoginAlreadyUsed())
          }
          yield* sql`
            INSERT INTO attestor_sessions
              (token_hash, platform, user_id, stealth_owner, ids, login_challenge, created_at, expires_at)
            VALUES (${storageDigest(token)}, ${session.platform}, ${session.userId},
              ${session.stealthOwner}, ${JSON.stringify(session.ids)}::jsonb, ${loginChallenge ?? null},
              ${now}, ${expiresAt})`
        }).pipe(
          sql.withTransaction,
          Effect.catchTag("SqlError", (cause) => Effect.fail(failed("creating a session")(cause)))
        )
        yield* pruneIfDue(now)
        return { ...session, token, expiresAt, loginChallenge }
      })

    const read: SessionStoreShape["read"] = (token) =>
      Effect.gen(function* () {
        const now = yield* nowSeconds
        const rows = yield* sql<SessionRow>`
          SELECT platform, user_id, stealth_owner, ids, login_challenge, expires_at FROM attestor_sessions
          WHERE token_hash = ${storageDigest(token)} AND expires_at > ${now}`.pipe(
          Effect.mapError(failed("reading a session"))
        )
        const row = rows[0]
        if (row === undefined) return Option.none()
        // Only this module writes the table: a row that does not decode is a bug, not a refusal.
        const session = yield* Effect.orDie(
          decodeSession({
            platform: row.platform,
            userId: row.user_id,
            stealthOwner: row.stealth_owner,
            ids: typeof row.ids === "string" ? JSON.parse(row.ids) : row.ids
          })
        )
        return Option.some({
          ...session,
          expiresAt: Number(row.expires_at),
          loginChallenge: (row.login_challenge ?? undefined) as LoginChallenge | undefined
        })
      })

    const endOthers: SessionStoreShape["endOthers"] = (session, keep, now) =>
      Effect.gen(function* () {
        yield* transactionLock(sql, userLockKey(session))
        yield* sql`
          INSERT INTO attestor_user_contests (platform, user_id, contested_at)
          VALUES (${session.platform}, ${session.userId}, ${now})
          ON CONFLICT (platform, user_id)
          DO UPDATE SET contested_at = GREATEST(attestor_user_contests.contested_at, excluded.contested_at)`
        // Sessions made after the contesting one stay (see above).
        const ended = yield* sql<{ readonly token_hash: string }>`
          DELETE FROM attestor_sessions
          WHERE platform = ${session.platform} AND user_id = ${session.userId}
            AND token_hash <> ${storageDigest(keep)}
            AND created_at <= (SELECT created_at FROM attestor_sessions WHERE token_hash = ${storageDigest(keep)})
          RETURNING token_hash`
        return ended.length
      }).pipe(sql.withTransaction, Effect.mapError(failed("ending sessions")))

    return { ttlSeconds, create, read, endOthers } satisfies SessionStoreShape
  })

// ---------------------------------------------------------------------------------------------
// What the routes answer
// ---------------------------------------------------------------------------------------------

export const INVALID_SESSION_MESSAGE = "the session is unknown or has expired: log in again"
export const LOGIN_BEFORE_CONTEST = "this login was started before the account's last contest: log in again"
export const LOGIN_SECRET_MISSING =
  "loginSecret: this session's login was started with a loginChallenge; send the loginSecret the client drew for it"
export const LOGIN_SECRET_REFUSED =
  "loginSecret: not the secret of this session's login: this client did not start it, log in again"
export const LOGIN_SECRET_UNEXPECTED =
  "loginSecret: this session's login was started without a loginChallenge, so not by this client: log in again"
export const SESSION_STORE_UNAVAILABLE = "the session store is not answering"

export const sessionStoreUnavailable = (_: SessionStoreError): Unavailable =>
  new Unavailable({ message: SESSION_STORE_UNAVAILABLE })

/** Whether `secret`'s SHA-256 is `challenge`, compared in constant time. */
export const secretMatches = (secret: LoginSecret, challenge: LoginChallenge): boolean =>
  timingSafeEqual(
    createHash("sha256")
      .update(Buffer.from(secret.slice(2), "hex"))
      .digest(),
    Buffer.from(challenge.slice(2), "hex")
  )

/**
 * Whether `loginSecret` is what the session's login asks for: its secret when the login carried a
 * challenge, nothing when it did not (a client that always sends a challenge then never accepts a
 * session someone else started without one, even under `LOGIN_CHALLENGE=optional`). A refusal's
 * message, or none.
 */
export const loginSecretRefusal = (
  session: StoredSession,
  loginSecret: LoginSecret | undefined
): string | undefined => {
  if (session.loginChallenge === undefined)
    return loginSecret === undefined ? undefined : LOGIN_SECRET_UNEXPECTED
  if (loginSecret === undefined) return LOGIN_SECRET_MISSING
  return secretMatches(loginSecret, session.loginChallenge) ? undefined : LOGIN_SECRET_REFUSED
}

/**
 * The valid session of a token presented with the login's secret, or the refusal a route answers
 * with: 401 `invalid_session` for an unknown or expired token and for a secret that is missing,
 * wrong or unexpected (`loginSecretRefusal`).
 */
export const authenticate = (
  token: SessionToken,
  loginSecret: LoginSecret | undefined
): Effect.Effect<StoredSession, InvalidSession | Unavailable, SessionStore> =>
  Effect.flatMap(SessionStore, (store) =>
    store.read(token).pipe(
      Effect.mapError(sessionStoreUnavailable),
      Effect.flatMap(
        Option.match({
          onNone: () => Effect.fail(new InvalidSession({ message: INVALID_SESSION_MESSAGE })),
          onSome: (session) => {
            const refusal = loginSecretRefusal(session, loginSecret)
            return refusal === undefined
              ? Effect.succeed(session)
              : Effect.fail(new InvalidSession({ message: refusal }))
          }
        })
      )
    )
  )
