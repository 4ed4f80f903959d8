/**
 * Allocation sampling for a service process, garbage included: preload it, and the process
 * writes what it allocated since start (by call stack) when it receives SIGUSR2.
 *
 *   BENCH_RELAYER_NODE_ARGS="--import ./bench/heap-sampler.mjs" node --import tsx bench/<bench>.ts
 *   kill -USR2 <pid>            # writes <HEAP_SAMPLE_DIR or the temp dir>/heap-<pid>.heapprofile
 *   node --import tsx bench/heap-summary.ts <file>
 *
 * Unlike `node --heap-prof`, which keeps only what is still alive when the profile is taken, this
 * keeps the allocations the garbage collector has freed since: a start-up's garbage is what sets
 * its peak RSS. Plain JavaScript, so compiled services (plain node) can preload it too.
 */
import { writeFileSync } from "node:fs"
import { Session } from "node:inspector/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"

const session = new Session()
session.connect()
await session.post("HeapProfiler.enable")
await session.post("HeapProfiler.startSampling", {
  samplingInterval: 65_536,
  includeObjectsCollectedByMajorGC: true,
  includeObjectsCollectedByMinorGC: true
})
process.on("SIGUSR2", async () => {
  const { profile } = await session.post("HeapProfiler.stopSampling")
  const file = join(process.env.HEAP_SAMPLE_DIR ?? tmpdir(), `heap-${process.pid}.heapprofile`)
  writeFileSync(file, JSON.stringify(profile))
  process.stderr.write(`heap sample written to ${file}\n`)
})
