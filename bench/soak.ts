/**
 * Soak under faults: two relayer replicas sharing one PostgreSQL database and one hot key take
 * mixed requests for BENCH_SOAK_MS (default five minutes) while one fault of each kind is
 * injected in turn, each in its own window with time to recover before the next:
 *
 *   1. `kill -9` of replica A mid-load, restarted over the same database;
 *   2. `kill -9` of replica B during a burst of claims sent to it (so it holds the hot key's lock,
 *      or has transactions stored and not yet sent, as best it can be timed), restarted;
 *   3. PostgreSQL unreachable: a TCP proxy between the replicas and the database resets every
 *      connection and refuses new ones (the machine's server keeps running);
 *   4. the chain RPC blackholed: a TCP proxy in front of anvil accepts and never answers;
 *   5. replica B's SEND_RPC_URL hung: a proxy of its own in front of anvil that never answers.
 *
 *   DATABASE_URL=postgres://… node --import tsx bench/soak.ts
 *
 * Settings (environment): BENCH_SOAK_MS (300000; a shorter run keeps every fault, in shorter
 * windows, bench/lib/soakWindows.ts), BENCH_SOAK_RATE (reads per second, 100), BENCH_SOAK_OWNERS
 * (owners claiming in a loop, 16), BENCH_SOAK_BURST (claims of fault 2, 24), BENCH_DATABASE_URL or
 * DATABASE_URL (required: a schema of its own there, dropped afterwards).
 *
 * The load generator (bench/mixedLoad.ts) is a process of its own; the replicas run bundled, as
 * the other benches run the relayer (bench/lib/devnet.ts), with the devnet's settings and the
 * operators' defaults for the lock, RPC deadlines and circuit; anvil mines a block a second. The
 * report: answers by status per route, split into those whose request overlapped a fault's window
 * (plus a recovery margin) and the others; p50/p99 per route outside and during faults; RSS of
 * every replica process (at start, its peak, at its end, sampled each second); the claims by
 * outcome. After the load, once the hot key has nothing pending (bounded), the chain is read: each
 * owner's vault nonce moved by exactly the claims it was answered 200 for, each such claim's
 * recipient was paid once, and the hot key sent one successful transaction per executed claim.
 *
 * Goals (rows of bench/results.json): 0 5xx outside the faults' windows; every claim answered
 * 200 mined exactly once. The bench exits non-zero when either fails.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createPublicClient, type Hex, keccak256, toHex, http as viemHttp, zeroAddress } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { feeVaultAbi, testTokenAbi } from "../contracts/abi.js"
import { devnetAccount, devnetClients } from "../contracts/deploy.js"
import { devnetKeys } from "../layers/devnet.js"
import { computeId, ownerCommitment } from "../schema/ids.js"
import { freshPostgresSchema } from "../test/support/postgresSchema.js"
import { ensureBuild } from "./lib/build.js"
import { freePort, liftedRelayerLimits, startDevnet, startRelayer } from "./lib/devnet.js"
import {
  type MixedLoadPlan,
  type MixedLoadResult,
  NO_ANSWER,
  ROUTES,
  TIMED_OUT
} from "./lib/mixedLoadRecords.js"
import { mib, ROOT, type Server, sleep } from "./lib/processes.js"
import { call } from "./lib/proxy.js"
import { record, row } from "./lib/results.js"
import { FAULTS, type Fault, faultOf, quantile, timetable, type Window } from "./lib/soakWindows.js"
import { startTcpProxy } from "./lib/tcpProxy.js"

const TOTAL_MS = Math.max(30_000, Number(process.env.BENCH_SOAK_MS ?? 300_000))
const RATE = Math.max(1, Number(process.env.BENCH_SOAK_RATE ?? 100))
const OWNERS = Math.max(1, Number(process.env.BENCH_SOAK_OWNERS ?? 16))
const BURST = Math.max(1, Number(process.env.BENCH_SOAK_BURST ?? 24))
/** Fault 2: how long after the burst's first requests replica B is killed. */
const BURST_KILL_AFTER_MS = 300
/**
 * After the load, how long unresolved claims are retried (past the two-minute TTL of a nonce
 * reservation nothing was stored for), and how long mining may take.
 */
const FINISH_MS = 150_000
const MINE_WAIT_MS = 120_000
const AMOUNT = 10n * 10n ** 18n
/** Claims one owner may make in the run, funded up front. */
const CLAIMS_PER_OWNER = 150n

const databaseUrl = process.env.BENCH_DATABASE_URL ?? process.env.DATABASE_URL
if (databaseUrl === undefined) {
  console.error("the soak runs its replicas on PostgreSQL: set DATABASE_URL (or BENCH_DATABASE_URL)")
  process.exit(1)
}

ensureBuild()
const plan = timetable(TOTAL_MS)
const bench = "bench/soak.ts"
const hotKey = privateKeyToAccount(devnetKeys.relayer).address
const scratch = mkdtempSync(join(tmpdir(), "bench-soak-"))

const statusName = (status: number) =>
  status === NO_ANSWER ? "no answer" : status === TIMED_OUT ? "timeout" : String(status)
const count = (into: Record<string, number>, key: string) => {
  into[key] = (into[key] ?? 0) + 1
}

const devnet = await startDevnet("soak")
const schema = await freshPostgresSchema(databaseUrl, "bench_soak")
const database = new URL(databaseUrl)
const pgProxy = await startTcpProxy({ host: database.hostname, port: Number(database.port || 5432) })
const anvilTarget = { host: "127.0.0.1", port: devnet.chain.anvil.port }
const rpcProxy = await startTcpProxy(anvilTarget)
const sendProxy = await startTcpProxy(anvilTarget)
let load: ChildProcess | undefined
const replicas: Array<{
  readonly name: string
  readonly env: Record<string, string>
  server: Server | undefined
}> = []
try {
  const rpcUrl = devnet.chain.anvil.rpcUrl
  const vault = devnet.chain.deployment.vault
  const asset = devnet.chain.deployment.settlementAsset
  const reader = createPublicClient({ transport: viemHttp(rpcUrl) })

  // ---- owners, registered and funded straight on anvil
  const ownerOf = () => {
    const key = generatePrivateKey()
    const address = privateKeyToAccount(key).address
    const salt = keccak256(toHex(address))
    return { key, address, salt, id: computeId(1, ownerCommitment(address, salt), zeroAddress, 0n) }
  }
  const owners = Array.from({ length: OWNERS }, ownerOf)
  const burstOwners = Array.from({ length: BURST }, ownerOf)
  const admin = devnetAccount(0)
  const { walletClient } = await devnetClients(rpcUrl, admin)
  let adminNonce = await reader.getTransactionCount({ address: admin.address, blockTag: "pending" })
  const setup: Hex[] = []
  const write = async (request: Record<string, unknown>) =>
    setup.push(await walletClient.writeContract({ ...request, nonce: adminNonce++ } as never))
  const total = AMOUNT * (CLAIMS_PER_OWNER * BigInt(OWNERS) + BigInt(BURST))
  await write({ address: asset, abi: testTokenAbi, functionName: "mint", args: [admin.address, total] })
  await write({ address: asset, abi: testTokenAbi, functionName: "approve", args: [vault, total] })
  for (const [i, o] of [...owners, ...burstOwners].entries()) {
    await write({
      address: vault,
      abi: feeVaultAbi,
      functionName: "registerOwner",
      args: [o.address, o.salt, zeroAddress, 0n]
    })
    const amount = i < OWNERS ? AMOUNT * CLAIMS_PER_OWNER : AMOUNT
    await write({ address: vault, abi: feeVaultAbi, functionName: "deposit", args: [o.id, asset, amount] })
  }
  for (const hash of setup) {
    const receipt = await reader.waitForTransactionReceipt({ hash })
    if (receipt.status !== "success") throw new Error(`setup transaction reverted: ${hash}`)
  }

  // ---- two replicas, one database (through the proxy) and one hot key
  const viaProxy = new URL(schema.url)
  viaProxy.hostname = pgProxy.host
  viaProxy.port = String(pgProxy.port)
  const proxied = (proxy: { host: string; port: number }) => `http://${proxy.host}:${proxy.port}`
  const portB = await freePort()
  replicas.push(
    {
      name: "A",
      env: {
        ...liftedRelayerLimits,
        PORT: String(devnet.relayerPort),
        RPC_URL: proxied(rpcProxy),
        DATA_DIR: join(scratch, "A")
      },
      server: undefined
    },
    {
      name: "B",
      env: {
        ...liftedRelayerLimits,
        PORT: String(portB),
        RPC_URL: proxied(rpcProxy),
        SEND_RPC_URL: proxied(sendProxy),
        DATA_DIR: join(scratch, "B")
      },
      server: undefined
    }
  )

  // RSS of every replica process, each second: at its start, its peak, at its end.
  const incarnations: Array<{
    replica: string
    pid: number
    ended: string
    samples: number
    rss: { start: number; max: number; end: number }
  }> = []
  const start = async (i: number) => {
    const replica = replicas[i]!
    replica.server = await startRelayer(devnet, replica.env, {
      bundled: true,
      sharedDatabaseUrl: viaProxy.toString()
    })
    const rss = replica.server.memory().rss
    incarnations.push({
      replica: replica.name,
      pid: replica.server.pid,
      ended: "running",
      samples: 1,
      rss: { start: rss, max: rss, end: rss }
    })
  }
  const sample = () => {
    for (const replica of replicas) {
      const incarnation = incarnations.findLast((c) => c.pid === replica.server?.pid)
      if (incarnation === undefined || incarnation.ended !== "running") continue
      try {
        const { rss } = replica.server!.memory()
        // A killed process not yet reaped has no VmRSS.
        if (rss === 0) continue
        incarnation.samples++
        incarnation.rss.max = Math.max(incarnation.rss.max, rss)
        incarnation.rss.end = rss
      } catch {}
    }
  }
  const killAndRestart = async (i: number) => {
    const replica = replicas[i]!
    const pid = replica.server!.pid
    sample()
    await replica.server!.kill()
    incarnations.findLast((c) => c.pid === pid)!.ended = "kill -9"
    await start(i)
  }
  await start(0)
  await start(1)
  const sampler = setInterval(sample, 1_000)

  await call(rpcUrl, "evm_setAutomine", [false])
  await call(rpcUrl, "evm_setIntervalMining", [1])
  const firstBlock = await reader.getBlockNumber()
  const hotKeyNonceBefore = await reader.getTransactionCount({ address: hotKey, blockTag: "latest" })

  // ---- the load, and the faults in turn
  const resultsFile = join(scratch, "mixed-load.json")
  const loadPlan: MixedLoadPlan = {
    origins: replicas.map((r) => `http://127.0.0.1:${r.env.PORT}`),
    ratePerSecond: RATE,
    chainId: devnet.chain.deployment.chainId,
    vault,
    asset,
    relayer: hotKey,
    amount: String(AMOUNT),
    owners: owners.map((o) => ({ key: o.key, id: o.id })),
    burstOwners: burstOwners.map((o) => ({ key: o.key, id: o.id })),
    claimPauseMs: [2_000, 8_000],
    timeoutMs: 30_000,
    finishMs: FINISH_MS,
    resultsFile
  }
  const planFile = join(scratch, "mixed-load-plan.json")
  writeFileSync(planFile, JSON.stringify(loadPlan))
  const child = spawn(process.execPath, ["--import", "tsx", join(ROOT, "bench", "mixedLoad.ts"), planFile], {
    cwd: ROOT,
    stdio: ["ignore", "inherit", "inherit", "ipc"]
  })
  load = child
  const done = new Promise<void>((resolve, reject) => {
    child.on("message", (m: { type?: string }) => m.type === "done" && resolve())
    child.on("exit", (code) =>
      code === 0 ? resolve() : reject(new Error(`the load generator exited with ${code}`))
    )
  })

  const t0 = Date.now()
  const until = async (ms: number) => {
    const wait = t0 + ms - Date.now()
    if (wait > 0) await sleep(wait)
  }
  console.log(
    `soak: ${TOTAL_MS / 1000} s, ${RATE} reads/s, ${OWNERS} owners claiming, faults ${plan.faultMs / 1000} s each every ${plan.slotMs / 1000} s (answers within ${plan.marginMs / 1000} s after a window count as the fault's)`
  )
  const windows: Window[] = []
  let earliest = 0
  for (const [i, fault] of FAULTS.entries()) {
    await until(Math.max(plan.startsMs[i]!, earliest))
    const began = Date.now()
    switch (fault) {
      case "kill -9 of a replica mid-load":
        await killAndRestart(0)
        break
      case "kill -9 of a replica during a claim burst":
        child.send({ type: "burst", replica: 1 })
        await sleep(BURST_KILL_AFTER_MS)
        await killAndRestart(1)
        break
      case "PostgreSQL unreachable":
        pgProxy.mode = "refuse"
        await sleep(plan.faultMs)
        pgProxy.mode = "pass"
        break
      case "chain RPC blackholed":
        rpcProxy.mode = "blackhole"
        await sleep(plan.faultMs)
        rpcProxy.mode = "pass"
        break
      case "one replica's send RPC hung":
        sendProxy.mode = "blackhole"
        await sleep(plan.faultMs)
        sendProxy.mode = "pass"
        break
    }
    const window = { fault, start: began, end: Date.now() }
    windows.push(window)
    console.log(`fault ${i + 1}, ${fault}: ${((window.end - window.start) / 1000).toFixed(1)} s`)
    // The next fault waits for this one's recovery margin to pass, and a little more.
    earliest = window.end - t0 + plan.marginMs + 2_000
  }
  await until(Math.max(TOTAL_MS, earliest))
  child.send({ type: "stop" })
  await done
  clearInterval(sampler)
  sample()
  const result = JSON.parse(readFileSync(resultsFile, "utf8")) as MixedLoadResult

  // ---- answers by route, outside and during the faults
  const classify = (start: number, end: number) => faultOf(windows, plan.marginMs, start, end)
  type Side = { statuses: Record<string, number>; latencies: number[] }
  const routes = new Map<string, { outside: Side; during: Side }>()
  const byFault = new Map<Fault, Record<string, number>>()
  for (const [route, replica, begun, ms, status] of result.requests) {
    const name = ROUTES[route]!
    const entry = routes.get(name) ?? {
      outside: { statuses: {}, latencies: [] },
      during: { statuses: {}, latencies: [] }
    }
    routes.set(name, entry)
    const fault = classify(begun, begun + ms)
    const side = fault === undefined ? entry.outside : entry.during
    count(side.statuses, statusName(status))
    if (status > 0) side.latencies.push(ms)
    if (fault !== undefined) {
      const tally = byFault.get(fault) ?? {}
      byFault.set(fault, tally)
      count(tally, `${name} → ${statusName(status)} (${replicas[replica]!.name})`)
    }
  }
  const latency = (side: Side) => {
    const sorted = side.latencies.sort((a, b) => a - b)
    return { p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99) }
  }
  const routeTable = [...routes].map(([route, { outside, during }]) => ({
    route,
    outside: outside.statuses,
    during: during.statuses,
    outsideP50Ms: latency(outside).p50,
    outsideP99Ms: latency(outside).p99,
    duringP50Ms: latency(during).p50,
    duringP99Ms: latency(during).p99
  }))
  const sum = (statuses: Record<string, number>, pick: (status: string) => boolean) =>
    Object.entries(statuses)
      .filter(([s]) => pick(s))
      .reduce((a, [, n]) => a + n, 0)
  const is5xx = (s: string) => /^5\d\d$/.test(s)
  const serverErrorsOutside = routeTable.reduce((a, r) => a + sum(r.outside, is5xx), 0)
  const unansweredOutside = routeTable.reduce(
    (a, r) => a + sum(r.outside, (s) => s === "no answer" || s === "timeout"),
    0
  )
  const malformedNot4xx = routeTable
    .filter((r) => r.route.startsWith("malformed"))
    .reduce((a, r) => a + sum(r.outside, (s) => !/^4\d\d$/.test(s)), 0)
  const serverErrorsOutsideBodies = result.serverErrors.filter(
    (e) => classify(e.at, e.at + e.ms) === undefined
  )

  // ---- claims
  const claims = result.claims
  const outcomes: Record<string, number> = {}
  for (const c of claims) count(outcomes, c.outcome)
  const refusals: Record<string, number> = {}
  for (const c of claims)
    if (c.outcome === "refused") {
      const last = c.attempts.at(-1)
      count(refusals, `${last?.status} ${last?.code}: ${last?.message}`)
    }
  const attempts = { outside: {} as Record<string, number>, during: {} as Record<string, number> }
  const held409: Record<string, number> = {}
  for (const c of claims)
    for (const a of c.attempts) {
      const fault = classify(a.start, a.end)
      count(fault === undefined ? attempts.outside : attempts.during, statusName(a.status))
      if (a.status === 409)
        count(held409, `${fault === undefined ? "outside" : "during"}: ${a.message?.replace(/\d{3,}/g, "…")}`)
    }
  const burst = claims.filter((c) => c.burst)
  const burstOutcomes: Record<string, number> = {}
  for (const c of burst) count(burstOutcomes, c.outcome)
  const burstAttempts: Record<string, number> = {}
  for (const c of burst)
    for (const a of c.attempts) count(burstAttempts, `${replicas[a.replica]!.name} ${statusName(a.status)}`)

  // ---- the chain: wait for the hot key to have nothing pending, then read
  const executedOf = (id: Hex) =>
    claims.filter((c) => c.id === id && (c.outcome === "accepted" || c.outcome === "used")).length
  const allOwners = [...owners, ...burstOwners]
  const vaultNonce = (id: Hex) =>
    reader.readContract({ address: vault, abi: feeVaultAbi, functionName: "nonces", args: [id] })
  const settled = async () => {
    const [latest, pending] = await Promise.all([
      reader.getTransactionCount({ address: hotKey, blockTag: "latest" }),
      reader.getTransactionCount({ address: hotKey, blockTag: "pending" })
    ])
    if (latest !== pending) return false
    for (const o of allOwners) if ((await vaultNonce(o.id)) < BigInt(executedOf(o.id))) return false
    return true
  }
  const mineStarted = Date.now()
  while (!(await settled()) && Date.now() - mineStarted < MINE_WAIT_MS) await sleep(1_000)
  // A straggler the monitor re-broadcasts late would show as a mismatch below.
  await sleep(3_000)
  const mineWaitMs = Date.now() - mineStarted

  const ownerMismatches: Array<{ id: Hex; expected: number; onChain: string }> = []
  for (const o of allOwners) {
    const onChain = await vaultNonce(o.id)
    if (onChain !== BigInt(executedOf(o.id)))
      ownerMismatches.push({ id: o.id, expected: executedOf(o.id), onChain: String(onChain) })
  }
  const accepted = claims.filter((c) => c.outcome === "accepted")
  const mismatched = new Set(ownerMismatches.map((m) => m.id))
  let paidOnce = 0
  let minedOnce = 0
  const notPaidOnce: Array<{ id: Hex; nonce: string; recipient: Hex; balance: string; expected: string }> = []
  for (const c of accepted) {
    const balance = await reader.readContract({
      address: asset,
      abi: testTokenAbi,
      functionName: "balanceOf",
      args: [c.recipient]
    })
    const expected = BigInt(c.amount) - BigInt(c.relayerFee)
    if (balance === expected) {
      paidOnce++
      if (!mismatched.has(c.id)) minedOnce++
    } else
      notPaidOnce.push({
        id: c.id,
        nonce: c.nonce,
        recipient: c.recipient,
        balance: String(balance),
        expected: String(expected)
      })
  }
  // Every transaction of the hot key since the load began, and how each ended.
  const lastBlock = await reader.getBlockNumber()
  const hotKeyTxs: Hex[] = []
  for (let n = firstBlock + 1n; n <= lastBlock; n++) {
    const block = await reader.getBlock({ blockNumber: n, includeTransactions: true })
    for (const tx of block.transactions)
      if (tx.from.toLowerCase() === hotKey.toLowerCase()) hotKeyTxs.push(tx.hash)
  }
  let reverted = 0
  for (const hash of hotKeyTxs)
    if ((await reader.getTransactionReceipt({ hash })).status !== "success") reverted++
  const hotKeyNonceAfter = await reader.getTransactionCount({ address: hotKey, blockTag: "latest" })
  const hotKeyPending = await reader.getTransactionCount({ address: hotKey, blockTag: "pending" })
  const executed = claims.filter((c) => c.outcome === "accepted" || c.outcome === "used").length
  const minedUnderAnsweredHash = (
    await Promise.all(
      accepted.map((c) =>
        reader
          .getTransactionReceipt({ hash: c.txHash! })
          .then(() => 1)
          .catch(() => 0)
      )
    )
  ).reduce<number>((a, b) => a + b, 0)
  const hotKey_ = {
    nonceMoved: hotKeyNonceAfter - hotKeyNonceBefore,
    transactions: hotKeyTxs.length,
    reverted,
    pendingLeft: hotKeyPending - hotKeyNonceAfter,
    executedClaims: executed
  }
  const hotKeyConsistent =
    hotKey_.nonceMoved === executed &&
    hotKey_.transactions === executed &&
    reverted === 0 &&
    hotKey_.pendingLeft === 0

  // ---- report
  console.log("\nanswers by route (outside the faults | during a fault or its recovery margin), latency ms")
  console.table(
    routeTable.map((r) => ({
      route: r.route,
      outside: Object.entries(r.outside)
        .map(([s, n]) => `${s}:${n}`)
        .join(" "),
      "p50 / p99": `${r.outsideP50Ms} / ${r.outsideP99Ms}`,
      during: Object.entries(r.during)
        .map(([s, n]) => `${s}:${n}`)
        .join(" "),
      "p50 / p99 (during)": `${r.duringP50Ms} / ${r.duringP99Ms}`
    }))
  )
  console.log("faults:")
  console.table(
    windows.map((w) => ({
      fault: w.fault,
      "at s": ((w.start - t0) / 1000).toFixed(1),
      "lasted s": ((w.end - w.start) / 1000).toFixed(1)
    }))
  )
  for (const [fault, tally] of byFault) console.log(`  ${fault}: ${JSON.stringify(tally)}`)
  console.log("relayer processes, RSS MiB:")
  console.table(
    incarnations.map((c) => ({
      replica: c.replica,
      pid: c.pid,
      ended: c.ended,
      samples: c.samples,
      start: mib(c.rss.start),
      max: mib(c.rss.max),
      end: mib(c.rss.end)
    }))
  )
  console.log(
    `claims: ${JSON.stringify(outcomes)}; attempts outside ${JSON.stringify(attempts.outside)}, during ${JSON.stringify(attempts.during)}`
  )
  console.log(`burst claims: ${JSON.stringify(burstOutcomes)}; attempts ${JSON.stringify(burstAttempts)}`)
  if (Object.keys(refusals).length > 0) console.log(`refused claims: ${JSON.stringify(refusals)}`)
  if (Object.keys(held409).length > 0) console.log(`409 answers to claims: ${JSON.stringify(held409)}`)
  console.log(
    `chain (after ${(mineWaitMs / 1000).toFixed(0)} s): ${paidOnce}/${accepted.length} claims answered 200 paid once, ${minedUnderAnsweredHash} mined under the hash answered, ${ownerMismatches.length} owners whose nonce moved otherwise; hot key ${JSON.stringify(hotKey_)}`
  )
  if (serverErrorsOutsideBodies.length > 0)
    console.log(`5xx outside the faults: ${JSON.stringify(serverErrorsOutsideBodies, null, 2)}`)
  if (notPaidOnce.length > 0) console.log(`not paid once: ${JSON.stringify(notPaidOnce.slice(0, 20))}`)
  if (ownerMismatches.length > 0) console.log(`owner nonces: ${JSON.stringify(ownerMismatches.slice(0, 20))}`)

  const rss = incarnations.map((c) => ({
    replica: c.replica,
    ended: c.ended,
    startMiB: mib(c.rss.start),
    maxMiB: mib(c.rss.max),
    endMiB: mib(c.rss.end)
  }))
  const common = {
    database: "PostgreSQL, through a TCP proxy",
    replicas: 2,
    durationMs: TOTAL_MS,
    readsPerSecond: RATE,
    owners: OWNERS,
    burst: BURST,
    windowMarginMs: plan.marginMs,
    faults: windows.map((w) => ({
      fault: w.fault,
      atMs: w.start - t0,
      lastedMs: w.end - w.start,
      answers: byFault.get(w.fault) ?? {}
    }))
  }
  const answers = result.requests.length
  const outsideAnswers = routeTable.reduce((a, r) => a + sum(r.outside, () => true), 0)
  record({
    soak_5xx_outside_faults: row(bench, {
      measure: "soak under faults: 5xx answers outside the faults' windows",
      value: serverErrorsOutside,
      unit: "answers",
      baseline: outsideAnswers,
      baselineLabel: "answers outside the faults",
      ratio: null,
      goal: "0 5xx outside faults",
      note: `${answers} answers over ${TOTAL_MS / 1000} s, two replicas on one database and hot key; ${unansweredOutside} unanswered and ${malformedNot4xx} malformed requests not refused 4xx outside the faults; RSS MiB per replica process (start/max/end): ${rss.map((r) => `${r.replica} ${r.startMiB}/${r.maxMiB}/${r.endMiB}`).join(", ")}`,
      details: {
        ...common,
        routes: routeTable,
        unansweredOutside,
        malformedNot4xxOutside: malformedNot4xx,
        skippedReads: result.skipped,
        serverErrorsOutside: serverErrorsOutsideBodies,
        rss
      }
    }),
    soak_claims_mined_once: row(bench, {
      measure: "soak under faults: claims answered 200, mined exactly once",
      value: minedOnce,
      unit: "claims",
      baseline: accepted.length,
      baselineLabel: "claims answered 200",
      goal: "every 200'd claim mined once",
      note: `claims ${JSON.stringify(outcomes)}; claim attempts answered during faults ${JSON.stringify(attempts.during)}; hot key: ${hotKey_.transactions} transactions for ${executed} executed claims, ${reverted} reverted, nonce moved ${hotKey_.nonceMoved}, ${hotKey_.pendingLeft} left pending${hotKeyConsistent ? "" : " (inconsistent)"}; RSS MiB per replica process (start/max/end): ${rss.map((r) => `${r.replica} ${r.startMiB}/${r.maxMiB}/${r.endMiB}`).join(", ")}`,
      details: {
        ...common,
        outcomes,
        attempts,
        refusals,
        answers409: held409,
        burst: { outcomes: burstOutcomes, attempts: burstAttempts },
        chain: {
          paidOnce,
          minedUnderAnsweredHash,
          ownerMismatches,
          notPaidOnce: notPaidOnce.slice(0, 50),
          hotKey: hotKey_,
          mineWaitMs
        }
      }
    })
  })
  const failed = [
    ...(serverErrorsOutside > 0 ? [`${serverErrorsOutside} 5xx outside the faults`] : []),
    ...(malformedNot4xx > 0 ? [`${malformedNot4xx} malformed requests not refused 4xx`] : []),
    ...(minedOnce !== accepted.length
      ? [`${accepted.length - minedOnce} claims answered 200 not mined once`]
      : []),
    ...(ownerMismatches.length > 0 ? [`${ownerMismatches.length} owners' nonces moved otherwise`] : []),
    ...(!hotKeyConsistent
      ? [`the hot key's transactions do not match the claims: ${JSON.stringify(hotKey_)}`]
      : [])
  ]
  if (failed.length > 0) {
    console.log(`soak failed: ${failed.join("; ")}`)
    process.exitCode = 1
  }
} finally {
  if (load !== undefined && load.exitCode === null) load.kill("SIGKILL")
  for (const replica of replicas) await replica.server?.stop().catch(() => {})
  await schema.drop().catch((error: unknown) => console.warn(`dropping the soak's schema: ${String(error)}`))
  await pgProxy.close()
  await rpcProxy.close()
  await sendProxy.close()
  await devnet.close()
}
