/**
 * Every counter and histogram a service records is on `GET /v1/metrics` from its start, at 0
 * (docs/operations.md "Metrics reference"), so that `rate()`, `increase()` and alerts see the first
 * event. Each service runs as its own process, as an operator runs it, so its exposition holds only
 * what that service registers; it is read before any other request. The expected metrics are the
 * declarations in src/, by the directory that declares them: a metric declared and not registered
 * fails here.
 */
import { readdirSync, readFileSync } from "node:fs"
import { join, relative } from "node:path"
import { Effect, Exit, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  attestorEnv,
  autoVetoEnv,
  DEVNET_METRICS_TOKEN,
  devnetFacilitator,
  devnetStandIns,
  fedsocialEnv,
  freeLoopbackPort,
  paidLookupEnv,
  relayerEnv,
  standInEnv,
  writeDevnetFile
} from "../../layers/devnet.js"
import { repoRoot, type ServiceProcess, startService } from "../support/process.js"
import { type Family, parsePrometheus } from "../support/prometheus.js"
import { VaultDevnet } from "./support/relayerDevnet.js"

// Two Node processes with embedded databases: slow on a busy machine.
const PROCESS_TIMEOUT = 180_000

type Service = "relayer" | "attestor"

/** Which services record the metrics a directory of src/ declares. */
const servicesOf: Readonly<Record<string, ReadonlyArray<Service>>> = {
  http: ["relayer", "attestor"],
  chain: ["relayer", "attestor"],
  indexer: ["relayer", "attestor"],
  // The attestor runs a sender with AUTO_VETO, as here.
  txsender: ["relayer", "attestor"],
  relayer: ["relayer"],
  attestor: ["attestor"]
}

const sourceFiles = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? sourceFiles(join(dir, entry.name))
      : entry.name.endsWith(".ts")
        ? [join(dir, entry.name)]
        : []
  )

/** `counter("name", …)`, `Metric.counter("name", …)` and `Metric.histogram("name", …)` in src/. */
const DECLARATION = /(?:\bcounter|Metric\.histogram)\(\s*"([a-z_:][a-z0-9_:]*)"/g

/** Every counter and histogram declared in src/, with the services that record it. */
const declaredMetrics = (): Map<string, ReadonlyArray<Service>> => {
  const src = join(repoRoot, "src")
  const declared = new Map<string, ReadonlyArray<Service>>()
  for (const file of sourceFiles(src)) {
    const text = readFileSync(file, "utf8")
    const directory = relative(src, file).split("/")[0] ?? ""
    for (const [, name] of text.matchAll(DECLARATION)) {
      const services = servicesOf[directory]
      if (name === undefined) continue
      if (services === undefined) throw new Error(`${name} is declared in src/${directory}, no service's`)
      declared.set(name, services)
    }
  }
  return declared
}

/**
 * Counters the start-up's own work moves before the first read: the CPU time, the chain reads of
 * the indexer, sender, fee oracle and hint index (their series by operation), the indexer's first
 * batches over the devnet's blocks.
 */
const movedByStartUp = new Set([
  "process_cpu_seconds_total",
  "chain_rpc_requests_total",
  "indexer_batches_total",
  "indexer_events_total"
])

const running: Array<ServiceProcess> = []
let net: VaultDevnet
/** The stand-ins' and the facilitator's. */
let scope: Scope.CloseableScope | undefined
const scrapes: Partial<Record<Service, { text: string; families: ReadonlyMap<string, Family> }>> = {}

/** The service's first `/v1/metrics`: its first request. */
const scrape = async (service: ServiceProcess) => {
  const res = await fetch(`${await service.url()}/v1/metrics`, {
    headers: { authorization: `Bearer ${DEVNET_METRICS_TOKEN}` }
  })
  expect(res.status).toBe(200)
  const text = await res.text()
  return { text, families: parsePrometheus(text) }
}

beforeAll(async () => {
  net = await VaultDevnet.start("metrics-at-zero")
  const chain = net.chain
  scope = await Effect.runPromise(Scope.make())
  // The attestor with everything that adds metrics: OAuth and fedsocial logins (messenger's from
  // the devnet's settings), paid lookups, AUTO_VETO.
  const { attestorPort, relayerPort, standIns, facilitator } = await Effect.runPromise(
    Effect.gen(function* () {
      const attestorPort = yield* freeLoopbackPort
      const relayerPort = yield* freeLoopbackPort
      const standIns = yield* devnetStandIns(`http://127.0.0.1:${attestorPort}`)
      const facilitator = yield* devnetFacilitator(chain)
      yield* writeDevnetFile(chain, {
        relayerUrl: `http://127.0.0.1:${relayerPort}`,
        attestorUrl: `http://127.0.0.1:${attestorPort}`,
        facilitatorUrl: facilitator.url
      })
      return { attestorPort, relayerPort, standIns, facilitator }
    }).pipe(Scope.extend(scope))
  )
  const attestor = startService("attestor", {
    ...attestorEnv(chain, attestorPort),
    ...standInEnv(standIns, `http://127.0.0.1:${attestorPort}`),
    ...fedsocialEnv(chain),
    ...paidLookupEnv(chain, facilitator.url),
    ...autoVetoEnv
  })
  running.push(attestor)
  const relayer = startService("relayer", { ...relayerEnv(chain, relayerPort) })
  running.push(relayer)
  scrapes.attestor = await scrape(attestor)
  scrapes.relayer = await scrape(relayer)
}, PROCESS_TIMEOUT)

afterAll(async () => {
  await Promise.all(running.map((service) => service.stop()))
  if (scope !== undefined) await Effect.runPromise(Scope.close(scope, Exit.void))
  await net?.dispose()
})

/** The value of the sample `name{labels}` (labels in order), or undefined when the exposition lacks it. */
const sampleOf = (families: ReadonlyMap<string, Family>, name: string, labels: object = {}) =>
  [...families.values()]
    .flatMap((family) => family.samples)
    .find(
      (s) =>
        s.name === name && JSON.stringify(Object.entries(s.labels)) === JSON.stringify(Object.entries(labels))
    )?.value

describe.each(["relayer", "attestor"] as const)("the %s's metrics at start-up", (service) => {
  const read = () => {
    const scraped = scrapes[service]
    if (scraped === undefined) throw new Error(`the ${service} was not scraped`)
    return scraped
  }

  it("list every counter and histogram it records, with # HELP and # TYPE, each series at 0", () => {
    const { text, families } = read()
    const declared = [...declaredMetrics()]
    const ours = declared.filter(([, services]) => services.includes(service)).map(([name]) => name)
    const missing = ours.filter((name) => !families.has(name))
    expect(missing).toEqual([])
    for (const name of ours) {
      expect(["counter", "histogram"]).toContain(families.get(name)?.type)
      expect(text).toContain(`# HELP ${name} `)
      expect(families.get(name)?.samples.length).toBeGreaterThan(0)
    }
    const moved = ours
      .filter((name) => !movedByStartUp.has(name))
      .flatMap((name) => families.get(name)?.samples ?? [])
      .filter((sample) => sample.value !== 0)
      .map((sample) => `${sample.name}${JSON.stringify(sample.labels)} ${sample.value}`)
    expect(moved).toEqual([])
    // Nothing of the other service's.
    const theirs = declared.filter(([, services]) => !services.includes(service)).map(([name]) => name)
    expect(theirs.filter((name) => families.has(name))).toEqual([])
  })
})

describe("series with their known labels", () => {
  it("the relayer's: outcomes, causes, keys, sender classes, routes; front-run claims", () => {
    const { text, families } = scrapes.relayer ?? { text: "", families: new Map() }
    expect(text).toMatch(/^relayer_claims_frontrun_total 0$/m)
    // Labelled by operation as requests are made; the start-up series has no labels.
    expect(text).toMatch(/^chain_rpc_requests_total 0$/m)
    expect(sampleOf(families, "relayer_claims_total", { code: "ok" })).toBe(0)
    expect(sampleOf(families, "relayer_actions_total", { action: "propose-bind", code: "ok" })).toBe(0)
    expect(
      sampleOf(families, "relayer_onchain_reverts_total", { action: "claim", cause: "nonce_taken" })
    ).toBe(0)
    for (const key of ["id", "owner"])
      expect(sampleOf(families, "relayer_bind_budget_refusals_total", { key })).toBe(0)
    expect(
      sampleOf(families, "relayer_tx_sends_total", { service: "relayer", outcome: "insufficient_funds" })
    ).toBe(0)
    expect(sampleOf(families, "relayer_tx_settled_total", { service: "relayer", outcome: "success" })).toBe(0)
    expect(sampleOf(families, "rate_limited_total", { scope: "id" })).toBe(0)
    expect(sampleOf(families, "relayer_quotes_total", { action: "claim" })).toBe(0)
    expect(
      sampleOf(families, "http_request_duration_seconds_count", { route: "/v1/claim", method: "POST" })
    ).toBe(0)
  })

  it("the attestor's: logins by offered platform, payments, verdicts, vetoes, its sender", () => {
    const { families } = scrapes.attestor ?? { families: new Map() }
    for (const platform of ["messenger", "microblog", "fedsocial"])
      expect(sampleOf(families, "attestor_logins_total", { platform, outcome: "ok" })).toBe(0)
    expect(sampleOf(families, "attestor_oauth_starts_total", { platform: "codehost", outcome: "ok" })).toBe(0)
    expect(sampleOf(families, "attestor_lookup_payments_total", { outcome: "indeterminate" })).toBe(0)
    expect(sampleOf(families, "attestor_bind_proposals_total", { verdict: "unattested" })).toBe(0)
    expect(sampleOf(families, "attestor_vetoes_total", { outcome: "underfunded" })).toBe(0)
    expect(sampleOf(families, "attestor_hints_rejected_total", { reason: "mismatch" })).toBe(0)
    expect(sampleOf(families, "relayer_tx_sends_total", { service: "attestor", outcome: "accepted" })).toBe(0)
    expect(sampleOf(families, "http_requests_total", { route: "/v1/commitment", method: "POST" })).toBe(0)
  })
})
