/**
 * Tables whose rows carry their own `expires_at` (unix seconds) and are pruned in passing by the
 * store that writes them: the attestor's sessions, used logins and OAuth states.
 */
import type { SqlClient } from "@effect/sql/SqlClient"

export interface ExpiringRowsConfig {
  /** How long a row lives. */
  readonly ttlSeconds: number
  /** Least time between two prunings of expired rows. Default 60 s. */
  readonly pruneIntervalSeconds?: number
}

/** Rows one pruning deletes from a table at most; the next pruning goes on. */
const PRUNE_LIMIT = 1_000

/**
 * Deletes at most `limit` (`PRUNE_LIMIT` by default) rows of `table` expired by `now`, chosen by
 * their `key` column: a bounded statement, so a backlog never holds its locks for long.
 */
export const deleteExpired = (sql: SqlClient, table: string, key: string, now: number, limit = PRUNE_LIMIT) =>
  sql`
    DELETE FROM ${sql(table)} WHERE ${sql(key)} IN (
      SELECT ${sql(key)} FROM ${sql(table)} WHERE expires_at <= ${now} LIMIT ${limit})`
