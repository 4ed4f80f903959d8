/**
 * Why the database named by `DATABASE_URL` could not be opened at start-up, in words an operator
 * acts on: the setting's name, where it points (host, port, database, user: never the password)
 * and the cause (refused, unknown host, unknown database, authentication, timeout). Pure: the
 * storage layer maps its connection failure through it (src/store/sql.ts).
 */
import { Data } from "effect"

/** The database could not be opened; `message` names `DATABASE_URL` and the cause. */
export class DatabaseStartError extends Data.TaggedError("DatabaseStartError")<{
  readonly message: string
}> {}

/** Where the URL points, without its password: `user@host:port/database`. */
const databaseTarget = (url: string): string => {
  try {
    const parsed = new URL(url)
    const user = decodeURIComponent(parsed.username) || "the default user"
    const database = decodeURIComponent(parsed.pathname.replace(/^\//, "")) || "the default database"
    return `database ${JSON.stringify(database)} as ${JSON.stringify(user)} at ${parsed.hostname || "localhost"}:${parsed.port || "5432"}`
  } catch {
    return "an unreadable URL"
  }
}

const codesOf = (error: unknown, depth = 0): ReadonlyArray<string> => {
  if (typeof error !== "object" || error === null || depth > 4) return []
  const own = "code" in error && typeof error.code === "string" ? [error.code] : []
  const nested = [
    ...("errors" in error && Array.isArray(error.errors) ? error.errors : []),
    ...("cause" in error ? [error.cause] : [])
  ].flatMap((inner) => codesOf(inner, depth + 1))
  return [...own, ...nested]
}

const timedOut = (error: unknown): boolean =>
  typeof error === "object" &&
  error !== null &&
  "message" in error &&
  typeof error.message === "string" &&
  /timed out|timeout/i.test(error.message)

/** The cause of a failed connection, by the PostgreSQL SQLSTATE or the socket's error code. */
const databaseCause = (error: unknown): string => {
  const codes = codesOf(error)
  const has = (code: string) => codes.includes(code)
  if (has("ECONNREFUSED")) return "connection refused: is PostgreSQL running and listening there?"
  if (has("ENOTFOUND") || has("EAI_AGAIN")) return "unknown host"
  if (has("3D000")) return "unknown database: create it, or name an existing one"
  if (has("28P01") || has("28000"))
    return "authentication failed: check the user and password, and pg_hba.conf"
  if (has("ETIMEDOUT") || has("ECONNRESET") || timedOut(error))
    return "no answer in time (a firewall, or not a PostgreSQL server?)"
  if (has("53300")) return "too many connections"
  if (has("57P03")) return "the server is starting up or shutting down"
  const sqlState = codes.find((code) => /^[0-9A-Z]{5}$/.test(code))
  return sqlState === undefined
    ? "cannot connect"
    : `the server refused the connection (SQLSTATE ${sqlState})`
}

/** The start-up failure for a connection to `url` that failed with `error`. */
export const databaseStartError = (url: string, error: unknown): DatabaseStartError =>
  new DatabaseStartError({
    message: `DATABASE_URL (${databaseTarget(url)}): ${databaseCause(error)}`
  })
