/**
 * Metrics of the relayed write path: requests by outcome code (recorded by the server's
 * middleware, src/http/outcomes.ts, from `relayerOutcomes`) and failed simulations. Labels are
 * action names, wire codes and the vault's own error names, never an id, address or amount.
 */
import { Effect, Metric } from "effect"
import { feeVaultAbi } from "../../contracts/abi.js"
import { counter, taggedOnce } from "../http/metrics.js"
import type { RouteOutcomes } from "../http/outcomes.js"

export const claimOutcomes = counter(
  "relayer_claims_total",
  "POST /v1/claim requests by outcome: ok or the refusal's code"
)

export const actionOutcomes = counter(
  "relayer_actions_total",
  "Owner-action and bind requests (consolidate, shield-templates, rotate-owner, ping, cancel-bind, propose-bind, finalize-bind) by action and outcome: ok or the refusal's code"
)

export const simulationFailures = counter(
  "relayer_simulation_failures_total",
  "Relayed transactions whose simulation (eth_call or eth_estimateGas) reverted, by action and vault error"
)

const claimOutcome = taggedOnce(claimOutcomes)
const actionOutcome = taggedOnce(actionOutcomes)
const simulationFailure = taggedOnce(simulationFailures)

const recordClaimOutcome = (code: string) => claimOutcome({ code })

const recordActionOutcome = (action: string) => (code: string) => actionOutcome({ action, code })

/** The relayed write routes' outcome counters, by route template; `action` is the path's name. */
export const relayerOutcomes: RouteOutcomes = {
  "/v1/claim": recordClaimOutcome,
  ...Object.fromEntries(
    [
      "consolidate",
      "shield-templates",
      "rotate-owner",
      "ping",
      "cancel-bind",
      "propose-bind",
      "finalize-bind"
    ].map((action) => [`/v1/${action}`, recordActionOutcome(action)])
  )
}

/** Names a revert may be labelled with: the vault's errors (which include the shield adapter's). */
const knownErrors = new Set<string>([
  ...feeVaultAbi.filter((item) => item.type === "error").map((item) => item.name),
  "Error",
  "Panic"
])

export const recordSimulationFailure = (action: string, errorName: string | undefined) =>
  Effect.asVoid(
    Metric.increment(
      simulationFailure({
        action,
        error: errorName !== undefined && knownErrors.has(errorName) ? errorName : "unknown"
      })
    )
  )
