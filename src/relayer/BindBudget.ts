/**
 * The day's budget of unpaid bind transactions (docs/relayer.md §8 "Unpaid bind budget"; migration
 * 0015). Propose-bind and cancel-bind pay nothing, and both succeed on chain, so neither the fee
 * checks nor the revert cooldowns stop an owner who proposes (with an attestor session of its
 * handle) and cancels (with its own key) in a loop, each cycle costing the hot key both
 * transactions' gas. Each one the relayer sends is counted against its account id and, once the
 * account has an owner, against that owner (the cancel's signer; for a proposal the owner it
 * would replace), `BIND_BUDGET_PER_DAY` of them a day for each; and against the relayer as a whole,
 * `BIND_BUDGET_TOTAL_PER_DAY` proposals and as many cancels a day: one user's handle may have any
 * number of accounts (a launch each), each with a fresh owner, so only a relayer-wide count
 * bounds the hot key's spend. Past a budget, 429 `rate_limited` with `Retry-After` until its window ends.
 *
 * - A window is a day from the first charge after the last one ended (a fixed window per key).
 * - A proposal needs room for itself and for the cancel that may undo it, so the owner's cancel of
 *   a proposal this relayer sent is not refused for the budget (unless the owner's own cancels on
 *   its other accounts took that room in between).
 * - Charged once the request passed simulation and the per-id limit, as that limit is, and given
 *   back when the transaction is then not sent: what is counted is what the hot key sent.
 * - Finalize-bind is not counted: it succeeds once per proposal (the bind nonce's reservation keeps
 *   two from going out together, a racing one that reverts puts the account on a revert cooldown),
 *   so proposals bound it, and refusing it would keep a proposal that was paid for from finishing.
 *
 * The counts live in the database, so a restart forgets nothing and every replica charges the same
 * rows; every key is charged in one transaction, all or nothing.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { Context, Data, Effect, Layer } from "effect"
import type { Address, Hex } from "viem"
import { RateLimited, Unavailable } from "../../schema/errors.js"
import { ZERO_ADDRESS } from "../../schema/ids.js"
import { atMostEvery } from "../background/throttle.js"
import { nowSeconds } from "../clock.js"
import { RelayerSettings } from "../config/relayer.js"
import { deleteExpired } from "../store/expiringRows.js"
import { type BindBudgetKey, recordBindBudgetRefusal } from "./metrics.js"

const DAY_SECONDS = 86_400

/** The unpaid bind transactions the budget counts. */
export type BudgetedBind = "propose-bind" | "cancel-bind"

/**
 * How much of a key's budget must be left for `action` to be sent: a proposal keeps room for the
 * cancel that may undo it.
 */
export const roomNeeded = (action: BudgetedBind): number => (action === "propose-bind" ? 2 : 1)

export interface BindCharge {
  readonly id: Hex
  /** The account's current owner; the zero address (no owner yet) counts the id alone. */
  readonly owner: Address
  readonly action: BudgetedBind
}

export interface BindBudgetShape {
  /**
   * Counts one transaction of `charge.action` against its id and owner, or refuses with 429
   * `rate_limited` (and `Retry-After`) when one of their budgets has no room for it; 503 when the
   * database does not answer. Succeeds with the effect that gives the charge back.
   */
  readonly charge: (charge: BindCharge) => Effect.Effect<Effect.Effect<void>, RateLimited | Unavailable>
}

/** A key whose budget has no room, inside the charging transaction (which it rolls back). */
class Spent extends Data.TaggedError("Spent")<{
  readonly key: BindBudgetKey
  readonly retryAfterSeconds: number
}> {}

const refusalMessage = (key: BindBudgetKey, budget: number) =>
  key === "relayer"
    ? `this relayer has sent the ${budget} transactions of this kind (propose-bind, or cancel-bind) it sends in a day for all accounts: none is sent until the day's window ends; it can be sent by another relayer or from any address`
    : `${key === "id" ? "this account" : "this account's owner"} has had the ${budget} unpaid bind transactions (propose-bind, cancel-bind) a day this relayer sends for it${key === "id" ? "" : " across its accounts"}: none is sent until the day's window ends (a propose-bind also keeps room for a cancel-bind)`

const databaseUnavailable = () => new Unavailable({ message: "the relayer's database is not answering" })

export const makeBindBudget: Effect.Effect<BindBudgetShape, never, SqlClient | RelayerSettings> = Effect.gen(
  function* () {
    const sql = yield* SqlClient
    const settings = yield* RelayerSettings
    const budget = settings.bindBudgetPerDay
    const totalBudget = settings.bindBudgetTotalPerDay
    const budgetOf = (kind: BindBudgetKey) => (kind === "relayer" ? totalBudget : budget)
    const vault = settings.vault.toLowerCase()
    const whenDue = yield* atMostEvery(60)

    const rowKey = (kind: BindBudgetKey, value: string) => `${vault}:${kind}:${value.toLowerCase()}`

    const pruneIfDue = (now: number) =>
      whenDue(
        now,
        deleteExpired(sql, "relayer_bind_budgets", "budget_key", now).pipe(
          Effect.asVoid,
          Effect.catchTag("SqlError", () =>
            Effect.logWarning("pruning expired bind budgets failed; will retry")
          )
        )
      )

    /**
     * One key's charge in one statement, so concurrent charges of a key serialize on its row: a
     * new window when the last one ended, else one more if `room` is left. No row back: refused.
     */
    const take = (key: string, room: number, limit: number, now: number) =>
      sql<{ readonly expires_at: string | number | bigint }>`
        INSERT INTO relayer_bind_budgets AS b (budget_key, spent, expires_at)
        VALUES (${key}, 1, ${now + DAY_SECONDS})
        ON CONFLICT (budget_key) DO UPDATE SET
          spent = CASE WHEN b.expires_at <= ${now} THEN 1 ELSE b.spent + 1 END,
          expires_at = CASE WHEN b.expires_at <= ${now} THEN ${now + DAY_SECONDS} ELSE b.expires_at END
        WHERE b.expires_at <= ${now} OR b.spent + ${room} <= ${limit}
        RETURNING expires_at`

    const windowEnd = (key: string) =>
      Effect.map(
        sql<{ readonly expires_at: string | number | bigint }>`
          SELECT expires_at FROM relayer_bind_budgets WHERE budget_key = ${key}`,
        (rows) => Number(rows[0]?.expires_at ?? 0)
      )

    /** Gives back a charge of `key`, unless its window has ended since. */
    const giveBack = (key: string, expiresAt: number) =>
      sql`
        UPDATE relayer_bind_budgets SET spent = spent - 1
        WHERE budget_key = ${key} AND expires_at = ${expiresAt} AND spent > 0`.pipe(
        Effect.asVoid,
        Effect.catchTag("SqlError", () =>
          Effect.logWarning("giving back an unsent bind transaction's budget failed; it stays counted")
        )
      )

    /**
     * The keys a charge counts against: its id and owner (unless `BIND_BUDGET_PER_DAY=0`), and the
     * relayer-wide count of its action (unless `BIND_BUDGET_TOTAL_PER_DAY=0`). Proposals and
     * cancels are counted relayer-wide apart: a cancel is the user's answer to a hostile proposal,
     * which others' proposals must not crowd out, and spending the cancels' count takes proposals
     * paid on chain (about twice a cancel's gas each).
     */
    const keysOf = (id: Hex, owner: Address, action: BudgetedBind) => {
      const keys: Array<readonly [BindBudgetKey, string]> = []
      if (budget > 0) {
        keys.push(["id", rowKey("id", id)])
        if (owner !== ZERO_ADDRESS) keys.push(["owner", rowKey("owner", owner)])
      }
      if (totalBudget > 0) keys.push(["relayer", rowKey("relayer", action)])
      return keys
    }

    const charge: BindBudgetShape["charge"] = ({ id, owner, action }) =>
      Effect.gen(function* () {
        const keys = keysOf(id, owner, action)
        if (keys.length === 0) return Effect.void
        const now = yield* nowSeconds
        // Always the id first, then the owner, then the relayer-wide row: two transactions never
        // wait on each other's rows.
        const charged = yield* Effect.gen(function* () {
          const taken: Array<readonly [string, number]> = []
          for (const [kind, key] of keys) {
            const rows = yield* take(key, kind === "relayer" ? 1 : roomNeeded(action), budgetOf(kind), now)
            const row = rows[0]
            if (row === undefined)
              return yield* new Spent({
                key: kind,
                retryAfterSeconds: Math.max(1, (yield* windowEnd(key)) - now)
              })
            taken.push([key, Number(row.expires_at)])
          }
          return taken
        }).pipe(
          sql.withTransaction,
          Effect.catchTags({
            SqlError: () => Effect.fail(databaseUnavailable()),
            Spent: (spent) =>
              Effect.zipRight(
                recordBindBudgetRefusal(spent.key),
                Effect.fail(
                  new RateLimited({
                    message: refusalMessage(spent.key, budgetOf(spent.key)),
                    retryAfterSeconds: spent.retryAfterSeconds
                  })
                )
              )
          })
        )
        yield* pruneIfDue(now)
        return Effect.forEach(charged, ([key, expiresAt]) => giveBack(key, expiresAt), { discard: true })
      })

    return { charge }
  }
)

export class BindBudget extends Context.Tag("BindBudget")<BindBudget, BindBudgetShape>() {
  /** The budgets in the relayer's database. */
  static readonly layer: Layer.Layer<BindBudget, never, SqlClient | RelayerSettings> = Layer.effect(
    BindBudget,
    makeBindBudget
  )

  /** No budget: for pipelines under test that send nothing or test everything else. */
  static readonly test: Layer.Layer<BindBudget> = Layer.succeed(BindBudget, {
    charge: () => Effect.succeed(Effect.void)
  })
}
