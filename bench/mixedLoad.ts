/**
 * The soak's load generator (bench/soak.ts), a process of its own like bench/load.ts, started with
 * an IPC channel:
 *
 *   node --import tsx bench/mixedLoad.ts <plan.json>
 *
 * Until told `stop`, it sends reads at `ratePerSecond` (open loop: a slow answer does not slow the
 * next request), spread over the replicas in turn: quotes, config, health, `/v1/accounts` as
 * identity and gzip (with the last ETag as `If-None-Match` half the time), `/v1/tx-status` of
 * accepted claims, and malformed requests (bad JSON, a gzip-encoded body, an integer beyond 2^53)
 * that must be refused 4xx. Beside them, each funded owner claims in a loop, one claim at a time at
 * its vault nonce, signed as an outside client signs (test/support/directClaim.ts) to a recipient
 * of its own, with the fee of the last quote doubled. A claim whose answer is lost (no answer, a
 * timeout, 5xx) or whose nonce is held by another request (409 "being processed", "in flight") is
 * sent again identically, to either replica, as a client retries; 402 is signed again at a new
 * quote. On `burst`, every burst owner's one claim goes to `burstReplica` at once (the soak kills
 * that replica meanwhile). After `stop`, unresolved claims are retried for `finishMs` more; then
 * the record of every request and claim goes to `resultsFile` and the process says `done`.
 */
import { readFileSync, writeFileSync } from "node:fs"
import http from "node:http"
import { gzipSync } from "node:zlib"
import { type Hex, keccak256, toHex, zeroAddress } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { directClaimBody } from "../test/support/directClaim.js"
import {
  type ClaimRecord,
  type MixedLoadPlan,
  type MixedLoadResult,
  NO_ANSWER,
  type RequestRecord,
  ROUTES,
  TIMED_OUT
} from "./lib/mixedLoadRecords.js"

interface Answer {
  readonly status: number
  readonly text: string
  readonly etag?: string
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const MAX_IN_FLIGHT = 256
/** 5xx answers kept with their bodies (the soak reports those outside the faults). */
const MAX_SERVER_ERRORS = 5_000

const run = async (plan: MixedLoadPlan) => {
  const agents = plan.origins.map(() => new http.Agent({ keepAlive: true, maxSockets: 128 }))
  const urls = plan.origins.map((o) => new URL(o))
  const requests: RequestRecord[] = []
  const serverErrors: Array<MixedLoadResult["serverErrors"][number]> = []
  let inFlight = 0

  const send = (
    route: number,
    replica: number,
    options: { method: string; path: string; headers?: Record<string, string>; body?: Buffer | string }
  ): Promise<Answer & { start: number; end: number }> =>
    new Promise((resolve) => {
      const start = Date.now()
      inFlight++
      let settled = false
      const finish = (answer: Answer) => {
        if (settled) return
        settled = true
        inFlight--
        const end = Date.now()
        requests.push([route, replica, start, end - start, answer.status])
        const name = ROUTES[route]!
        if (answer.status >= 500 && serverErrors.length < MAX_SERVER_ERRORS) {
          serverErrors.push({
            route: name,
            replica,
            at: start,
            ms: end - start,
            status: answer.status,
            body: answer.text.slice(0, 300)
          })
        }
        resolve({ ...answer, start, end })
      }
      const body = options.body === undefined ? undefined : Buffer.from(options.body)
      const request = http.request(
        {
          host: urls[replica]!.hostname,
          port: urls[replica]!.port,
          method: options.method,
          path: options.path,
          agent: agents[replica],
          headers: {
            ...(body === undefined
              ? {}
              : { "content-type": "application/json", "content-length": body.length }),
            ...options.headers
          }
        },
        (response) => {
          const chunks: Buffer[] = []
          response.on("data", (chunk: Buffer) => chunks.push(chunk))
          response.on("end", () =>
            finish({
              status: response.statusCode ?? NO_ANSWER,
              // A gzip body is not read here; its size is what it costs.
              text:
                response.headers["content-encoding"] === "gzip" ? "" : Buffer.concat(chunks).toString("utf8"),
              ...(typeof response.headers.etag === "string" ? { etag: response.headers.etag } : {})
            })
          )
          response.on("error", () => finish({ status: NO_ANSWER, text: "" }))
        }
      )
      const timer = setTimeout(() => {
        finish({ status: TIMED_OUT, text: "" })
        request.destroy()
      }, plan.timeoutMs)
      request.on("close", () => clearTimeout(timer))
      request.on("error", () => finish({ status: NO_ANSWER, text: "" }))
      request.end(body)
    })

  // ---- what the reads learn: the fee to sign with, an ETag, hashes to ask about
  let fee: bigint | undefined
  let etag: string | undefined
  const hashes: Hex[] = []
  const quotePath = `/v1/quote?asset=${plan.asset}&adapter=${zeroAddress}`
  const quoteFee = async (replica: number): Promise<bigint | undefined> => {
    const answer = await send(0, replica, { method: "GET", path: quotePath })
    if (answer.status !== 200) return undefined
    try {
      fee = BigInt((JSON.parse(answer.text) as { relayerFee: string }).relayerFee)
    } catch {}
    return fee
  }

  // ---- claims
  const claims: ClaimRecord[] = []
  let stopped = false
  let finishBy = Number.POSITIVE_INFINITY
  let turn = 0
  const nextReplica = () => turn++ % plan.origins.length

  const sign = async (signer: ReturnType<typeof privateKeyToAccount>, claim: ClaimRecord) =>
    directClaimBody({
      signer,
      chainId: plan.chainId,
      vault: plan.vault,
      id: claim.id,
      asset: plan.asset,
      amount: BigInt(claim.amount),
      recipient: claim.recipient,
      relayer: plan.relayer,
      relayerFee: BigInt(claim.relayerFee),
      nonce: BigInt(claim.nonce),
      deadline: BigInt(Math.floor(Date.now() / 1000) + 3600)
    })

  /** One claim to its end: answered, refused, or out of time. The first attempt goes to `first`. */
  const settle = async (
    signer: ReturnType<typeof privateKeyToAccount>,
    claim: ClaimRecord,
    first: number
  ): Promise<void> => {
    let body = await sign(signer, claim)
    let replica = first
    for (;;) {
      if (Date.now() > finishBy) return
      const answer = await send(7, replica, { method: "POST", path: "/v1/claim", body })
      let parsed: { txHash?: Hex; code?: string; error?: string } = {}
      try {
        parsed = JSON.parse(answer.text) as typeof parsed
      } catch {}
      claim.attempts.push({
        replica,
        start: answer.start,
        end: answer.end,
        status: answer.status,
        ...(parsed.code === undefined ? {} : { code: parsed.code }),
        ...(parsed.error === undefined || answer.status < 400 ? {} : { message: parsed.error })
      })
      replica = (replica + 1) % plan.origins.length
      if (answer.status === 200 && parsed.txHash !== undefined) {
        claim.outcome = "accepted"
        claim.txHash = parsed.txHash
        hashes.push(parsed.txHash)
        return
      }
      if (answer.status === 409 && /is used/.test(parsed.error ?? "")) {
        claim.outcome = "used"
        return
      }
      if (answer.status === 402) {
        // The quote moved: signed again at the current one (the same nonce).
        const quoted = await quoteFee(replica)
        if (quoted !== undefined) {
          claim.relayerFee = String(quoted * 2n)
          body = await sign(signer, claim)
        }
        await sleep(500)
        continue
      }
      if (answer.status >= 400 && answer.status < 500 && answer.status !== 409 && answer.status !== 429) {
        claim.outcome = "refused"
        return
      }
      // No answer, 5xx, 409 held, 429: the same body again, as a client retries.
      await sleep(answer.status === 409 || answer.status === 429 ? 1_000 : 500)
    }
  }

  const newClaim = (id: Hex, nonce: bigint, burst: boolean): ClaimRecord => ({
    id,
    nonce: String(nonce),
    recipient: privateKeyToAccount(generatePrivateKey()).address,
    amount: plan.amount,
    relayerFee: String((fee ?? 0n) * 2n),
    burst,
    attempts: [],
    outcome: "unresolved"
  })

  const owner = async (key: Hex, id: Hex) => {
    const signer = privateKeyToAccount(key)
    let nonce = 0n
    // Owners start spread over their first pause.
    await sleep(Math.random() * plan.claimPauseMs[1])
    while (!stopped) {
      const claim = newClaim(id, nonce, false)
      claims.push(claim)
      await settle(signer, claim, Math.floor(Math.random() * plan.origins.length))
      // A used nonce is spent all the same.
      if (claim.outcome === "accepted" || claim.outcome === "used") nonce++
      if (claim.outcome === "unresolved") return
      // The next claim is signed at the account's nonce once this one is mined, as a client that
      // follows its transaction does (until then the relayer refuses it, 409).
      if (claim.txHash !== undefined) await mined(claim.txHash)
      const [low, high] = plan.claimPauseMs
      await sleep(low + Math.random() * (high - low))
    }
  }

  /** Asks `/v1/tx-status` each second until the transaction is no longer pending, at most 30 s. */
  const mined = async (txHash: Hex) => {
    const until = Date.now() + 30_000
    while (Date.now() < until) {
      await sleep(1_000)
      const answer = await send(6, nextReplica(), {
        method: "POST",
        path: "/v1/tx-status",
        body: JSON.stringify({ txHash })
      })
      if (answer.status === 200 && !answer.text.includes('"pending"')) return
    }
  }

  const bursts: Array<Promise<void>> = []
  const burst = (replica: number) => {
    for (const { key, id } of plan.burstOwners) {
      const claim = newClaim(id, 0n, true)
      claims.push(claim)
      bursts.push(settle(privateKeyToAccount(key), claim, replica))
    }
  }

  // ---- reads, open loop
  const unsafeInteger = (body: string) => body.replace(/"nonce":"\d+"/, '"nonce":90071992547409930001')
  const gzippedStatus = gzipSync(JSON.stringify({ txHash: keccak256(toHex("soak")) }))
  let skipped = 0
  let readCount = 0
  const read = (replica: number) => {
    const pick = readCount++ % 100
    if (pick < 30) return quoteFee(replica)
    if (pick < 45) return send(1, replica, { method: "GET", path: "/v1/config" })
    if (pick < 55) return send(2, replica, { method: "GET", path: "/v1/health" })
    if (pick < 60)
      return send(3, replica, {
        method: "GET",
        path: "/v1/accounts",
        headers: { "accept-encoding": "identity" }
      })
    if (pick < 80) {
      const conditional = pick >= 70 && etag !== undefined
      return send(conditional ? 5 : 4, replica, {
        method: "GET",
        path: "/v1/accounts",
        headers: { "accept-encoding": "gzip", ...(conditional ? { "if-none-match": etag! } : {}) }
      }).then((a) => {
        if (a.etag !== undefined) etag = a.etag
      })
    }
    if (pick < 95) {
      const txHash = hashes[Math.floor(Math.random() * hashes.length)] ?? keccak256(toHex(readCount))
      return send(6, replica, { method: "POST", path: "/v1/tx-status", body: JSON.stringify({ txHash }) })
    }
    if (pick < 97) return send(8, replica, { method: "POST", path: "/v1/claim", body: '{"claim":{"nonce":' })
    if (pick < 98)
      return send(9, replica, {
        method: "POST",
        path: "/v1/tx-status",
        headers: { "content-encoding": "gzip" },
        body: gzippedStatus
      })
    const sample = claims.find((c) => c.outcome === "accepted")
    return send(10, replica, {
      method: "POST",
      path: "/v1/claim",
      body: unsafeInteger(
        JSON.stringify({ claim: { beneficiaryId: sample?.id ?? zeroAddress, nonce: "1" }, signature: "0x" })
      )
    })
  }

  const started = Date.now()
  await quoteFee(0)
  const ownerLoops = plan.owners.map((o) => owner(o.key, o.id))
  let due = 0
  const pace = setInterval(() => {
    due += plan.ratePerSecond / 100
    while (due >= 1) {
      due -= 1
      if (inFlight >= MAX_IN_FLIGHT) skipped++
      else void read(nextReplica())
    }
  }, 10)
  const progress = setInterval(() => {
    const accepted = claims.filter((c) => c.outcome === "accepted").length
    process.stderr.write(
      `mixed load: ${Math.round((Date.now() - started) / 1000)} s, ${requests.length} answers, ${accepted}/${claims.length} claims accepted, ${inFlight} in flight\n`
    )
  }, 30_000)

  process.on("message", (message: { type: string; replica?: number }) => {
    if (message.type === "burst") burst(message.replica ?? 0)
    if (message.type === "stop") {
      stopped = true
      finishBy = Date.now() + plan.finishMs
      clearInterval(pace)
    }
  })
  while (!stopped) await sleep(100)
  const stoppedAt = Date.now()
  await Promise.all([...ownerLoops, ...bursts])
  // Reads still in flight at the stop are waited for (each is bounded by its timeout).
  while (inFlight > 0) await sleep(50)
  clearInterval(progress)
  for (const agent of agents) agent.destroy()
  const result: MixedLoadResult = { started, stopped: stoppedAt, requests, claims, serverErrors, skipped }
  writeFileSync(plan.resultsFile, JSON.stringify(result))
  process.send?.({ type: "done" })
  process.disconnect?.()
}

const planFile = process.argv[2]
if (planFile === undefined || process.send === undefined) {
  process.stderr.write(
    "usage: started by bench/soak.ts with an IPC channel: bench/mixedLoad.ts <plan.json>\n"
  )
  process.exit(2)
}
await run(JSON.parse(readFileSync(planFile, "utf8")) as MixedLoadPlan)
