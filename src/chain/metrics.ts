/**
 * The chain client's requests, counted by operation and outcome: what an RPC provider bills, and
 * how much of it fails. Labels are the client's operation names (JSON-RPC methods; `eth_getBlock`
 * is `eth_getBlockByNumber` or `eth_getBlockByHash`, and `estimateFeesPerGas` reads a block and the
 * priority fee) and an outcome class, never a parameter.
 */
import { Cause, Exit, Metric, Option } from "effect"
import { counter, type SeriesAtZero, taggedOnce } from "../http/metrics.js"
import { CIRCUIT_OPEN } from "./circuit.js"

export const chainRpcRequests = counter(
  "chain_rpc_requests_total",
  "Chain client requests, each attempt, by operation and outcome (ok, reverted, rejected, unavailable, refused while the circuit is open, failed, interrupted)"
)
const series = taggedOnce(chainRpcRequests)

/**
 * Exported at 0 from start-up without labels: operations include `eth_call(<function>)`, so the
 * label sets are known only as requests are made (docs/operations.md "Metrics reference").
 */
export const chainSeriesAtZero: ReadonlyArray<SeriesAtZero> = [chainRpcRequests]

const outcomeOf = (exit: Exit.Exit<unknown, { readonly _tag: string }>): string =>
  Exit.match(exit, {
    onSuccess: () => "ok",
    onFailure: (cause) =>
      Cause.isInterruptedOnly(cause)
        ? "interrupted"
        : Option.match(Cause.failureOption(cause), {
            onNone: () => "failed",
            onSome: (error) =>
              error._tag === "ChainReverted"
                ? "reverted"
                : error._tag === "RpcRejected"
                  ? "rejected"
                  : error._tag === "ChainUnavailable"
                    ? (error as { readonly reason?: string }).reason === CIRCUIT_OPEN
                      ? "refused"
                      : "unavailable"
                    : "failed"
          })
  })

/** Counts one attempt of `operation` by how it ended. */
export const countRpcRequest = (operation: string, exit: Exit.Exit<unknown, { readonly _tag: string }>) =>
  Metric.increment(series({ operation, outcome: outcomeOf(exit) }))
