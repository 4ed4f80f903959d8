/**
 * Reading a `node --cpu-prof` profile: self time by function and by module group (logging,
 * metrics, rate limiter, middleware, schema, Node http, …), idle time left out. A frame in a
 * bundle (bench/lib/build.ts) is read through the bundle's source map as the module it came from.
 */
import { existsSync, readFileSync } from "node:fs"
import { SourceMap } from "node:module"
import { dirname, resolve } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

interface CallFrame {
  readonly functionName: string
  readonly url: string
  readonly lineNumber: number
  readonly columnNumber?: number
}
interface ProfileNode {
  readonly id: number
  readonly callFrame: CallFrame
  readonly children?: ReadonlyArray<number>
}
interface Profile {
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly startTime: number
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

/** Monotonic clock in µs, the profile's own clock (CLOCK_MONOTONIC on Linux). */
export const monotonicMicros = () => Number(process.hrtime.bigint() / 1000n)

/**
 * Module groups, first match wins; the pattern is tried on `url` then on `functionName`. A frame
 * read through a bundle's source map names a dependency's own source where it ships one (Effect's
 * `src/*.ts`), its `dist/esm` module otherwise.
 */
const GROUPS: ReadonlyArray<readonly [string, RegExp]> = [
  ["garbage collection", /^\(garbage collector\)$/],
  [
    "logging",
    /src\/logging\.ts|effect\/(dist\/esm|src)\/internal\/logger|effect\/(dist\/esm|src)\/Logger|node:internal\/console/
  ],
  [
    "metrics",
    /src\/http\/metrics\.ts|src\/[a-z]+\/metrics\.ts|effect\/(dist\/esm|src)\/internal\/metric|effect\/(dist\/esm|src)\/Metric/
  ],
  ["rate limiter", /src\/http\/rateLimit\.ts|src\/[a-z]+\/rateLimits\.ts/],
  [
    "service middleware (route, body guard, outcomes, render)",
    /src\/http\/(server|body|outcomes|routes|render|declare)\.ts/
  ],
  [
    "schema (effect/Schema, ParseResult)",
    /effect\/(dist\/esm|src)\/(Schema|ParseResult|SchemaAST|internal\/schema)/
  ],
  ["@effect/platform (router, HttpApi, request/response)", /@effect\/platform\/|find-my-way/],
  ["@effect/platform-node (server adapter)", /@effect\/platform-node/],
  ["effect runtime (fibers, context, layers)", /effect\/(dist\/esm|src)\//],
  [
    "Node http / net / streams",
    /^node:(_http|http|net|stream|internal\/(streams|http|net|stream_base|timers))/
  ],
  ["handlers and services (src/)", /^(?!.*node_modules).*\/src\//],
  ["viem and crypto", /viem|@noble|@scure|node:crypto|internal\/crypto/],
  ["other node internals", /^node:/],
  ["native / runtime", /^\((program|root)\)$|^$/]
]

export const groupOf = (frame: CallFrame): string => {
  for (const [name, pattern] of GROUPS)
    if (pattern.test(frame.url) || (frame.url === "" && pattern.test(frame.functionName))) return name
  return "other"
}

/** Groups that only run other code: their time is charged to the nearest caller outside them. */
const RUNNER_GROUPS = new Set([
  "effect runtime (fibers, context, layers)",
  "native / runtime",
  "other node internals"
])

export interface ProfileSummary {
  /** Sampled time, idle excluded, ms. */
  readonly busyMs: number
  readonly groups: ReadonlyArray<{ readonly group: string; readonly ms: number; readonly share: number }>
  /**
   * Each sample charged to the innermost frame on its stack outside the runners (Effect's fiber
   * loop, native code, Node's internals): a middleware written as Effects spends most of its time
   * in the fiber runtime's frames, which self time alone cannot tell apart.
   */
  readonly attributed: ReadonlyArray<{ readonly group: string; readonly ms: number; readonly share: number }>
  readonly functions: ReadonlyArray<{
    readonly fn: string
    readonly where: string
    readonly group: string
    readonly ms: number
    readonly share: number
  }>
}

const shortUrl = (url: string) =>
  url
    .replace(/^file:\/\/.*?\/node_modules\//, "")
    .replace(/^file:\/\/.*?\/(src|bench|schema|layers)\//, "$1/")
    .replace(/\/dist\/esm\//, "/")

/** Each bundle's source map (`<bundle>.js.map` beside it), or undefined for a file without one. */
const sourceMaps = new Map<string, { readonly map: SourceMap; readonly dir: string } | undefined>()

/** The frame as written in its source module, when it ran from a bundle with a source map. */
const original = (frame: CallFrame): CallFrame => {
  if (!frame.url.startsWith("file://") || frame.columnNumber === undefined) return frame
  let entry = sourceMaps.get(frame.url)
  if (!sourceMaps.has(frame.url)) {
    const file = `${fileURLToPath(frame.url)}.map`
    entry = existsSync(file)
      ? { map: new SourceMap(JSON.parse(readFileSync(file, "utf8"))), dir: dirname(file) }
      : undefined
    sourceMaps.set(frame.url, entry)
  }
  if (entry === undefined) return frame
  const found = entry.map.findEntry(frame.lineNumber, frame.columnNumber)
  if (!("originalSource" in found)) return frame
  return {
    functionName: frame.functionName,
    url: pathToFileURL(resolve(entry.dir, found.originalSource)).href,
    lineNumber: found.originalLine
  }
}

/** `window`: only samples taken between these `monotonicMicros` readings (the timed load). */
export const summarise = (
  file: string,
  window?: { readonly from: number; readonly to: number },
  top = 25
): ProfileSummary => {
  const profile = JSON.parse(readFileSync(file, "utf8")) as Profile
  const byId = new Map(profile.nodes.map((n) => [n.id, { ...n, callFrame: original(n.callFrame) }]))
  const parent = new Map<number, number>()
  for (const n of profile.nodes) for (const child of n.children ?? []) parent.set(child, n.id)
  const attributedGroup = (id: number) => {
    const leaf = groupOf(byId.get(id)!.callFrame)
    if (!RUNNER_GROUPS.has(leaf)) return leaf
    for (let at = parent.get(id); at !== undefined; at = parent.get(at)) {
      const group = groupOf(byId.get(at)!.callFrame)
      if (!RUNNER_GROUPS.has(group) && group !== "native / runtime") return group
    }
    return leaf
  }
  const attributed = new Map<string, number>()
  const self = new Map<number, number>()
  let at = profile.startTime
  profile.samples.forEach((id, i) => {
    const delta = profile.timeDeltas[i] ?? 0
    at += delta
    if (window !== undefined && (at < window.from || at > window.to)) return
    self.set(id, (self.get(id) ?? 0) + delta)
  })
  const groups = new Map<string, number>()
  const functions = new Map<string, { fn: string; where: string; group: string; us: number }>()
  let busy = 0
  for (const [id, us] of self) {
    const frame = byId.get(id)!.callFrame
    if (frame.functionName === "(idle)") continue
    busy += us
    const group = groupOf(frame)
    groups.set(group, (groups.get(group) ?? 0) + us)
    const charged = attributedGroup(id)
    attributed.set(charged, (attributed.get(charged) ?? 0) + us)
    const where = frame.url === "" ? "" : `${shortUrl(frame.url)}:${frame.lineNumber + 1}`
    const key = `${frame.functionName}@${where}`
    const entry = functions.get(key) ?? { fn: frame.functionName || "(anonymous)", where, group, us: 0 }
    entry.us += us
    functions.set(key, entry)
  }
  const share = (us: number) => Math.round((us / busy) * 1000) / 10
  return {
    busyMs: Math.round(busy / 1000),
    groups: [...groups]
      .sort((a, b) => b[1] - a[1])
      .map(([group, us]) => ({ group, ms: Math.round(us / 1000), share: share(us) })),
    attributed: [...attributed]
      .sort((a, b) => b[1] - a[1])
      .map(([group, us]) => ({ group, ms: Math.round(us / 1000), share: share(us) })),
    functions: [...functions.values()]
      .sort((a, b) => b.us - a.us)
      .slice(0, top)
      .map((f) => ({
        fn: f.fn,
        where: f.where,
        group: f.group,
        ms: Math.round(f.us / 1000),
        share: share(f.us)
      }))
  }
}

/** The summary as Markdown tables. */
export const markdown = (title: string, s: ProfileSummary, note: string) =>
  [
    `### ${title}`,
    "",
    note,
    "",
    `Busy (non-idle) sampled time: ${s.busyMs} ms.`,
    "",
    "| Group | self ms | share | charged to nearest caller, ms | share |",
    "|---|---:|---:|---:|---:|",
    ...s.groups.map((g) => {
      const charged = s.attributed.find((a) => a.group === g.group)
      return `| ${g.group} | ${g.ms} | ${g.share} % | ${charged?.ms ?? 0} | ${charged?.share ?? 0} % |`
    }),
    ...s.attributed
      .filter((a) => !s.groups.some((g) => g.group === a.group))
      .map((a) => `| ${a.group} | 0 | 0 % | ${a.ms} | ${a.share} % |`),
    "",
    "| Function | where | group | self ms | share |",
    "|---|---|---|---:|---:|",
    ...s.functions.map((f) => `| \`${f.fn}\` | ${f.where} | ${f.group} | ${f.ms} | ${f.share} % |`),
    ""
  ].join("\n")
