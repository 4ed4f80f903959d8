/**
 * The chain client's circuit breaker, one per RPC endpoint (docs/operations.md, "The chain RPC
 * unreachable"). After `failures` attempts in a row went unanswered (timed out, connection
 * refused, HTTP 5xx: a `ChainUnavailable`), the circuit opens: every request fails at once with
 * `ChainUnavailable`, without retries, so a client is refused 503 in milliseconds instead of after
 * every retry's timeout. Once it has been open `probeAfterMs`, the next request goes through as a
 * probe (the others still fail at once); any answer of the node (a result, a revert, a rejection)
 * closes it again, an unanswered probe keeps it open for another `probeAfterMs`.
 *
 * `decide` and `record` are the pure transitions; `makeCircuit` keeps the state.
 */
import { Clock, Effect, Metric } from "effect"

export interface CircuitSettings {
  /** Unanswered attempts in a row that open the circuit; 0 never opens it. */
  readonly failures: number
  /** How long it stays open before a request may probe the endpoint. */
  readonly probeAfterMs: number
}

export interface CircuitState {
  /** Unanswered attempts since the last answer. */
  readonly consecutive: number
  /** When it opened (or its last probe failed); undefined while closed. */
  readonly openedAtMs: number | undefined
  /** A probe is on its way. */
  readonly probing: boolean
}

const closedCircuit: CircuitState = { consecutive: 0, openedAtMs: undefined, probing: false }

/** Whether an attempt may go out: `pass` (closed), `probe` (the one that tests an open circuit) or `refuse`. */
export const decide = (
  state: CircuitState,
  settings: CircuitSettings,
  nowMs: number
): { readonly admit: "pass" | "probe" | "refuse"; readonly state: CircuitState } => {
  if (state.openedAtMs === undefined) return { admit: "pass", state }
  if (state.probing || nowMs - state.openedAtMs < settings.probeAfterMs) return { admit: "refuse", state }
  return { admit: "probe", state: { ...state, probing: true } }
}

/**
 * The state after an attempt ended: `answered` (the node answered, whatever it said),
 * `unanswered`, or `neither` (interrupted, or a fault of ours: it says nothing of the endpoint).
 */
export const record = (
  state: CircuitState,
  settings: CircuitSettings,
  outcome: "answered" | "unanswered" | "neither",
  probe: boolean,
  nowMs: number
): CircuitState => {
  switch (outcome) {
    case "answered":
      return closedCircuit
    case "neither":
      return probe ? { ...state, probing: false } : state
    case "unanswered": {
      const consecutive = state.consecutive + 1
      if (probe || state.openedAtMs !== undefined)
        return {
          consecutive,
          openedAtMs: probe ? nowMs : state.openedAtMs,
          probing: probe ? false : state.probing
        }
      if (settings.failures > 0 && consecutive >= settings.failures)
        return { consecutive, openedAtMs: nowMs, probing: false }
      return { ...state, consecutive }
    }
  }
}

const circuitOpen = Metric.gauge("chain_rpc_circuit_open", {
  description:
    "1 while the chain client's circuit for an endpoint (rpc: RPC_URL, send: SEND_RPC_URL) is open: its requests are refused at once"
})

export interface Circuit {
  /** `refuse`, or the admission to pass to `settle` when the attempt ends. */
  readonly admit: Effect.Effect<"pass" | "probe" | "refuse">
  readonly settle: (probe: boolean, outcome: "answered" | "unanswered" | "neither") => Effect.Effect<void>
}

/** The circuit of one endpoint, `endpoint` its metric label (`rpc` or `send`). */
export const makeCircuit = (settings: CircuitSettings, endpoint: "rpc" | "send"): Circuit => {
  let state = closedCircuit
  const gauge = Metric.tagged(circuitOpen, "endpoint", endpoint)
  const publish = (before: CircuitState) =>
    (before.openedAtMs === undefined) === (state.openedAtMs === undefined)
      ? Effect.void
      : state.openedAtMs === undefined
        ? Metric.set(gauge, 0).pipe(
            Effect.zipRight(Effect.logInfo("chain client: the RPC answers again; its circuit is closed")),
            Effect.annotateLogs({ endpoint })
          )
        : Metric.set(gauge, 1).pipe(
            Effect.zipRight(
              Effect.logWarning(
                "chain client: the RPC stopped answering; its circuit is open and requests are refused at once until a probe is answered"
              )
            ),
            Effect.annotateLogs({ endpoint, failures: state.consecutive })
          )
  return {
    admit: Effect.map(Clock.currentTimeMillis, (now) => {
      const next = decide(state, settings, now)
      state = next.state
      return next.admit
    }),
    settle: (probe, outcome) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const before = state
        state = record(state, settings, outcome, probe, now)
        return publish(before)
      })
  }
}

/** The reason of the `ChainUnavailable` a refused request fails with. */
export const CIRCUIT_OPEN = "circuit open: the RPC stopped answering"
