/**
 * Child processes of the benchmarks: the load generator, the services and the baseline servers,
 * each in a process of its own so that client and server never share an event loop, and so that
 * a server's memory is its own process's RSS.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, openSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import type { LoadPlan, LoadResult } from "../load.js"

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..")
const TSX = ["--import", "tsx"]

const scratch = mkdtempSync(join(tmpdir(), "bench-"))
let plans = 0

/** Runs the load generator (bench/load.ts) in its own process and returns its result. */
export const runLoad = async (plan: LoadPlan): Promise<LoadResult> => {
  const file = join(scratch, `plan-${process.pid}-${plans++}.json`)
  writeFileSync(file, JSON.stringify(plan))
  const child = spawn(process.execPath, [...TSX, join(ROOT, "bench", "load.ts"), file], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "inherit"]
  })
  let out = ""
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    out += chunk
  })
  const code = await new Promise<number | null>((resolve) => child.on("exit", resolve))
  if (code !== 0) throw new Error(`the load generator exited with ${code}`)
  return JSON.parse(out) as LoadResult
}

/**
 * Only what a process needs from this environment: a service must not pick up the bench's own
 * `DATABASE_URL` (or anything else) unless it is given explicitly.
 */
const baseEnv = (): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const name of ["PATH", "HOME", "TMPDIR", "LANG", "TZ"]) {
    const value = process.env[name]
    if (value !== undefined) env[name] = value
  }
  return env
}

export interface Server {
  readonly pid: number
  readonly url: string
  /** Resident set size now, and its peak so far (VmRSS, VmHWM), in bytes. */
  readonly memory: () => { rss: number; peak: number }
  /** CPU time used so far (user + system), in ms: a figure the machine's other load barely moves. */
  readonly cpuMs: () => number
  /** SIGTERM, then waits for the exit (so a `--cpu-prof` profile is written). */
  readonly stop: () => Promise<void>
  /** SIGKILL (`kill -9`: nothing of the process runs after it), then waits for the exit. */
  readonly kill: () => Promise<void>
  readonly output: () => string
}

export interface StartOptions {
  /** Script under the project root. */
  readonly script: string
  readonly env: Record<string, string>
  /** Where to ask whether it is up: a path answered with any status below 500. */
  readonly readyPath: string
  readonly port: number
  readonly nodeArgs?: ReadonlyArray<string>
  readonly startTimeoutMs?: number
  /** Plain node on a script bundled by bench/lib/build.ts instead of tsx on the source. */
  readonly bundled?: boolean
}

const live = new Set<ChildProcess>()
process.on("exit", () => {
  for (const child of live) child.kill("SIGKILL")
})

/** Reads VmRSS and VmHWM of a process from /proc (Linux). */
export const processMemory = (pid: number) => {
  const status = readFileSync(`/proc/${pid}/status`, "utf8")
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? 0)
  return { rss: kib("VmRSS") * 1024, peak: kib("VmHWM") * 1024 }
}

/** User plus system CPU time of a process from /proc (Linux), in ms. */
export const processCpuMs = (pid: number): number => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
  // Fields after the parenthesised command name; utime and stime are the 14th and 15th.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS
}

/** The process listening on a TCP port of this machine (Linux, /proc), if one can be read. */
export const pidListeningOn = (port: number): number | undefined => {
  const hexPort = `:${port.toString(16).toUpperCase().padStart(4, "0")}`
  const inodes = new Set<string>()
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text = ""
    try {
      text = readFileSync(table, "utf8")
    } catch {
      continue
    }
    for (const line of text.split("\n").slice(1)) {
      const f = line.trim().split(/\s+/)
      // local address, state 0A (LISTEN), inode
      if (f[1]?.endsWith(hexPort) && f[3] === "0A" && f[9] !== undefined) inodes.add(f[9])
    }
  }
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      for (const fd of readdirSync(`/proc/${pid}/fd`)) {
        const target = readlinkSync(`/proc/${pid}/fd/${fd}`)
        const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1]
        if (inode !== undefined && inodes.has(inode)) return Number(pid)
      }
    } catch {}
  }
  return undefined
}

/** `getconf CLK_TCK` on Linux. */
const CLOCK_TICKS = 100

let servers = 0

/**
 * Starts a server script with exactly `env` (plus PATH and HOME) and waits until it answers. Its
 * stdout (the access log, at the services' default level) goes to /dev/null: the formatting and
 * the write are paid as in production, without a reader slowing the pipe. BENCH_SERVICE_LOGS=dir
 * keeps each server's stdout in a file there instead.
 */
export const startServer = async (options: StartOptions): Promise<Server> => {
  const logs = process.env.BENCH_SERVICE_LOGS
  const stdout =
    logs === undefined
      ? "ignore"
      : openSync(join(logs, `${process.pid}-${servers++}-${options.script.replace(/\W+/g, "_")}.log`), "w")
  const loader = options.bundled === true ? [] : TSX
  const child = spawn(
    process.execPath,
    [...loader, ...(options.nodeArgs ?? []), join(ROOT, options.script)],
    {
      cwd: ROOT,
      env: { ...baseEnv(), ...options.env },
      stdio: ["ignore", stdout, "pipe"]
    }
  )
  live.add(child)
  let stderr = ""
  child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
    stderr = (stderr + chunk).slice(-20_000)
  })
  let exited: number | null | undefined
  const exit = new Promise<void>((resolve) =>
    child.on("exit", (code) => {
      exited = code
      live.delete(child)
      resolve()
    })
  )
  const url = `http://127.0.0.1:${options.port}`
  let hung = 0
  const deadline = Date.now() + (options.startTimeoutMs ?? 120_000)
  for (;;) {
    if (exited !== undefined) throw new Error(`${options.script} exited with ${exited}: ${stderr}`)
    if (Date.now() > deadline) {
      child.kill("SIGKILL")
      throw new Error(`${options.script} did not answer in time: ${stderr}`)
    }
    // Each try is bounded: a connection accepted while the service is still starting may never
    // be answered.
    const ok = await fetch(`${url}${options.readyPath}`, { signal: AbortSignal.timeout(3_000) })
      .then(async (r) => {
        await r.arrayBuffer()
        return r.status < 500
      })
      .catch((error: unknown) => {
        if (error instanceof Error && error.name === "TimeoutError") hung += 1
        return false
      })
    if (ok) break
    await sleep(100)
  }
  if (hung > 0) console.warn(`${options.script}: ${hung} request(s) during start-up went unanswered for 3 s`)
  return {
    pid: child.pid!,
    url,
    memory: () => processMemory(child.pid!),
    cpuMs: () => processCpuMs(child.pid!),
    stop: async () => {
      if (exited === undefined) child.kill("SIGTERM")
      const timer = setTimeout(() => child.kill("SIGKILL"), 15_000)
      await exit
      clearTimeout(timer)
    },
    kill: async () => {
      if (exited === undefined) child.kill("SIGKILL")
      await exit
    },
    output: () => stderr
  }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

export const mib = (bytes: number) => Math.round((bytes / 1024 / 1024) * 10) / 10

/** The median item by `key` (the upper one of an even count): one whole run, not a mix of runs. */
export const medianBy = <A>(items: ReadonlyArray<A>, key: (item: A) => number): A => {
  if (items.length === 0) throw new Error("the median of nothing")
  return [...items].sort((a, b) => key(a) - key(b))[Math.floor(items.length / 2)] as A
}

/** A scratch file for a server that serves fixed bytes. */
export const scratchFile = (name: string, contents: string | Buffer) => {
  const file = join(scratch, name)
  writeFileSync(file, contents)
  return file
}

/**
 * CPU time the whole machine spent busy so far (user, nice, system, irq, softirq of every core;
 * idle, I/O wait and time stolen by the hypervisor left out), from /proc/stat, in ms.
 */
export const machineBusyMs = (): number => {
  const line = readFileSync("/proc/stat", "utf8").split("\n")[0]!
  const [user, nice, system, , , irq, softirq] = line.trim().split(/\s+/).slice(1).map(Number)
  return (((user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0)) * 1000) / CLOCK_TICKS
}

/** CPU time so far of every process whose command name is `name` (e.g. `postgres`), in ms. */
export const commandCpuMs = (name: string): number => {
  let total = 0
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8")
      if (stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")) === name)
        total += processCpuMs(Number(entry))
    } catch {
      // The process ended between the listing and the read.
    }
  }
  return total
}
