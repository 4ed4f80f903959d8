/**
 * Advisory locks interrupted mid-request (PostgreSQL only, when DATABASE_URL is set): a replica
 * whose lock request reached the server but whose answer had not come back when it was
 * interrupted must not leave the lock held on a pooled connection. A TCP proxy in front of
 * PostgreSQL holds back the server's answers on the connection that sent the request, so the
 * interruption lands exactly there; afterwards `pg_locks` shows no lock and another replica leads.
 */
import net from "node:net"
import { Reactivity } from "@effect/experimental"
import { SqlClient } from "@effect/sql/SqlClient"
import { PgClient } from "@effect/sql-pg"
import { describe, expect, it } from "@effect/vitest"
import { type Context, Duration, Effect, Fiber, Layer, Redacted } from "effect"
import { getAddress, numberToHex } from "viem"
import { advisoryKey } from "../../src/store/advisoryLock.js"
import { EventStore, indexerLockKey, type VaultRef } from "../../src/store/EventStore.js"
import { makeKeyLock } from "../../src/txsender/lock.js"

const databaseUrl = process.env.DATABASE_URL

interface PgProxy {
  readonly port: number
  /** Resolves once a client message containing `text` went through; answers on that connection are then held. */
  readonly holdAnswersAfter: (text: string) => Promise<void>
  /** Passes the held answers on, and every later one. */
  readonly release: () => void
  readonly close: () => Promise<void>
}

const startPgProxy = (target: { host: string; port: number }): Promise<PgProxy> =>
  new Promise((resolve, reject) => {
    let armed: { text: string; seen: () => void } | undefined
    const sockets = new Set<net.Socket>()
    const releases = new Set<() => void>()
    const server = net.createServer((client) => {
      const upstream = net.connect(target)
      sockets.add(client).add(upstream)
      let held: Array<Buffer> | undefined
      const release = () => {
        const chunks = held ?? []
        held = undefined
        for (const chunk of chunks) client.write(chunk)
      }
      releases.add(release)
      client.on("data", (chunk: Buffer) => {
        if (armed !== undefined && chunk.includes(armed.text)) {
          held = []
          const seen = armed.seen
          armed = undefined
          upstream.write(chunk, () => seen())
        } else upstream.write(chunk)
      })
      upstream.on("data", (chunk: Buffer) => {
        if (held === undefined) client.write(chunk)
        else held.push(chunk)
      })
      const end = () => {
        client.destroy()
        upstream.destroy()
        releases.delete(release)
      }
      client.on("close", end).on("error", end)
      upstream.on("close", end).on("error", end)
    })
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      resolve({
        port: (server.address() as net.AddressInfo).port,
        holdAnswersAfter: (text) =>
          new Promise<void>((seen) => {
            armed = { text, seen }
          }),
        release: () => {
          for (const release of releases) release()
        },
        close: () =>
          new Promise<void>((closed) => {
            for (const socket of sockets) socket.destroy()
            server.close(() => closed())
          })
      })
    })
  })

const clientLayer = (url: string) =>
  PgClient.layer({ url: Redacted.make(url), maxConnections: 4, applicationName: "advisory-lock-test" }).pipe(
    Layer.provide(Reactivity.layer)
  )

/** Sessions holding the advisory lock of `key` (a signed 64-bit key splits into two oids). */
const holders = (key: string) =>
  Effect.flatMap(SqlClient, (sql) => {
    const unsigned = BigInt.asUintN(64, BigInt(key))
    return sql<{ readonly n: string }>`
      SELECT count(*) AS n FROM pg_locks
      WHERE locktype = 'advisory' AND granted AND objsubid = 1
        AND classid = ${(unsigned >> 32n).toString()}::oid AND objid = ${(unsigned & 0xffffffffn).toString()}::oid`
  }).pipe(Effect.map((rows) => Number(rows[0]?.n ?? 0)))

/**
 * Runs `attempt` on a replica behind the proxy, interrupts it while the answer to its lock
 * request is held back, then lets the answers through.
 */
const interruptMidRequest = <R>(
  proxy: PgProxy,
  key: string,
  attempt: Effect.Effect<unknown, unknown, R>,
  observer: Context.Context<SqlClient>
) =>
  Effect.gen(function* () {
    const sent = proxy.holdAnswersAfter("pg_try_advisory_lock")
    const fiber = yield* Effect.fork(attempt)
    yield* Effect.promise(() => sent)
    // The server granted it: the answer saying so is what the proxy holds back.
    yield* holders(key).pipe(
      Effect.provide(observer),
      Effect.repeat({ until: (n) => n === 1 }),
      Effect.timeout(Duration.seconds(10))
    )
    const interrupting = yield* Effect.fork(Fiber.interrupt(fiber))
    yield* Effect.sleep(Duration.millis(200))
    proxy.release()
    yield* Fiber.join(interrupting)
  })

describe.skipIf(databaseUrl === undefined)("advisory locks interrupted mid-request", () => {
  // The body is collected even when the block is skipped: no URL, nothing to parse.
  const url = databaseUrl ?? "postgres://127.0.0.1:5432/unused"
  const target = new URL(url)

  const withReplicas = <A, E>(
    body: (ctx: {
      readonly proxy: PgProxy
      readonly proxied: Context.Context<SqlClient | EventStore>
      readonly direct: Context.Context<SqlClient | EventStore>
    }) => Effect.Effect<A, E>
  ) =>
    Effect.gen(function* () {
      const proxy = yield* Effect.acquireRelease(
        Effect.promise(() =>
          startPgProxy({ host: target.hostname, port: Number(target.port === "" ? 5432 : target.port) })
        ),
        (p) => Effect.promise(() => p.close())
      )
      const proxiedUrl = new URL(url)
      proxiedUrl.hostname = "127.0.0.1"
      proxiedUrl.port = String(proxy.port)
      const store = (u: string) => EventStore.layer.pipe(Layer.provideMerge(clientLayer(u)))
      const proxied = yield* Layer.build(store(proxiedUrl.toString()))
      const direct = yield* Layer.build(store(url))
      return yield* body({ proxy, proxied, direct })
    }).pipe(Effect.scoped)

  it.live(
    "an indexer interrupted while asking for the writer lock leaves it to another replica",
    () =>
      withReplicas(({ proxy, proxied, direct }) =>
        Effect.gen(function* () {
          const ref: VaultRef = {
            chainId: 1_000_000 + Math.floor(Math.random() * 1_000_000),
            vault: getAddress(numberToHex(BigInt(Math.floor(Math.random() * 2 ** 48)), { size: 20 }))
          }
          const key = indexerLockKey(ref)
          const candidacy = Effect.flatMap(EventStore, (store) =>
            Effect.scoped(Effect.flatMap(store.leadership(ref), (l) => l.tryAcquire))
          ).pipe(Effect.provide(proxied))
          yield* interruptMidRequest(proxy, key, candidacy, direct)

          expect(yield* holders(key).pipe(Effect.provide(direct))).toBe(0)
          const other = yield* Effect.flatMap(EventStore, (store) => store.leadership(ref)).pipe(
            Effect.provide(direct)
          )
          expect(yield* other.tryAcquire).toBe(true)
          // And the interrupted replica can stand again, as a standby now.
          const again = yield* Effect.flatMap(EventStore, (store) => store.leadership(ref)).pipe(
            Effect.provide(proxied)
          )
          expect(yield* again.tryAcquire).toBe(false)
        }).pipe(Effect.scoped)
      ),
    60_000
  )

  it.live(
    "a sender interrupted while asking for the hot-key lock leaves it to another replica",
    () =>
      withReplicas(({ proxy, proxied, direct }) =>
        Effect.gen(function* () {
          const key = advisoryKey(`advisory-lock-test:${Math.random()}`)
          const lockOn = (ctx: Context.Context<SqlClient>) =>
            makeKeyLock({
              key,
              timeout: Duration.seconds(2),
              embedded: false,
              semaphore: Effect.unsafeMakeSemaphore(1)
            }).pipe(Effect.provide(ctx))
          const interrupted = yield* lockOn(proxied)
          yield* interruptMidRequest(proxy, key, interrupted(Effect.never), direct)

          expect(yield* holders(key).pipe(Effect.provide(direct))).toBe(0)
          const other = yield* lockOn(direct)
          expect(yield* other(holders(key).pipe(Effect.provide(direct)))).toBe(1)
        })
      ),
    60_000
  )
})

// Replicas of an earlier version hold locks under these keys: the derivation must not change.
describe("advisory lock keys", () => {
  it("derive from names as before", () => {
    expect(advisoryKey("relayer-tx-sender:0x70997970c51812dc3a010c7d01b50e0d17dc79c8")).toBe(
      "-1355380337476305611"
    )
    expect(
      indexerLockKey({ chainId: 31337, vault: getAddress("0x5fbdb2315678afecb367f032d93f642f64180aa3") })
    ).toBe("3759759952134012865")
    expect(advisoryKey("event-store-writes:31337")).toBe("-7917699855103230349")
  })
})
