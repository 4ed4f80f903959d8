/**
 * Request metrics and the Prometheus text exposition. Labels are route templates, methods and
 * status codes only: never a path with an id in it, an address, or a client IP.
 */
import { createHash, timingSafeEqual } from "node:crypto"
import {
  Array as Arr,
  Effect,
  Metric,
  MetricBoundaries,
  MetricLabel,
  type MetricPair,
  MetricState,
  Option,
  Redacted
} from "effect"

/** A counter as every service declares them: named, described, and exposed as a counter. */
export const counter = (name: string, description: string) =>
  Metric.counter(name, { description, incremental: true })

export const httpRequests = counter(
  "http_requests_total",
  "HTTP requests by route template, method and status"
)

export const httpRequestDuration = Metric.histogram(
  "http_request_duration_seconds",
  MetricBoundaries.fromIterable([0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]),
  "HTTP request latency by route template, method and status"
)

interface RequestLabels {
  readonly route: string
  readonly method: string
  readonly status: number
}

/**
 * `metric` tagged with a label set, each label set built once: tagging derives a new metric key
 * per call, measurable work when done on every request. Label sets are bounded by design (routes,
 * methods, statuses, actions, codes).
 *
 * The tagged metric hands the underlying one the same label array on every update (the labels as
 * `Metric.tagged` one by one would order them), so Effect's per-metric hook cache, which is keyed
 * by that array, finds the series without building and hashing its key again.
 */
export const taggedOnce = <T, In, Out>(metric: Metric.Metric<T, In, Out>) => {
  const cache = new Map<string, Metric.Metric<T, In, Out>>()
  return (labels: Readonly<Record<string, string>>): Metric.Metric<T, In, Out> => {
    const key = Object.entries(labels)
      .map(([k, v]) => `${k}=${v}`)
      .join("\u0000")
    let tagged = cache.get(key)
    if (tagged === undefined) {
      const tags = Object.entries(labels).map(([k, v]) => MetricLabel.make(k, v))
      const withTags = (extra: ReadonlyArray<MetricLabel.MetricLabel>) =>
        extra.length === 0 ? tags : Arr.union(tags, extra)
      tagged = Metric.make(
        metric.keyType,
        (input, extra) => metric.unsafeUpdate(input, withTags(extra)),
        (extra) => metric.unsafeValue(withTags(extra)),
        (input, extra) => metric.unsafeModify(input, withTags(extra))
      )
      cache.set(key, tagged)
    }
    return tagged
  }
}

const requestCounter = taggedOnce(httpRequests)
const requestHistogram = taggedOnce(httpRequestDuration)

/**
 * A series a service exports from start-up at 0 (docs/operations.md "Metrics reference"): a
 * counter or histogram, tagged as its recorder tags it, so that the series is the one the first
 * event updates (a series' key is its labels in order).
 */
export type SeriesAtZero = Metric.Metric.Counter<number> | Metric.Metric.Histogram<number>

/**
 * Every combination of the label values, labels in the order given: a counter's known label sets
 * (`labelSets({ action: [...], cause: [...] })`).
 */
export const labelSets = (
  values: Readonly<Record<string, ReadonlyArray<string>>>
): Array<Record<string, string>> =>
  Object.entries(values).reduce<Array<Record<string, string>>>(
    (sets, [label, options]) => sets.flatMap((set) => options.map((value) => ({ ...set, [label]: value }))),
    [{}]
  )

/** The values of a string union, checked complete by the compiler: `valuesOf<Cause>({ a: true, … })`. */
export const valuesOf = <T extends string>(all: Readonly<Record<T, true>>): ReadonlyArray<T> =>
  Object.keys(all) as Array<T>

/**
 * Creates each series without changing it: reading a series' value registers it, so every scrape
 * lists it, at 0 until its first event; `rate()` and `increase()` then see that first event. Run
 * once at start-up: the recorders find the series already there.
 */
export const exportAtZero = (series: ReadonlyArray<SeriesAtZero>): Effect.Effect<void> =>
  // Read as a counter whatever its kind: the reading registers the series and its value is unused.
  Effect.forEach(series, (one) => Metric.value(one as Metric.Metric.Counter<number>), { discard: true })

/**
 * The request counter and histogram of every route the API declares, by route template and
 * method: a series' `status` is known only once a request is answered, so the start-up series has
 * none (docs/operations.md "Metrics reference").
 */
export const requestSeriesAtZero = (
  routes: ReadonlyArray<{ readonly template: string; readonly method: string }>
): ReadonlyArray<SeriesAtZero> =>
  routes.flatMap(({ template, method }) => {
    const tags = { route: template, method }
    return [requestCounter(tags), requestHistogram(tags)]
  })

/** The request counter and histogram of one label set, found once per (route, method, status). */
const requestSeries = new Map<
  string,
  readonly [Metric.Metric.Counter<number>, Metric.Metric.Histogram<number>]
>()

/**
 * Counts a finished request and its duration. Synchronous: the metrics' own update, as
 * `Metric.increment`/`Metric.update` make it with the fiber's metric labels (`extraTags`,
 * `FiberRef.currentMetricLabels`).
 */
export const recordRequest = (
  labels: RequestLabels,
  seconds: number,
  extraTags: ReadonlyArray<MetricLabel.MetricLabel> = []
): void => {
  const key = `${labels.route} ${labels.method} ${labels.status}`
  let series = requestSeries.get(key)
  if (series === undefined) {
    const tags = { route: labels.route, method: labels.method, status: String(labels.status) }
    series = [requestCounter(tags), requestHistogram(tags)]
    requestSeries.set(key, series)
  }
  series[0].unsafeUpdate(1, extraTags)
  series[1].unsafeUpdate(seconds, extraTags)
}

const escapeLabel = (v: string) => v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"')
const sanitizeName = (name: string) => name.replace(/[^a-zA-Z0-9_:]/g, "_")

const labelText = (labels: ReadonlyArray<readonly [string, string]>) =>
  labels.length === 0 ? "" : `{${labels.map(([k, v]) => `${sanitizeName(k)}="${escapeLabel(v)}"`).join(",")}}`

const formatNumber = (n: number | bigint) =>
  typeof n === "bigint"
    ? n.toString()
    : Number.isNaN(n)
      ? "NaN"
      : n === Number.POSITIVE_INFINITY
        ? "+Inf"
        : n === Number.NEGATIVE_INFINITY
          ? "-Inf"
          : String(n)

/** One labelled series of a family: its lines in exposition order (a histogram's buckets ascending). */
interface Series {
  readonly labels: string
  readonly lines: Array<string>
}

/**
 * Prometheus text format 0.0.4 of a metric snapshot: families by name, each series by its labels,
 * a histogram's buckets ascending with `+Inf` last. A counter that may go down (Effect's
 * non-incremental counters, such as `effect_fiber_active`) is a gauge.
 */
export const renderPrometheus = (pairs: ReadonlyArray<MetricPair.MetricPair.Untyped>): string => {
  const families = new Map<string, { help: string | undefined; type: string; series: Array<Series> }>()
  const series = (name: string, type: string, help: string | undefined, labels: string) => {
    let f = families.get(name)
    if (f === undefined) {
      f = { help, type, series: [] }
      families.set(name, f)
    }
    const one: Series = { labels, lines: [] }
    f.series.push(one)
    return one.lines
  }
  for (const pair of pairs) {
    const name = sanitizeName(pair.metricKey.name)
    const help = Option.getOrUndefined(pair.metricKey.description)
    const labels = pair.metricKey.tags.map((t) => [t.key, t.value] as const)
    const key = labelText(labels)
    const state = pair.metricState
    if (MetricState.isCounterState(state)) {
      const keyType = pair.metricKey.keyType as { readonly incremental?: boolean }
      series(name, keyType.incremental === false ? "gauge" : "counter", help, key).push(
        `${name}${key} ${formatNumber(state.count)}`
      )
    } else if (MetricState.isGaugeState(state)) {
      series(name, "gauge", help, key).push(`${name}${key} ${formatNumber(state.value)}`)
    } else if (MetricState.isHistogramState(state)) {
      const lines = series(name, "histogram", help, key)
      // Effect's histogram buckets are cumulative counts per upper bound.
      const buckets = [...state.buckets]
        .filter(([bound]) => bound !== Number.POSITIVE_INFINITY)
        .sort(([a], [b]) => a - b)
      for (const [bound, count] of buckets)
        lines.push(`${name}_bucket${labelText([...labels, ["le", String(bound)]])} ${count}`)
      lines.push(`${name}_bucket${labelText([...labels, ["le", "+Inf"]])} ${state.count}`)
      lines.push(`${name}_sum${key} ${formatNumber(state.sum)}`)
      lines.push(`${name}_count${key} ${state.count}`)
    } else if (MetricState.isFrequencyState(state)) {
      for (const [occurrence, count] of state.occurrences) {
        const withKey = labelText([...labels, ["key", occurrence]])
        series(name, "counter", help, withKey).push(`${name}${withKey} ${count}`)
      }
    } else if (MetricState.isSummaryState(state)) {
      const lines = series(name, "summary", help, key)
      for (const [q, value] of state.quantiles) {
        lines.push(
          `${name}${labelText([...labels, ["quantile", String(q)]])} ${formatNumber(Option.getOrElse(value, () => Number.NaN))}`
        )
      }
      lines.push(`${name}_sum${key} ${formatNumber(state.sum)}`)
      lines.push(`${name}_count${key} ${state.count}`)
    }
  }
  const out: Array<string> = []
  for (const [name, f] of [...families.entries()].sort(([a], [b]) => a.localeCompare(b))) {
    if (f.help !== undefined)
      out.push(`# HELP ${name} ${f.help.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")}`)
    out.push(`# TYPE ${name} ${f.type}`)
    for (const one of f.series.sort((a, b) => (a.labels < b.labels ? -1 : a.labels > b.labels ? 1 : 0)))
      out.push(...one.lines)
  }
  return `${out.join("\n")}\n`
}

/**
 * The process's own figures, the ones Prometheus client libraries export by default, read when
 * scraped: what an operator watches for memory growth and CPU saturation (a service's JavaScript
 * runs on one thread).
 */
const residentMemory = Metric.gauge("process_resident_memory_bytes", {
  description: "Resident memory size of the process in bytes"
})
const heapTotal = Metric.gauge("nodejs_heap_size_total_bytes", {
  description: "V8 heap reserved by the process in bytes"
})
const heapUsed = Metric.gauge("nodejs_heap_size_used_bytes", {
  description: "V8 heap in use by the process in bytes"
})
const externalMemory = Metric.gauge("nodejs_external_memory_bytes", {
  description:
    "Memory outside the V8 heap held by JavaScript objects (buffers, the embedded database's WebAssembly memory) in bytes"
})
const cpuSeconds = counter("process_cpu_seconds_total", "User and system CPU time of the process in seconds")

let cpuMicrosReported = 0
const sampleProcess = Effect.suspend(() => {
  const memory = process.memoryUsage()
  const { user, system } = process.cpuUsage()
  const cpuMicros = user + system
  const cpuDelta = cpuMicros - cpuMicrosReported
  cpuMicrosReported = cpuMicros
  return Effect.all(
    [
      Metric.set(residentMemory, memory.rss),
      Metric.set(heapTotal, memory.heapTotal),
      Metric.set(heapUsed, memory.heapUsed),
      Metric.set(externalMemory, memory.external),
      Metric.incrementBy(cpuSeconds, cpuDelta / 1e6)
    ],
    { discard: true }
  )
})

/** The process's own counter, for `exportAtZero` (its gauges are read at every scrape). */
export const processSeriesAtZero: ReadonlyArray<SeriesAtZero> = [cpuSeconds]

export const prometheusText = Effect.zipRight(sampleProcess, Effect.map(Metric.snapshot, renderPrometheus))

const digest = (s: string) => createHash("sha256").update(s, "utf8").digest()

/**
 * Compares a presented bearer token with the configured one in constant time (both hashed to a
 * fixed length first, so neither content nor length leaks through timing).
 */
export const bearerMatches = (authorization: string | undefined, token: Redacted.Redacted): boolean => {
  const presented = authorization?.startsWith("Bearer ") ? authorization.slice("Bearer ".length) : ""
  const ok = timingSafeEqual(digest(presented), digest(Redacted.value(token)))
  return ok && presented.length > 0
}
