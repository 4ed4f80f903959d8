/**
 * The hot key's lock lost while held (PostgreSQL only, when DATABASE_URL is set): the session
 * that holds the advisory lock is killed (`pg_terminate_backend`, as an idle timeout or a proxy
 * would end it) in the middle of a submission batch. Another replica then takes the lock and
 * sends; the first one must not broadcast anything after the loss. The same in the middle of a
 * monitor round that bumps stuck transactions. Each replica has a node of its own that counts
 * what it was sent.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Cause, Deferred, Duration, Effect, Exit, Layer, Option } from "effect"
import { type Hex, parseGwei } from "viem"
import { generatePrivateKey } from "viem/accounts"
import { ChainClient } from "../../src/chain/ChainClient.js"
import { makeMockChainClient } from "../../src/chain/MockChainClient.js"
import { prometheusText } from "../../src/http/metrics.js"
import { localSigner } from "../../src/keys/Signer.js"
import { scopedKey } from "../../src/store/advisoryLock.js"
import { migrate } from "../../src/store/migrations.js"
import { makeSenderCore } from "../../src/txsender/core.js"
import { advisoryKey, LockLost, makeKeyLock } from "../../src/txsender/lock.js"
import { makeMonitor } from "../../src/txsender/monitor.js"
import { type Job, makeSubmitBatch } from "../../src/txsender/submit.js"
import type { TxRequest, TxSubmitError } from "../../src/txsender/TxSenderShape.js"
import { testDatabases } from "../support/database.js"

const FEES = { maxFeePerGas: parseGwei("2"), maxPriorityFeePerGas: parseGwei("1") }

const request = (i: number): TxRequest => ({
  to: `0x${(0x5100 + i).toString(16).padStart(40, "0")}`,
  data: "0x1234",
  gas: 60_000n
})

/** A node that accepts everything and counts it; `beforeSend` runs before each broadcast lands. */
const countingNode = () => {
  const node = {
    sent: [] as Array<Hex>,
    beforeSend: (): Effect.Effect<void> => Effect.void,
    /** The key's nonce at the latest block and in the pool. */
    latest: 0,
    pending: 0
  }
  const layer = Layer.succeed(
    ChainClient,
    makeMockChainClient({
      chainId: Effect.succeed(31337),
      getTransactionCount: (_, tag) => Effect.sync(() => (tag === "pending" ? node.pending : node.latest)),
      getBalance: () => Effect.succeed(10n ** 18n),
      getTransactionReceipt: () => Effect.succeed(Option.none()),
      call: () => Effect.succeed("0x" as Hex),
      estimateFeesPerGas: Effect.succeed(FEES),
      sendRawTransaction: (raw) =>
        Effect.suspend(() => node.beforeSend()).pipe(
          Effect.zipRight(
            Effect.sync(() => {
              node.sent.push(raw)
              return "0x" as Hex
            })
          )
        )
    })
  )
  return { node, layer }
}

/** One replica's sender parts: its own node and semaphore, the key and database shared. */
const replicaParts = (privateKey: Hex, key: string, chain: Layer.Layer<ChainClient>) =>
  Effect.gen(function* () {
    const core = yield* makeSenderCore({
      signer: localSigner(privateKey),
      chainId: Option.some(31337),
      maxFeePerGas: parseGwei("100"),
      service: "relayer"
    }).pipe(Effect.provide(chain))
    const withLock = yield* makeKeyLock({
      key,
      timeout: Duration.seconds(5),
      embedded: false,
      semaphore: Effect.unsafeMakeSemaphore(1),
      onLost: core.metrics.recordLockLost
    })
    return { core, withLock }
  })

/** Kills the session holding the advisory lock of `key`, as an idle timeout or a proxy would. */
const killHolder = (sql: SqlClient, key: string) =>
  Effect.gen(function* () {
    const pids = yield* holderPids(sql, key)
    expect(pids).toHaveLength(1)
    yield* sql`SELECT pg_terminate_backend(${pids[0]!})`
  }).pipe(Effect.orDie)

/** The sessions that hold the advisory lock of `key`, by process id. */
const holderPids = (sql: SqlClient, key: string) =>
  Effect.flatMap(scopedKey(sql, key), (scoped) => {
    const unsigned = BigInt.asUintN(64, BigInt(scoped))
    return sql<{ readonly pid: number }>`
      SELECT pid FROM pg_locks
      WHERE locktype = 'advisory' AND granted AND objsubid = 1
        AND classid = ${(unsigned >> 32n).toString()}::oid AND objid = ${(unsigned & 0xffffffffn).toString()}::oid`
  }).pipe(Effect.map((rows) => rows.map((row) => row.pid)))

/** `relayer_tx_lock_lost_total` of the relayer's sender, as exported. */
const locksLost = Effect.map(prometheusText, (text) => {
  const line = /^relayer_tx_lock_lost_total\{service="relayer"\} (\d+)$/m.exec(text)
  return line === null ? 0 : Number(line[1])
})

const postgres = testDatabases().find((d) => d.name === "postgresql")

describe.skipIf(postgres === undefined)("the hot key's lock lost while held", () => {
  const storage = Layer.effectDiscard(migrate).pipe(
    Layer.provideMerge((postgres ?? testDatabases()[0]!).layer)
  )

  // A live clock: the second replica polls for the lock until the server has let it go.
  it.live(
    "a sender whose lock session was killed broadcasts nothing more; the replica that took it sends",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient
        const privateKey = generatePrivateKey()
        const key = advisoryKey(`lock-lost-test:${Math.random()}`)
        /** One replica: its own node, its own semaphore, the same key and database. */
        const replica = (chain: Layer.Layer<ChainClient>) =>
          Effect.map(replicaParts(privateKey, key, chain), ({ core, withLock }) =>
            makeSubmitBatch(core, withLock)
          )
        const jobsOf = (requests: ReadonlyArray<TxRequest>) =>
          Effect.forEach(requests, (r) =>
            Effect.map(Deferred.make<Hex, TxSubmitError>(), (done): Job => ({ request: r, done }))
          )

        const first = countingNode()
        const second = countingNode()
        const submitFirst = yield* replica(first.layer)
        const submitSecond = yield* replica(second.layer)
        const secondJobs = yield* jobsOf([request(9)])
        const lostBefore = yield* locksLost

        // On the first replica's first broadcast: its lock session dies, and the second replica
        // takes the lock as soon as the server has let it go, and sends its own request.
        let killed = false
        first.node.beforeSend = () =>
          Effect.gen(function* () {
            if (killed) return
            killed = true
            yield* killHolder(sql, key)
            yield* submitSecond(secondJobs)
          })

        const firstJobs = yield* jobsOf([request(1), request(2), request(3)])
        yield* submitFirst(firstJobs)

        // The second replica held the lock and sent; the first sent only what it sent before
        // the loss.
        expect(killed).toBe(true)
        expect(second.node.sent).toHaveLength(1)
        expect(Exit.isSuccess(yield* Deferred.await(secondJobs[0]!.done).pipe(Effect.exit))).toBe(true)
        expect(first.node.sent).toHaveLength(1)
        // Its requests are stored, so each caller has its hash; whoever holds the lock sends them.
        for (const job of firstJobs)
          expect(Exit.isSuccess(yield* Effect.exit(Deferred.await(job.done)))).toBe(true)
        expect(yield* locksLost).toBe(lostBefore + 1)
      }).pipe(Effect.provide(storage), Effect.scoped),
    60_000
  )

  it.live(
    "a monitor whose lock session was killed during its round sends no further replacement",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient
        const privateKey = generatePrivateKey()
        const key = advisoryKey(`lock-lost-test:${Math.random()}`)
        const first = countingNode()
        const { core, withLock } = yield* replicaParts(privateKey, key, first.layer)
        // Three requests stored at nonces 0..2, held by the node, unmined and due for a bump.
        const s = yield* core.sender
        for (let i = 0; i < 3; i++) {
          const payload = { ...request(i), value: 0n }
          const attempt = yield* core.sign(s, payload, BigInt(i), FEES, "original")
          yield* core.store.insert(s, [{ purpose: "request", payload, attempt }])
        }
        first.node.pending = 3
        let killed = false
        first.node.beforeSend = () =>
          Effect.suspend(() => {
            if (killed) return Effect.void
            killed = true
            return killHolder(sql, key)
          })
        const monitor = makeMonitor(core, withLock, {
          replaceAfterMs: 0,
          maxReplacements: 5,
          confirmations: 12
        })
        const round = yield* Effect.exit(monitor.tick)
        expect(killed).toBe(true)
        expect(Exit.isFailure(round) && Cause.squash(round.cause)).toBeInstanceOf(LockLost)
        // The first bump went out before the loss; the other two did not.
        expect(first.node.sent).toHaveLength(1)
      }).pipe(Effect.provide(storage), Effect.scoped),
    60_000
  )
})
