/**
 * The soak's timetable and its reading (bench/soak.ts): when each fault is injected, and whether
 * an answer belongs to a fault (its request overlapped a fault's window, recovery margin included)
 * or to the time outside them. Pure, so the report's split does not depend on the run.
 */

/** The faults, in the order they are injected. */
export const FAULTS = [
  "kill -9 of a replica mid-load",
  "kill -9 of a replica during a claim burst",
  "PostgreSQL unreachable",
  "chain RPC blackholed",
  "one replica's send RPC hung"
] as const
export type Fault = (typeof FAULTS)[number]

export interface Timetable {
  /** Load before the first fault. */
  readonly leadInMs: number
  /** One slot per fault: the fault at its start, then the recovery until the next. */
  readonly slotMs: number
  /** How long the timed faults (database, chain, send RPC) last. */
  readonly faultMs: number
  /** After a window ends, answers still count as the fault's for this long. */
  readonly marginMs: number
  /** Each fault's planned start, from the start of the load. */
  readonly startsMs: ReadonlyArray<number>
}

/**
 * A soak of `totalMs` split as: a lead-in and a tail of 8 % each, five equal slots between them.
 * A timed fault lasts 20 s, or 40 % of its slot in a short run; answers count as the fault's for
 * 10 s (20 % of a slot in a short run, at least 5 s) after its window, the time a pool, circuit or
 * lock takes to recover (a circuit probes every 2 s, `RPC_CIRCUIT_PROBE_MS`).
 */
export const timetable = (totalMs: number): Timetable => {
  const leadInMs = Math.round(totalMs * 0.08)
  const slotMs = Math.floor((totalMs - 2 * leadInMs) / FAULTS.length)
  return {
    leadInMs,
    slotMs,
    faultMs: Math.min(20_000, Math.round(slotMs * 0.4)),
    marginMs: Math.min(10_000, Math.max(5_000, Math.round(slotMs * 0.2))),
    startsMs: FAULTS.map((_, i) => leadInMs + i * slotMs)
  }
}

export interface Window {
  readonly fault: Fault
  /** Epoch ms: when the fault was injected and when it was lifted (a killed replica answering again). */
  readonly start: number
  readonly end: number
}

/** The fault whose window (plus `marginMs`) the request `[start, end]` overlapped, if any. */
export const faultOf = (
  windows: ReadonlyArray<Window>,
  marginMs: number,
  start: number,
  end: number
): Fault | undefined => windows.find((w) => start <= w.end + marginMs && end >= w.start)?.fault

/** The `q` quantile of `sorted` (ascending), nearest rank; 0 for none. */
export const quantile = (sorted: ReadonlyArray<number>, q: number): number =>
  sorted.length === 0
    ? 0
    : sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!
