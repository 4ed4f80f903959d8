/**
 * A strict reader of the Prometheus text format 0.0.4, as a scraper would read `/v1/metrics`:
 * every sample belongs to a family declared by `# TYPE` before it, names and labels are well formed,
 * values are numbers, no series appears twice, and each histogram series has its buckets in
 * ascending `le` order ending with `+Inf`, never decreasing, with `+Inf` equal to `_count`.
 * Throws on the first violation; returns the families with their samples.
 */
export interface Sample {
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly value: number
}

export interface Family {
  readonly type: "counter" | "gauge" | "histogram" | "summary" | "untyped"
  readonly samples: Array<Sample>
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/
const LABEL = /^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\\\|\\"|\\n)*)"(?:,|$)/

const parseValue = (text: string): number => {
  if (text === "+Inf") return Number.POSITIVE_INFINITY
  if (text === "-Inf") return Number.NEGATIVE_INFINITY
  if (text === "NaN") return Number.NaN
  if (!/^-?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+)$/.test(text)) throw new Error(`not a number: ${text}`)
  return Number(text)
}

const parseLabels = (text: string): Record<string, string> => {
  const labels: Record<string, string> = {}
  let rest = text
  while (rest.length > 0) {
    const match = LABEL.exec(rest)
    if (match === null) throw new Error(`malformed labels: {${text}}`)
    const [all, key, value] = match
    if (key === undefined || value === undefined || all === undefined)
      throw new Error(`malformed labels: {${text}}`)
    if (key in labels) throw new Error(`label ${key} twice in {${text}}`)
    labels[key] = value
    rest = rest.slice(all.length)
  }
  return labels
}

const familyOf = (sample: string, families: ReadonlyMap<string, Family>): string | undefined => {
  if (families.has(sample)) return sample
  for (const suffix of ["_bucket", "_sum", "_count"])
    if (sample.endsWith(suffix) && families.has(sample.slice(0, -suffix.length)))
      return sample.slice(0, -suffix.length)
  return undefined
}

export const parsePrometheus = (text: string): ReadonlyMap<string, Family> => {
  if (!text.endsWith("\n")) throw new Error("the exposition does not end with a newline")
  const families = new Map<string, Family>()
  const seen = new Set<string>()
  for (const line of text.slice(0, -1).split("\n")) {
    if (line.startsWith("# HELP ")) continue
    if (line.startsWith("# TYPE ")) {
      const [name, type] = line.slice("# TYPE ".length).split(" ")
      if (name === undefined || !NAME.test(name)) throw new Error(`bad TYPE line: ${line}`)
      if (!["counter", "gauge", "histogram", "summary", "untyped"].includes(type ?? ""))
        throw new Error(`unknown type in: ${line}`)
      if (families.has(name)) throw new Error(`${name} declared twice`)
      families.set(name, { type: type as Family["type"], samples: [] })
      continue
    }
    if (line.startsWith("#") || line.trim() === "")
      throw new Error(`unexpected line: ${JSON.stringify(line)}`)
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (match === null) throw new Error(`malformed sample: ${line}`)
    const [, name = "", labelText = "", valueText = ""] = match
    const family = familyOf(name, families)
    if (family === undefined) throw new Error(`${name} has no # TYPE before it`)
    if (seen.has(`${name}{${labelText}}`)) throw new Error(`series twice: ${line}`)
    seen.add(`${name}{${labelText}}`)
    families.get(family)?.samples.push({ name, labels: parseLabels(labelText), value: parseValue(valueText) })
  }
  for (const [name, family] of families) {
    if (family.type !== "histogram") continue
    const bySeries = new Map<string, Array<Sample>>()
    for (const sample of family.samples) {
      const { le: _, ...rest } = sample.labels
      const key = JSON.stringify(Object.entries(rest).sort())
      bySeries.set(key, [...(bySeries.get(key) ?? []), sample])
    }
    for (const [key, samples] of bySeries) {
      const buckets = samples.filter((s) => s.name === `${name}_bucket`)
      const bounds = buckets.map((b) => parseValue(b.labels.le ?? ""))
      if (bounds.at(-1) !== Number.POSITIVE_INFINITY)
        throw new Error(`${name}${key}: +Inf is not the last bucket`)
      for (let i = 1; i < buckets.length; i++) {
        if (!((bounds[i] ?? 0) > (bounds[i - 1] ?? 0)))
          throw new Error(`${name}${key}: buckets not ascending`)
        if ((buckets[i]?.value ?? 0) < (buckets[i - 1]?.value ?? 0))
          throw new Error(`${name}${key}: counts decrease`)
      }
      const count = samples.find((s) => s.name === `${name}_count`)
      if (count === undefined || count.value !== buckets.at(-1)?.value)
        throw new Error(`${name}${key}: _count differs from the +Inf bucket`)
    }
  }
  return families
}
