/** Timed HTTP series through the load generator, and their table. */
import type { LoadRequest, LoadResult } from "../load.js"
import { runLoad } from "./processes.js"

export const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16)
export const DURATION_MS = Number(process.env.BENCH_DURATION_MS ?? 5_000)
export const WARMUP_MS = Number(process.env.BENCH_WARMUP_MS ?? 1_500)
/** Every series runs this many times, interleaved with the others; the best run counts. */
export const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3))

export interface SeriesSpec {
  readonly name: string
  readonly origin: string
  readonly requests: ReadonlyArray<LoadRequest>
  /** The serving process, whose CPU time per request is measured. */
  readonly server?: { readonly pid: number }
}

export interface SeriesResult extends LoadResult {
  readonly name: string
  readonly rounds: ReadonlyArray<number>
  /**
   * The server's CPU time per request, µs, least over the rounds: what one request costs the
   * server, which steal from a shared machine's other tenants inflates far less than req/s.
   */
  readonly cpuUsPerRequest: number | undefined
  readonly cpuRounds: ReadonlyArray<number>
}

/**
 * Runs every series `ROUNDS` times in turn (so drift on a shared machine hits them alike) and
 * keeps each one's best round; any answer but 200 fails the bench.
 */
export const runSeries = async (specs: ReadonlyArray<SeriesSpec>): Promise<SeriesResult[]> => {
  const best = new Map<string, SeriesResult>()
  for (let round = 0; round < ROUNDS; round++) {
    for (const spec of round % 2 === 0 ? specs : [...specs].reverse()) {
      const result = await runLoad({
        origin: spec.origin,
        requests: spec.requests,
        concurrency: CONCURRENCY,
        durationMs: DURATION_MS,
        warmupMs: WARMUP_MS,
        ...(spec.server === undefined ? {} : { serverPid: spec.server.pid })
      })
      const refused = Object.entries(result.statuses).filter(([status]) => status !== "200")
      if (refused.length > 0 || result.errors > 0)
        throw new Error(`${spec.name}: answers ${JSON.stringify(result.statuses)}, ${result.errors} errors`)
      const previous = best.get(spec.name)
      const rounds = [...(previous?.rounds ?? []), Math.round(result.perSecond)]
      const cpuRounds =
        result.serverCpuUsPerRequest === undefined
          ? (previous?.cpuRounds ?? [])
          : [...(previous?.cpuRounds ?? []), Math.round(result.serverCpuUsPerRequest)]
      const cpuUsPerRequest = cpuRounds.length === 0 ? undefined : Math.min(...cpuRounds)
      best.set(
        spec.name,
        previous === undefined || result.perSecond > previous.perSecond
          ? { ...result, name: spec.name, rounds, cpuRounds, cpuUsPerRequest }
          : { ...previous, rounds, cpuRounds, cpuUsPerRequest }
      )
    }
  }
  return specs.map((s) => best.get(s.name)!)
}

/** The series side by side, each against the first. */
export const printSeries = (title: string, series: ReadonlyArray<SeriesResult>) => {
  console.log(title)
  const base = series[0]!.perSecond
  console.table(
    series.map((s) => ({
      series: s.name,
      "req/s": Math.round(s.perSecond),
      [`vs ${series[0]!.name}`]: `${((s.perSecond / base) * 100).toFixed(0)} %`,
      "p50 ms": s.p50.toFixed(2),
      "p99 ms": s.p99.toFixed(2),
      "bytes/req": Math.round(s.bytes / Math.max(1, s.requests)),
      rounds: s.rounds.join(" "),
      "server CPU µs/req": s.cpuUsPerRequest ?? "",
      [`CPU vs ${series[0]!.name}`]:
        s.cpuUsPerRequest === undefined || series[0]!.cpuUsPerRequest === undefined
          ? ""
          : `${(s.cpuUsPerRequest / series[0]!.cpuUsPerRequest).toFixed(2)}x`
    }))
  )
}

/** "CPU per request: 180 µs vs 150 µs (1.2x)" for a row's note, when both were measured. */
export const cpuComparison = (series: SeriesResult, baseline: SeriesResult): string | undefined =>
  series.cpuUsPerRequest === undefined || baseline.cpuUsPerRequest === undefined
    ? undefined
    : `server CPU per request ${series.cpuUsPerRequest} µs vs ${baseline.cpuUsPerRequest} µs for ${baseline.name} (${(series.cpuUsPerRequest / baseline.cpuUsPerRequest).toFixed(2)}x)`

/** `{ note }` when there is one, for spreading into a row. */
export const noted = (note: string | undefined) => (note === undefined ? {} : { note })
