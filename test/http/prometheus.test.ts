/**
 * The metrics text both services serve is valid Prometheus exposition (src/http/metrics.ts): a
 * scraper's strict reading of it accepts it, histogram buckets come ascending with `+Inf` last,
 * and a counter that can go down is typed gauge.
 */
import { Effect, Fiber, Metric, MetricBoundaries, RuntimeFlags, RuntimeFlagsPatch } from "effect"
import { describe, expect, it } from "vitest"
import {
  counter,
  exportAtZero,
  labelSets,
  prometheusText,
  renderPrometheus,
  taggedOnce
} from "../../src/http/metrics.js"
import { parsePrometheus } from "../support/prometheus.js"

describe("the metrics exposition", () => {
  it("orders a histogram's buckets ascending, +Inf last, and types a counter that goes down as gauge", async () => {
    const latency = Metric.histogram(
      "test_latency_seconds",
      MetricBoundaries.fromIterable([0.5, 10, 2.5, 0.001, 1]),
      "latency"
    )
    const requests = counter("test_requests_total", "requests")
    const active = Metric.counter("test_active", { description: "up and down" })
    const text = await Effect.runPromise(
      Effect.gen(function* () {
        for (const seconds of [0.0005, 0.7, 3, 20]) {
          yield* Metric.update(Metric.tagged(latency, "route", "/v1/b"), seconds)
          yield* Metric.update(Metric.tagged(latency, "route", "/v1/a"), seconds / 2)
        }
        yield* Metric.increment(Metric.tagged(requests, "code", "ok"))
        yield* Metric.incrementBy(active, 3)
        yield* Metric.incrementBy(active, -1)
        return renderPrometheus(yield* Metric.snapshot)
      })
    )
    const families = parsePrometheus(text)
    expect(families.get("test_latency_seconds")?.type).toBe("histogram")
    expect(families.get("test_requests_total")?.type).toBe("counter")
    expect(families.get("test_active")?.type).toBe("gauge")
    const buckets = (families.get("test_latency_seconds")?.samples ?? [])
      .filter((s) => s.name === "test_latency_seconds_bucket" && s.labels.route === "/v1/b")
      .map((s) => [s.labels.le, s.value])
    expect(buckets).toEqual([
      ["0.001", 1],
      ["0.5", 1],
      ["1", 2],
      ["2.5", 2],
      ["10", 3],
      ["+Inf", 4]
    ])
  })

  it("exports a series at 0 before its first event, with HELP and TYPE, and counts that event on it", async () => {
    const refusals = counter("test_refusals_total", "refusals by key and cause")
    const refusal = taggedOnce(refusals)
    const latency = Metric.histogram("test_wait_seconds", MetricBoundaries.fromIterable([0.1, 1]), "waits")
    const sets = labelSets({ key: ["id", "owner"], cause: ["cooldown", "budget"] })
    expect(sets).toEqual([
      { key: "id", cause: "cooldown" },
      { key: "id", cause: "budget" },
      { key: "owner", cause: "cooldown" },
      { key: "owner", cause: "budget" }
    ])
    await Effect.runPromise(exportAtZero([...sets.map((labels) => refusal(labels)), latency]))
    const before = await Effect.runPromise(Effect.map(Metric.snapshot, renderPrometheus))
    expect(before).toContain(
      "# HELP test_refusals_total refusals by key and cause\n# TYPE test_refusals_total counter\n"
    )
    expect(before).toMatch(/^test_refusals_total\{key="owner",cause="budget"\} 0$/m)
    expect(before).toMatch(/^test_wait_seconds_bucket\{le="\+Inf"\} 0$/m)
    expect(before).toMatch(/^test_wait_seconds_count 0$/m)
    // The recorder's first event lands on the series exported at start-up, not on a second one.
    await Effect.runPromise(Metric.increment(refusal({ key: "owner", cause: "budget" })))
    const after = parsePrometheus(await Effect.runPromise(Effect.map(Metric.snapshot, renderPrometheus)))
    const samples = after.get("test_refusals_total")?.samples ?? []
    expect(samples).toHaveLength(4)
    expect(samples.filter((s) => s.value === 1)).toEqual([
      { name: "test_refusals_total", labels: { key: "owner", cause: "budget" }, value: 1 }
    ])
  })

  it("the process's whole exposition reads, Effect's own fiber metrics included", async () => {
    // Fibers run under runtime metrics so that effect_fiber_active, a counter that goes down, exists.
    await Effect.runPromise(
      Effect.forkDaemon(Effect.void).pipe(
        Effect.flatMap(Fiber.join),
        Effect.withRuntimeFlagsPatch(RuntimeFlagsPatch.enable(RuntimeFlags.RuntimeMetrics))
      )
    )
    const families = parsePrometheus(await Effect.runPromise(prometheusText))
    expect(families.get("effect_fiber_active")?.type).toBe("gauge")
  })

  it("reports the process's memory and CPU time as read at each scrape", async () => {
    const first = parsePrometheus(await Effect.runPromise(prometheusText))
    const value = (families: typeof first, name: string) =>
      families.get(name)?.samples[0]?.value ?? Number.NaN
    const rss = value(first, "process_resident_memory_bytes")
    // The same figure the kernel has for this process, within what a scrape allocates.
    const kernelRss = process.memoryUsage().rss
    expect(first.get("process_resident_memory_bytes")?.type).toBe("gauge")
    expect(Math.abs(rss - kernelRss)).toBeLessThan(64 * 1024 * 1024)
    expect(value(first, "nodejs_heap_size_used_bytes")).toBeGreaterThan(0)
    expect(value(first, "nodejs_heap_size_used_bytes")).toBeLessThanOrEqual(
      value(first, "nodejs_heap_size_total_bytes")
    )
    expect(value(first, "nodejs_external_memory_bytes")).toBeGreaterThan(0)
    expect(first.get("process_cpu_seconds_total")?.type).toBe("counter")
    const cpuBefore = value(first, "process_cpu_seconds_total")
    expect(cpuBefore).toBeCloseTo((process.cpuUsage().user + process.cpuUsage().system) / 1e6, 0)
    // CPU spent between two scrapes shows up in the second.
    const until = process.cpuUsage().user + 50_000
    while (process.cpuUsage().user < until) JSON.stringify({ burn: Math.random() })
    const second = parsePrometheus(await Effect.runPromise(prometheusText))
    expect(value(second, "process_cpu_seconds_total")).toBeGreaterThanOrEqual(cpuBefore + 0.05)
  })

  it("the reader refuses what a scraper would refuse", () => {
    expect(() => parsePrometheus("x_total 1\n")).toThrow(/no # TYPE/)
    expect(() =>
      parsePrometheus('# TYPE h histogram\nh_bucket{le="+Inf"} 2\nh_bucket{le="1"} 1\nh_sum 3\nh_count 2\n')
    ).toThrow(/\+Inf is not the last|not ascending/)
  })
})
