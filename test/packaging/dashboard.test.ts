/**
 * The Grafana dashboard and the Prometheus scrape configuration name only metrics the services
 * declare, so a renamed metric cannot leave a panel silently empty.
 */
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { repoRoot } from "../support/process.js"

const sourceFiles = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return sourceFiles(path)
    return entry.name.endsWith(".ts") ? [path] : []
  })

/** Every series name the services can expose: declared counters and gauges, histograms' series. */
const declaredSeries = (): Set<string> => {
  const names = new Set<string>()
  const declaration =
    /\b(counter|Metric\.counter|Metric\.gauge|Metric\.histogram)\(\s*"([a-zA-Z_:][a-zA-Z0-9_:]*)"/g
  for (const file of sourceFiles(join(repoRoot, "src"))) {
    for (const [, kind, name] of readFileSync(file, "utf8").matchAll(declaration)) {
      if (name === undefined) continue
      if (kind === "Metric.histogram")
        for (const suffix of ["_bucket", "_sum", "_count"]) names.add(`${name}${suffix}`)
      else names.add(name)
    }
  }
  return names
}

const promqlWords = new Set([
  "by",
  "without",
  "on",
  "ignoring",
  "group_left",
  "group_right",
  "bool",
  "and",
  "or",
  "unless",
  "offset"
])

/** The metric names in a PromQL expression: what is left once labels, ranges and functions are out. */
const metricsOf = (expr: string): Array<string> =>
  [
    ...expr
      .replace(/"(?:[^"\\]|\\.)*"/g, "")
      .replace(/\{[^}]*\}/g, "")
      .replace(/\[[^\]]*\]/g, "")
      .replace(/\b(?:by|without|on|ignoring)\s*\([^)]*\)/g, "")
      .matchAll(/\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()/g)
  ]
    .map(([, name]) => name ?? "")
    .filter((name) => !promqlWords.has(name) && !/^\d/.test(name))

interface Panel {
  readonly title?: string
  readonly targets?: ReadonlyArray<{ readonly expr?: string }>
  readonly panels?: ReadonlyArray<Panel>
}

const dashboardExprs = (): Array<{ title: string; expr: string }> => {
  const dashboard = JSON.parse(
    readFileSync(join(repoRoot, "deploy/grafana/dashboards/fee-vault-services.json"), "utf8")
  ) as { panels: ReadonlyArray<Panel> }
  const walk = (panels: ReadonlyArray<Panel>): Array<{ title: string; expr: string }> =>
    panels.flatMap((panel) => [
      ...(panel.targets ?? []).flatMap((t) =>
        t.expr === undefined ? [] : [{ title: panel.title ?? "", expr: t.expr }]
      ),
      ...walk(panel.panels ?? [])
    ])
  return walk(dashboard.panels)
}

describe("monitoring configuration", () => {
  const declared = declaredSeries()

  it("finds the services' metric declarations", () => {
    expect(declared).toContain("http_requests_total")
    expect(declared).toContain("http_request_duration_seconds_bucket")
    expect(declared).toContain("relayer_tx_pending")
    expect(declared).toContain("indexer_lag_blocks")
  })

  it("graphs only declared metrics, each panel at least one", () => {
    const exprs = dashboardExprs()
    expect(exprs.length).toBeGreaterThan(0)
    const unknown = exprs.flatMap(({ title, expr }) => {
      const metrics = metricsOf(expr)
      if (metrics.length === 0) return [`${title}: no metric in ${expr}`]
      return metrics.filter((name) => !declared.has(name)).map((name) => `${title}: ${name}`)
    })
    expect(unknown).toEqual([])
  })

  it("graphs the metrics that matter", () => {
    const graphed = new Set(dashboardExprs().flatMap(({ expr }) => metricsOf(expr)))
    for (const name of [
      "http_requests_total",
      "relayer_claims_total",
      "relayer_actions_total",
      "attestor_commitments_total",
      "attestor_logins_total",
      "attestor_binds_total",
      "attestor_lookup_payments_total",
      "relayer_quotes_total",
      "relayer_price_source_failures_total",
      "relayer_tx_pending",
      "relayer_tx_replacements_total",
      "relayer_hot_key_balance_wei",
      "indexer_lag_blocks"
    ])
      expect(graphed, name).toContain(name)
  })

  it("scrapes both services' /v1/metrics with the bearer token", () => {
    const config = readFileSync(join(repoRoot, "deploy/prometheus.yml"), "utf8")
    expect(config.match(/metrics_path: \/v1\/metrics/g)).toHaveLength(2)
    expect(config.match(/credentials_file: \/run\/secrets\/metrics_token/g)).toHaveLength(2)
    expect(config).toContain('targets: ["relayer:8080"]')
    expect(config).toContain('targets: ["attestor:8081"]')
  })
})
