/**
 * Metrics of the relayed write path: requests by outcome code (recorded by the server's
 * middleware, src/http/outcomes.ts, from `relayerOutcomes`) and failed simulations. Labels are
 * action names, wire codes and the vault's own error names, never an id, address or amount.
 */
import { Effect, Metric } from "effect"
import { feeVaultAbi } from "../../contracts/abi.js"
import { counter, labelSets, type SeriesAtZero, taggedOnce, valuesOf } from "../http/metrics.js"
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

export const onchainReverts = counter(
  "relayer_onchain_reverts_total",
  "Relayed transactions mined reverted, by action and cause: cooldown (counted against the account and owner code), nonce_taken (another transaction executed the same signed step first), registered_first (another transaction registered the account first), bind_changed (another transaction changed the account's bind first in the block), deadline_passed (mined after a deadline it signed, with a deadline headroom of at least one replacement interval) or unexamined (the chain could not be read to tell)"
)

export const revertCooldowns = counter(
  "relayer_revert_cooldowns_total",
  "Revert cooldowns started or lengthened, by key: id (an account) or code_hash (an ERC-1271 owner's code)"
)

export const cooldownRefusals = counter(
  "relayer_revert_cooldown_refusals_total",
  "Relayed requests refused with 429 because their account or owner code is on a revert cooldown, by key"
)

export const bindBudgetRefusals = counter(
  "relayer_bind_budget_refusals_total",
  "Unpaid bind requests (propose-bind, cancel-bind) refused with 429 because the day's budget of their account id or owner is spent, by key: id or owner"
)

export const claimsFrontrun = counter(
  "relayer_claims_frontrun_total",
  "Open claims (claim.relayer = 0x0) this relayer sent that another sender's transaction executed first"
)

const claimOutcome = taggedOnce(claimOutcomes)
const actionOutcome = taggedOnce(actionOutcomes)
const simulationFailure = taggedOnce(simulationFailures)
const onchainRevert = taggedOnce(onchainReverts)
const revertCooldown = taggedOnce(revertCooldowns)
const cooldownRefusal = taggedOnce(cooldownRefusals)
const bindBudgetRefusal = taggedOnce(bindBudgetRefusals)

export type CooldownKey = "id" | "code_hash"

export type OnchainRevertCause =
  | "cooldown"
  | "nonce_taken"
  | "registered_first"
  | "bind_changed"
  | "deadline_passed"
  | "unexamined"

export const recordOnchainRevert = (action: string, cause: OnchainRevertCause) =>
  Effect.asVoid(Metric.increment(onchainRevert({ action, cause })))

export const recordRevertCooldown = (key: CooldownKey) =>
  Effect.asVoid(Metric.increment(revertCooldown({ key })))

export const recordCooldownRefusal = (key: CooldownKey) =>
  Effect.asVoid(Metric.increment(cooldownRefusal({ key })))

export type BindBudgetKey = "id" | "owner" | "relayer"

export const recordBindBudgetRefusal = (key: BindBudgetKey) =>
  Effect.asVoid(Metric.increment(bindBudgetRefusal({ key })))

export const recordClaimFrontrun = Effect.asVoid(Metric.increment(claimsFrontrun))

const recordClaimOutcome = (code: string) => claimOutcome({ code })

const recordActionOutcome = (action: string) => (code: string) => actionOutcome({ action, code })

/** The owner actions and bind steps, each relayed from `/v1/<action>`. */
const ownerAndBindActions = [
  "consolidate",
  "shield-templates",
  "rotate-owner",
  "ping",
  "cancel-bind",
  "propose-bind",
  "finalize-bind"
] as const

/** The relayed write routes' outcome counters, by route template; `action` is the path's name. */
export const relayerOutcomes: RouteOutcomes = {
  "/v1/claim": recordClaimOutcome,
  ...Object.fromEntries(ownerAndBindActions.map((action) => [`/v1/${action}`, recordActionOutcome(action)]))
}

const onchainRevertCauses = valuesOf<OnchainRevertCause>({
  cooldown: true,
  nonce_taken: true,
  registered_first: true,
  bind_changed: true,
  deadline_passed: true,
  unexamined: true
})

/**
 * The write path's counters at 0 from start-up (docs/operations.md "Metrics reference"): every
 * route's `ok`, reverts by action and cause, cooldowns and refusals by key, front-run claims. A
 * refusal's code and a simulation's vault error are labels only their first event gives.
 */
export const relayerSeriesAtZero: ReadonlyArray<SeriesAtZero> = [
  recordClaimOutcome("ok"),
  ...ownerAndBindActions.map((action) => recordActionOutcome(action)("ok")),
  simulationFailures,
  ...labelSets({ action: ["claim", ...ownerAndBindActions], cause: onchainRevertCauses }).map(onchainRevert),
  ...valuesOf<CooldownKey>({ id: true, code_hash: true }).flatMap((key) => [
    revertCooldown({ key }),
    cooldownRefusal({ key })
  ]),
  ...valuesOf<BindBudgetKey>({ id: true, owner: true, relayer: true }).map((key) =>
    bindBudgetRefusal({ key })
  ),
  claimsFrontrun
]

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
