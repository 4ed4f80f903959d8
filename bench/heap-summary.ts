/**
 * What a sampled heap profile (bench/heap-sampler.mjs, or any `.heapprofile`) allocated, by
 * function: self (allocated in the function itself) and inclusive (in it and what it called).
 *
 *   node --import tsx bench/heap-summary.ts <file.heapprofile> [pattern for the inclusive list]
 */
import { readFileSync } from "node:fs"

interface HeapNode {
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number }
  readonly selfSize: number
  readonly children: ReadonlyArray<HeapNode>
}

const [file, pattern] = process.argv.slice(2)
if (file === undefined) {
  process.stderr.write("usage: node --import tsx bench/heap-summary.ts <file.heapprofile> [pattern]\n")
  process.exit(2)
}
const { head } = JSON.parse(readFileSync(file, "utf8")) as { head: HeapNode }
const where = (f: HeapNode["callFrame"]) =>
  `${f.functionName || "(anonymous)"} ${f.url.replace(/^.*node_modules\//, "").replace(/^.*\/(src|bench)\//, "$1/")}:${f.lineNumber + 1}`

const self = new Map<string, number>()
const inclusive = new Map<string, number>()
let total = 0
const walk = (node: HeapNode, stack: ReadonlyArray<string>) => {
  const key = where(node.callFrame)
  total += node.selfSize
  self.set(key, (self.get(key) ?? 0) + node.selfSize)
  // A recursive function counts once per stack.
  for (const k of new Set([...stack, key])) inclusive.set(k, (inclusive.get(k) ?? 0) + node.selfSize)
  for (const child of node.children) walk(child, [...stack, key])
}
walk(head, [])

const mib = (bytes: number) => Math.round((bytes / 1048576) * 10) / 10
const top = (m: Map<string, number>, filter: RegExp) =>
  [...m]
    .filter(([k]) => filter.test(k))
    .sort((a, b) => b[1] - a[1])
    .slice(0, 30)
    .map(([where, bytes]) => ({ MiB: mib(bytes), where }))
console.log(`${mib(total)} MiB sampled`)
console.log("self")
console.table(top(self, /./))
console.log("inclusive")
console.table(top(inclusive, new RegExp(pattern ?? "src/|node_modules|@")))
