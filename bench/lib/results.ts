/**
 * bench/results.json: one row per measure, each number beside the baseline measured in the same
 * run. Every bench merges its own rows, so a bench run alone updates only its rows.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { cpus, loadavg } from "node:os"
import { join } from "node:path"
import { ROOT } from "./processes.js"

export const RESULTS_FILE = join(ROOT, "bench", "results.json")

export interface Row {
  readonly measure: string
  /** null: not measured (see `note`). */
  readonly value: number | null
  readonly unit: string
  readonly baseline: number | null
  readonly baselineLabel: string
  /** value / baseline. */
  readonly ratio: number | null
  readonly goal: string
  readonly note?: string
  /** When this row was measured, and by which bench. */
  readonly measuredAt: string
  readonly bench: string
  /** 1-minute load average when the row was recorded: on a shared machine, read figures with it. */
  readonly loadAverage: number
  readonly details?: unknown
}

/** The rows in the order of the table; a bench may only write these. */
export const ROW_ORDER = [
  "quote_vs_raw",
  "quote_vs_bare",
  "commitment_vs_bare",
  "claim_rpc_calls",
  "claim_latency",
  "claim_throughput",
  "idle_rss",
  "accounts_peak_rss_pglite",
  "accounts_peak_rss_postgres",
  "backfill_vs_getlogs",
  "soak_5xx_outside_faults",
  "soak_claims_mined_once"
] as const
export type RowKey = (typeof ROW_ORDER)[number]

interface ResultsFile {
  readonly machine: { readonly cpus: number; readonly cpu: string; readonly node: string }
  readonly rows: Partial<Record<RowKey, Row>>
}

const read = (): ResultsFile["rows"] => {
  if (!existsSync(RESULTS_FILE)) return {}
  try {
    return (JSON.parse(readFileSync(RESULTS_FILE, "utf8")) as ResultsFile).rows ?? {}
  } catch {
    return {}
  }
}

const round = (n: number | null) =>
  n === null ? null : Math.abs(n) >= 100 ? Math.round(n) : Math.round(n * 100) / 100

export const row = (
  bench: string,
  r: Omit<Row, "ratio" | "measuredAt" | "bench" | "loadAverage"> & { readonly ratio?: number | null }
): Row => ({
  ...r,
  value: round(r.value),
  baseline: round(r.baseline),
  ratio:
    r.ratio !== undefined
      ? r.ratio
      : r.value === null || r.baseline === null || r.baseline === 0
        ? null
        : Math.round((r.value / r.baseline) * 100) / 100,
  measuredAt: new Date().toISOString(),
  bench,
  loadAverage: Math.round(loadavg()[0]! * 100) / 100
})

/** Merges `rows` into bench/results.json and prints them. */
export const record = (rows: Partial<Record<RowKey, Row>>) => {
  const merged = { ...read(), ...rows }
  const ordered: Partial<Record<RowKey, Row>> = {}
  for (const key of ROW_ORDER) if (merged[key] !== undefined) ordered[key] = merged[key]
  const file: ResultsFile = {
    machine: { cpus: cpus().length, cpu: cpus()[0]?.model ?? "unknown", node: process.version },
    rows: ordered
  }
  writeFileSync(RESULTS_FILE, `${JSON.stringify(file, null, 2)}\n`)
  printTable(rows)
}

const show = (n: number | null, unit: string) =>
  n === null ? "not measured" : `${n.toLocaleString("en-US")} ${unit}`.trim()

/** The rows as a table: measure, figure, baseline, ratio, goal. */
export const printTable = (rows: Partial<Record<RowKey, Row>> = read()) => {
  const lines = ROW_ORDER.flatMap((key) => {
    const r = rows[key]
    return r === undefined
      ? []
      : [
          {
            measure: r.measure,
            figure: show(r.value, r.unit),
            baseline:
              r.baseline === null ? r.baselineLabel : `${show(r.baseline, r.unit)} (${r.baselineLabel})`,
            ratio: r.ratio === null ? "" : `${r.ratio}x`,
            goal: r.goal
          }
        ]
  })
  console.table(lines)
  for (const key of ROW_ORDER) {
    const note = rows[key]?.note
    if (note !== undefined) console.log(`  ${key}: ${note}`)
  }
}
