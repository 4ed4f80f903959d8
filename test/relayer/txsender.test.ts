/**
 * The transaction sender against anvil, on PGlite and (with `DATABASE_URL`) PostgreSQL: nonces
 * under concurrency and across replicas, stuck transactions, restarts, nonces used by another
 * process, gaps and an unfunded key. Each test sends from a hot key of its own.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Context, Deferred, Effect, Either, Fiber, Layer, ManagedRuntime, Option, type Scope } from "effect"
import { type Address, type Hex, keccak256, parseGwei, parseTransaction, toHex } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { type AnvilInstance, spawnAnvil } from "../../src/chain/anvil.js"
import {
  ChainClient,
  type ChainClientShape,
  type ChainRequestError,
  ChainUnavailable,
  RpcRejected,
  type RpcRejectionKind
} from "../../src/chain/ChainClient.js"
import { makeMockChainClient } from "../../src/chain/MockChainClient.js"
import { localSigner } from "../../src/keys/Signer.js"
import { migrate } from "../../src/store/migrations.js"
import { bumped } from "../../src/txsender/fees.js"
import { type TxStore, TxStoreError } from "../../src/txsender/store.js"
import { type Job, makeSubmitBatch } from "../../src/txsender/submit.js"
import {
  HotKeyUnderfunded,
  SendUnavailable,
  TxRejected,
  TxSender,
  type TxSenderOptions,
  type TxSenderShape,
  type TxSubmitError
} from "../../src/txsender/TxSender.js"
import type { TxRequest } from "../../src/txsender/TxSenderShape.js"
import { testDatabases } from "../support/database.js"
import {
  eventually,
  mine,
  nonceOf,
  outsiderSend,
  poolOf,
  rpc,
  rpcEffect,
  senderCoreOn,
  setAutomine,
  settledStatus,
  startRacingProxy,
  testKey,
  transactionOf,
  withoutLock
} from "./txsender-support.js"

let anvil: AnvilInstance
let url: string

beforeAll(async () => {
  anvil = await spawnAnvil({ accounts: 40 })
  url = anvil.rpcUrl
})
afterAll(() => anvil?.stop())

/** Accounts #3.. of the mnemonic, one per test, so that tests never share a nonce sequence. */
let nextAccount = 3
const freshKey = () => testKey(nextAccount++)

const SINK: Address = "0x00000000000000000000000000000000000051a4"

const selfTransfer = (value = 1n) => ({ to: SINK, data: "0x" as Hex, value, gas: 21_000n })

const buildSender = (
  key: { readonly privateKey: Hex },
  overrides: Partial<TxSenderOptions> = {},
  rpcUrl: string = url
): Effect.Effect<TxSenderShape, never, SqlClient | Scope.Scope> =>
  Layer.build(
    TxSender.layer({
      signer: localSigner(key.privateKey),
      chainId: Option.some(31337),
      replaceAfter: "30 seconds",
      maxReplacements: 1,
      maxFeePerGas: parseGwei("100"),
      pollInterval: "100 millis",
      ...overrides
    }).pipe(Layer.provide(ChainClient.layer({ rpcUrl, timeoutMs: 5_000, retries: 2, retryBaseDelayMs: 20 })))
  ).pipe(Effect.map((context) => Context.get(context, TxSender)))

/**
 * A node for tests of the sender's error handling. It holds one transaction per nonce (those in
 * `outsider` already held by another sender's), and its pending nonce is the lowest one nobody
 * holds. It answers each broadcast as `answer` says by its order; one it would accept at a held
 * nonce is "nonce too low". `lost` is a broadcast it takes whose answer is lost: the client's
 * retry is then told "nonce too low".
 */
const scriptedChain = (
  answer: (nth: number) => "accept" | "lost" | "outage" | RpcRejectionKind = () => "accept",
  outsider: ReadonlyArray<number> = []
) => {
  const sent: Array<Hex> = []
  const held = new Set<number>(outsider)
  /** The transactions it holds, by hash. */
  const holding = new Set<Hex>()
  let feesAvailable = true
  let onBroadcast: Effect.Effect<void> = Effect.void
  let onLookup: Effect.Effect<void> = Effect.void
  const pendingNonce = () => {
    let n = 0
    while (held.has(n)) n++
    return n
  }
  const unavailable = (operation: string) =>
    new ChainUnavailable({ operation, reason: "down", attempts: 3, cause: null })
  const rejected = (kind: RpcRejectionKind) =>
    new RpcRejected({
      operation: "eth_sendRawTransaction",
      code: -32000,
      httpStatus: undefined,
      rpcMessage: kind,
      kind,
      cause: null
    })
  const shape: ChainClientShape = makeMockChainClient({
    chainId: Effect.succeed(31337),
    getTransactionCount: (_, tag) => Effect.sync(() => (tag === "pending" ? pendingNonce() : 0)),
    getBalance: () => Effect.succeed(10n ** 18n),
    getTransactionReceipt: () => Effect.succeed(Option.none()),
    // Only whether it holds the hash is read.
    getTransaction: (hash) =>
      Effect.zipRight(
        onLookup,
        Effect.sync(() => (holding.has(hash) ? Option.some({ hash } as never) : Option.none()))
      ),
    call: () => Effect.succeed("0x"),
    estimateFeesPerGas: Effect.suspend(() =>
      feesAvailable
        ? Effect.succeed({ maxFeePerGas: parseGwei("2"), maxPriorityFeePerGas: parseGwei("1") })
        : Effect.fail(unavailable("estimateFeesPerGas"))
    ),
    sendRawTransaction: (raw) =>
      Effect.zipRight(
        onBroadcast,
        Effect.suspend((): Effect.Effect<Hex, ChainRequestError> => {
          sent.push(raw)
          const outcome = answer(sent.length)
          if (outcome === "outage") return Effect.fail(unavailable("eth_sendRawTransaction"))
          if (outcome !== "accept" && outcome !== "lost") return Effect.fail(rejected(outcome))
          const nonce = parseTransaction(raw).nonce ?? 0
          if (held.has(nonce)) return Effect.fail(rejected("nonce_too_low"))
          held.add(nonce)
          holding.add(keccak256(raw))
          return outcome === "lost" ? Effect.fail(rejected("nonce_too_low")) : Effect.succeed(keccak256(raw))
        })
      )
  })
  return {
    layer: Layer.succeed(ChainClient, shape),
    sent,
    parsed: (nth: number) => parseTransaction(sent[nth] as Hex),
    nonces: () => sent.map((raw) => parseTransaction(raw).nonce),
    setFeesAvailable: (on: boolean) => {
      feesAvailable = on
    },
    /** Runs before each broadcast. */
    beforeBroadcast: (effect: Effect.Effect<void>) => {
      onBroadcast = effect
    },
    /** Runs before each lookup of a transaction by its hash. */
    beforeLookup: (effect: Effect.Effect<void>) => {
      onLookup = effect
    }
  }
}

/**
 * A sender's core on `chain`, with a key of its own, and one job per request: `submit` hands them
 * to the sender as one batch taken under one hold of the key (as its queue hands over those that
 * arrive while it is busy).
 */
const batchOf = (
  chain: Layer.Layer<ChainClient>,
  requests: ReadonlyArray<TxRequest>,
  insert?: (stored: TxStore["insert"]) => TxStore["insert"]
) =>
  Effect.gen(function* () {
    const made = yield* senderCoreOn(chain)
    const core =
      insert === undefined ? made : { ...made, store: { ...made.store, insert: insert(made.store.insert) } }
    const jobs: Array<Job> = yield* Effect.forEach(requests, (request) =>
      Effect.map(Deferred.make<Hex, TxSubmitError>(), (done) => ({ request, done }))
    )
    return {
      address: core.address.toLowerCase(),
      jobs,
      submit: makeSubmitBatch(core, withoutLock)(jobs)
    }
  })

/** The batch of `requests` submitted on `chain`; every caller's answer. */
const submitAsOneBatch = (
  chain: Layer.Layer<ChainClient>,
  requests: ReadonlyArray<TxRequest>,
  insert?: (stored: TxStore["insert"]) => TxStore["insert"]
) =>
  Effect.gen(function* () {
    const { address, jobs, submit } = yield* batchOf(chain, requests, insert)
    yield* submit
    const answers = yield* Effect.forEach(jobs, (job) => Effect.either(Deferred.await(job.done)))
    return { answers, address }
  })

/** The stored transactions of a sender: nonce and state, by id. */
const storedOf = (sender: string) =>
  Effect.flatMap(
    SqlClient,
    (sql) => sql<{ nonce: string; state: string }>`
      SELECT nonce::text AS nonce, state FROM relayer_txs WHERE sender = ${sender} ORDER BY id`
  )

/** Every stored transaction of `sender` pending, at `nonces` in order of storing. */
const expectAllPendingAt = (sender: string, nonces: ReadonlyArray<number>) =>
  Effect.map(storedOf(sender), (rows) =>
    expect(rows).toEqual(nonces.map((nonce) => ({ nonce: String(nonce), state: "pending" })))
  )

const buildMockSender = (
  chain: Layer.Layer<ChainClient>,
  overrides: Partial<TxSenderOptions> = {}
): Effect.Effect<TxSenderShape, never, SqlClient | Scope.Scope> =>
  Layer.build(
    TxSender.layer({
      signer: localSigner(generatePrivateKey()),
      chainId: Option.some(31337),
      replaceAfter: "1 hour",
      maxReplacements: 1,
      maxFeePerGas: parseGwei("100"),
      pollInterval: "1 hour",
      ...overrides
    }).pipe(Layer.provide(chain))
  ).pipe(Effect.map((context) => Context.get(context, TxSender)))

const nonceOfTx = (hash: Hex) =>
  Effect.flatMap(transactionOf(url, hash), (tx) =>
    tx === null ? Effect.dieMessage("transaction not found") : Effect.succeed(Number(tx.nonce))
  )

/** The transaction's hash in the pool at `nonce` once it differs from `not`. */
const poolEntry = (address: Address, nonce: number, predicate: (hash: Hex) => boolean) =>
  eventually(
    Effect.flatMap(poolOf(url, address), (pool) => {
      const tx = pool[String(nonce)]
      return tx !== undefined && predicate(tx.hash) ? Effect.succeed(tx) : Effect.fail("not in the pool yet")
    })
  )

/** Waits until the chain has mined the key's transactions up to nonce `count - 1`. */
const minedUpTo = (address: Address, count: number) =>
  eventually(
    Effect.flatMap(nonceOf(url, address), (n) => (n >= count ? Effect.void : Effect.fail("not yet" as const)))
  )

const withoutAutomine = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  setAutomine(url, false).pipe(Effect.zipRight(effect), Effect.ensuring(setAutomine(url, true)))

const attemptsOf = (hash: Hex) =>
  Effect.flatMap(
    SqlClient,
    (sql) => sql<{ hash: Hex; kind: string }>`
      SELECT a2.hash, a2.kind FROM relayer_tx_attempts a1
      JOIN relayer_tx_attempts a2 ON a2.tx_id = a1.tx_id
      WHERE a1.hash = ${hash} ORDER BY a2.seq`
  )

/** The stored state of the transaction a hash belongs to. */
const rowOf = (hash: Hex) =>
  Effect.flatMap(
    SqlClient,
    (sql) => sql<{ state: string; confirmed: boolean }>`
      SELECT t.state, t.confirmed_at IS NOT NULL AS confirmed FROM relayer_tx_attempts a
      JOIN relayer_txs t ON t.id = a.tx_id WHERE a.hash = ${hash} ORDER BY a.seq DESC LIMIT 1`
  ).pipe(Effect.map((rows) => rows[0]))

for (const database of testDatabases()) {
  describe(database.name, () => {
    const storage = Layer.effectDiscard(migrate).pipe(Layer.provideMerge(database.layer))
    let db: ManagedRuntime.ManagedRuntime<SqlClient, unknown>
    beforeAll(async () => {
      db = ManagedRuntime.make(storage)
      await db.runtime()
    }, 60_000)
    afterAll(() => db?.dispose())

    const run = <A, E>(program: Effect.Effect<A, E, SqlClient | Scope.Scope>) =>
      Effect.scoped(program).pipe(Effect.provide(db))

    it.live("50 concurrent submissions are all mined, with contiguous nonces", () =>
      run(
        Effect.gen(function* () {
          const key = freshKey()
          const sender = yield* buildSender(key)
          expect(sender.address).toBe(key.address)
          const base = yield* nonceOf(url, key.address)
          const hashes = yield* Effect.forEach(
            Array.from({ length: 50 }, (_, i) => i),
            (i) => sender.submit(selfTransfer(BigInt(i + 1))),
            { concurrency: "unbounded" }
          )
          expect(new Set(hashes).size).toBe(50)
          yield* minedUpTo(key.address, base + 50)
          const statuses = yield* Effect.forEach(hashes, (hash) => settledStatus(sender, hash), {
            concurrency: 8
          })
          expect(statuses.map((s) => s.status)).toEqual(hashes.map(() => "success"))
          const nonces = yield* Effect.forEach(hashes, nonceOfTx, { concurrency: 8 })
          expect([...nonces].sort((a, b) => a - b)).toEqual(Array.from({ length: 50 }, (_, i) => base + i))
          expect(yield* nonceOf(url, key.address)).toBe(base + 50)
        })
      )
    )

    it.live("two senders of one key on one database never share a nonce", () =>
      run(
        Effect.gen(function* () {
          const key = freshKey()
          // On PostgreSQL each replica gets its own in-process lock, so only the advisory lock
          // keeps them apart; PGlite is one session, where the process-wide lock does.
          const own = database.name === "postgresql"
          const replicas = yield* Effect.all([
            buildSender(key, own ? { semaphore: Effect.unsafeMakeSemaphore(1) } : {}),
            buildSender(key, own ? { semaphore: Effect.unsafeMakeSemaphore(1) } : {})
          ])
          const hashes = yield* Effect.forEach(
            Array.from({ length: 30 }, (_, i) => i),
            (i) => (replicas[i % 2] as TxSenderShape).submit(selfTransfer(BigInt(i + 1))),
            { concurrency: "unbounded" }
          )
          const first = replicas[0] as TxSenderShape
          yield* minedUpTo(key.address, 30)
          const statuses = yield* Effect.forEach(hashes, (hash) => settledStatus(first, hash), {
            concurrency: 8
          })
          expect(statuses.every((s) => s.status === "success")).toBe(true)
          const nonces = yield* Effect.forEach(hashes, nonceOfTx, { concurrency: 8 })
          expect([...nonces].sort((a, b) => a - b)).toEqual(Array.from({ length: 30 }, (_, i) => i))
        })
      )
    )

    it.live(
      "replaces a stuck transaction at its nonce with higher fees; both hashes report the mined outcome",
      () =>
        run(
          withoutAutomine(
            Effect.gen(function* () {
              const key = freshKey()
              const sender = yield* buildSender(key, { replaceAfter: "1 second" })
              const original = yield* sender.submit(selfTransfer())
              const nonce = yield* nonceOfTx(original)
              const before = yield* transactionOf(url, original)
              expect(yield* sender.status(original)).toEqual({ txHash: original, status: "pending" })
              const replacement = yield* poolEntry(key.address, nonce, (hash) => hash !== original)
              expect(BigInt(replacement.maxFeePerGas ?? "0x0")).toBeGreaterThanOrEqual(
                bumped(BigInt(before?.maxFeePerGas ?? "0x0"))
              )
              expect(BigInt(replacement.maxPriorityFeePerGas ?? "0x0")).toBeGreaterThanOrEqual(
                bumped(BigInt(before?.maxPriorityFeePerGas ?? "0x0"))
              )
              expect((yield* attemptsOf(original)).map((a) => a.kind)).toEqual(["original", "bump"])
              yield* mine(url)
              const a = yield* settledStatus(sender, original)
              const b = yield* settledStatus(sender, replacement.hash)
              expect(a).toMatchObject({ txHash: original, status: "success" })
              expect(b).toEqual({ txHash: replacement.hash, status: "success", blockNumber: a.blockNumber })
              // Only the replacement is on chain; the original's hash follows it.
              expect(yield* transactionOf(url, original)).toBeNull()
            })
          )
        )
    )

    it.live("replaces a transaction that would now revert with a no-op; its hashes report reverted", () =>
      run(
        withoutAutomine(
          Effect.gen(function* () {
            const key = freshKey()
            const target: Address = `0x${"c0de".repeat(9)}${toHex(nextAccount, { size: 2 }).slice(2)}`
            const sender = yield* buildSender(key, { replaceAfter: "1 second" })
            const original = yield* sender.submit({ to: target, data: "0x12345678", gas: 60_000n })
            const nonce = yield* nonceOfTx(original)
            // Whatever it called now reverts (PUSH1 0 PUSH1 0 REVERT).
            yield* rpcEffect(url, "anvil_setCode", [target, "0x60006000fd"])
            const noop = yield* poolEntry(key.address, nonce, (hash) => hash !== original)
            expect(noop.to?.toLowerCase()).toBe(key.address.toLowerCase())
            expect(noop.input).toBe("0x")
            yield* mine(url)
            const status = yield* settledStatus(sender, original)
            expect(status).toMatchObject({ txHash: original, status: "reverted" })
            expect(status.blockNumber).toBeGreaterThan(0)
            expect(yield* settledStatus(sender, noop.hash)).toMatchObject({ status: "reverted" })
            expect((yield* attemptsOf(original)).map((a) => a.kind)).toEqual(["original", "cancel"])
          })
        )
      )
    )

    it.live(
      "after a restart a pending transaction is still tracked and the next one takes the next nonce",
      () =>
        run(
          withoutAutomine(
            Effect.gen(function* () {
              const key = freshKey()
              const first = yield* Effect.scoped(
                Effect.flatMap(buildSender(key), (sender) => sender.submit(selfTransfer()))
              )
              const nonce = yield* nonceOfTx(first)
              // While the sender is down, the node loses the transaction too.
              yield* rpcEffect(url, "anvil_dropTransaction", [first])
              const sender = yield* buildSender(key)
              expect(yield* sender.status(first)).toEqual({ txHash: first, status: "pending" })
              const second = yield* sender.submit(selfTransfer(2n))
              // The restarted sender broadcasts the lost one again.
              yield* poolEntry(key.address, nonce, (hash) => hash === first)
              yield* poolEntry(key.address, nonce + 1, (hash) => hash === second)
              yield* mine(url)
              expect(yield* settledStatus(sender, first)).toMatchObject({ status: "success" })
              expect(yield* settledStatus(sender, second)).toMatchObject({ status: "success" })
              expect(yield* nonceOfTx(second)).toBe(nonce + 1)
              expect(yield* nonceOf(url, key.address)).toBe(nonce + 2)
            })
          )
        )
    )

    it.live(
      "watches a mined transaction until TX_CONFIRMATIONS deep; a reorg before that makes it pending again",
      () =>
        run(
          Effect.gen(function* () {
            const key = freshKey()
            const sender = yield* buildSender(key, { confirmations: 4 })
            const snapshot = yield* rpcEffect<Hex>(url, "evm_snapshot")
            const hash = yield* sender.submit(selfTransfer())
            const nonce = yield* nonceOfTx(hash)
            const first = yield* settledStatus(sender, hash)
            expect(first).toMatchObject({ txHash: hash, status: "success" })
            yield* eventually(
              Effect.flatMap(rowOf(hash), (row) =>
                row?.state === "mined" ? Effect.succeed(row) : Effect.fail("not recorded yet" as const)
              )
            )
            expect(yield* rowOf(hash)).toEqual({ state: "mined", confirmed: false })
            yield* withoutAutomine(
              Effect.gen(function* () {
                // A reorg: the chain goes back to before the transaction's block, and the node
                // forgets the transaction too.
                expect(yield* rpcEffect<boolean>(url, "evm_revert", [snapshot])).toBe(true)
                yield* rpcEffect(url, "anvil_dropTransaction", [hash])
                expect(yield* transactionOf(url, hash)).toBeNull()
                // The sender notices, tracks it as pending again and broadcasts it again.
                yield* eventually(
                  Effect.flatMap(sender.status(hash), (status) =>
                    status.status === "pending" ? Effect.void : Effect.fail("still reported mined" as const)
                  )
                )
                expect(yield* rowOf(hash)).toEqual({ state: "pending", confirmed: false })
                yield* poolEntry(key.address, nonce, (h) => h === hash)
                yield* mine(url)
                const again = yield* settledStatus(sender, hash)
                expect(again).toMatchObject({ txHash: hash, status: "success" })
                // Two blocks on top: 3 deep, still watched.
                yield* rpcEffect(url, "anvil_mine", ["0x2"])
                yield* Effect.sleep("600 millis")
                expect(yield* rowOf(hash)).toEqual({ state: "mined", confirmed: false })
                // One more: 4 deep, confirmed and no longer watched.
                yield* mine(url)
                yield* eventually(
                  Effect.flatMap(rowOf(hash), (row) =>
                    row?.confirmed === true ? Effect.void : Effect.fail("not confirmed yet" as const)
                  )
                )
              })
            )
            expect(yield* nonceOfTx(hash)).toBe(nonce)
            expect(yield* nonceOf(url, key.address)).toBe(nonce + 1)
          })
        )
    )

    it.live("re-signs at the next nonce when another process used it just before the broadcast", () =>
      Effect.gen(function* () {
        const key = freshKey()
        let taken = -1
        const proxy = yield* Effect.acquireRelease(
          Effect.promise(() =>
            startRacingProxy(url, async () => {
              taken = Number(await rpc<Hex>(url, "eth_getTransactionCount", [key.address, "pending"]))
              await outsiderSend(url, key.privateKey, taken)
              // Mined before the broadcast goes on, as the scenario says: anvil answers the send
              // before its block is mined, and a busy machine would otherwise let the broadcast
              // meet the outsider's transaction still pending (underpriced, a reprice first).
              while (Number(await rpc<Hex>(url, "eth_getTransactionCount", [key.address, "latest"])) <= taken)
                await new Promise((resolve) => setTimeout(resolve, 20))
            })
          ),
          (p) => Effect.promise(() => p.close())
        )
        const sender = yield* buildSender(key, {}, proxy.url)
        const hash = yield* sender.submit(selfTransfer())
        expect(yield* settledStatus(sender, hash)).toMatchObject({ status: "success" })
        expect(yield* nonceOfTx(hash)).toBe(taken + 1)
        const attempts = yield* attemptsOf(hash)
        expect(attempts.map((a) => a.kind)).toEqual(["original", "renonce"])
        // The hash the node refused reports the outcome of the one that was mined.
        const refused = attempts[0]?.hash as Hex
        expect(yield* settledStatus(sender, refused)).toMatchObject({ status: "success" })
      }).pipe(run)
    )

    it.live("re-signs a pending transaction whose nonce another process used and got mined", () =>
      run(
        withoutAutomine(
          Effect.gen(function* () {
            const key = freshKey()
            const sender = yield* buildSender(key)
            const hash = yield* sender.submit(selfTransfer())
            const nonce = yield* nonceOfTx(hash)
            // Same nonce, far higher fees: the node swaps it in for ours, and it is mined.
            const outsider = yield* Effect.promise(() => outsiderSend(url, key.privateKey, nonce))
            yield* mine(url)
            expect(yield* transactionOf(url, outsider)).not.toBeNull()
            yield* poolEntry(key.address, nonce + 1, (h) => h !== outsider)
            yield* mine(url)
            expect(yield* settledStatus(sender, hash)).toMatchObject({ status: "success" })
            expect((yield* attemptsOf(hash)).map((a) => a.kind)).toEqual(["original", "renonce"])
            expect(yield* nonceOf(url, key.address)).toBe(nonce + 2)
          })
        )
      )
    )

    it.live("fills a nonce gap nobody holds with a no-op self-transfer", () =>
      run(
        withoutAutomine(
          Effect.gen(function* () {
            const key = freshKey()
            const gap = yield* nonceOf(url, key.address, "pending")
            // Another process holds the next nonce in the pool...
            const outsider = yield* Effect.promise(() => outsiderSend(url, key.privateKey, gap))
            const sender = yield* buildSender(key)
            const hash = yield* sender.submit(selfTransfer())
            expect(yield* nonceOfTx(hash)).toBe(gap + 1)
            // ...and then the node drops it: nothing at `gap` any more, ours cannot be mined.
            yield* rpcEffect(url, "anvil_dropTransaction", [outsider])
            const filler = yield* poolEntry(key.address, gap, (h) => h !== outsider)
            expect(filler.to?.toLowerCase()).toBe(key.address.toLowerCase())
            expect(filler.input).toBe("0x")
            // Blocks until both are mined: ours may be back in the pool later than the filler (a
            // node can drop it with the transaction below it; the sender broadcasts it again).
            yield* eventually(
              Effect.zipRight(
                mine(url),
                Effect.flatMap(nonceOf(url, key.address), (n) =>
                  n >= gap + 2 ? Effect.void : Effect.fail("not mined yet" as const)
                )
              )
            )
            expect(yield* settledStatus(sender, hash)).toMatchObject({ status: "success" })
            expect(yield* settledStatus(sender, filler.hash)).toMatchObject({ status: "success" })
            expect(yield* nonceOf(url, key.address)).toBe(gap + 2)
          })
        )
      )
    )

    it.live(
      "refuses with HotKeyUnderfunded and sends nothing; the nonce is used once the key is funded",
      () =>
        run(
          Effect.gen(function* () {
            const privateKey = generatePrivateKey()
            const address = privateKeyToAccount(privateKey).address
            const sender = yield* buildSender({ privateKey })
            const error = yield* Effect.flip(sender.submit(selfTransfer()))
            expect(error).toBeInstanceOf(HotKeyUnderfunded)
            const sql = yield* SqlClient
            const rows = yield* sql<{ state: string; outcome: string }>`
            SELECT state, outcome FROM relayer_txs WHERE sender = ${address.toLowerCase()}`
            expect(rows).toEqual([{ state: "dropped", outcome: "insufficient_funds" }])
            yield* rpcEffect(url, "anvil_setBalance", [address, toHex(10n ** 18n)])
            const hash = yield* sender.submit(selfTransfer())
            expect(yield* settledStatus(sender, hash)).toMatchObject({ status: "success" })
            expect(yield* nonceOfTx(hash)).toBe(0)
          })
        )
    )

    it.live("re-signs an underpriced transaction at its nonce with fees at least 12.5% higher", () =>
      run(
        Effect.gen(function* () {
          const chain = scriptedChain((nth) => (nth === 1 ? "underpriced" : "accept"))
          const sender = yield* buildMockSender(chain.layer)
          const hash = yield* sender.submit(selfTransfer())
          expect(hash).toBe(keccak256(chain.sent[1] as Hex))
          const [first, second] = [chain.parsed(0), chain.parsed(1)]
          expect(second.nonce).toBe(first.nonce)
          expect(second.maxFeePerGas).toBeGreaterThanOrEqual(bumped(first.maxFeePerGas ?? 0n))
          expect(second.maxPriorityFeePerGas).toBeGreaterThanOrEqual(bumped(first.maxPriorityFeePerGas ?? 0n))
          expect((yield* attemptsOf(hash)).map((a) => a.kind)).toEqual(["original", "reprice"])
          const refused = keccak256(chain.sent[0] as Hex)
          expect(yield* sender.status(refused)).toEqual({ txHash: refused, status: "pending" })
        })
      )
    )

    it.live(
      "a refused transaction is dropped and its nonce reused; fees come from the monitor's reading; without one, an outage before signing sends nothing",
      () =>
        run(
          Effect.gen(function* () {
            const chain = scriptedChain((nth) => (nth === 1 ? "other" : "accept"))
            const sender = yield* buildMockSender(chain.layer)
            const refused = yield* Effect.flip(sender.submit(selfTransfer()))
            expect(refused).toBeInstanceOf(TxRejected)
            expect(yield* sender.status(keccak256(chain.sent[0] as Hex))).toMatchObject({ status: "unknown" })
            const hash = yield* sender.submit(selfTransfer(2n))
            expect(chain.parsed(1).nonce).toBe(chain.parsed(0).nonce)
            expect(yield* sender.status(hash)).toEqual({ txHash: hash, status: "pending" })
            // The monitor's round read the fees: a submission does not need the chain's answer.
            chain.setFeesAvailable(false)
            yield* sender.submit(selfTransfer(3n))
            expect(chain.sent).toHaveLength(3)
            // A sender that never read the chain must ask it, and sends nothing when it cannot.
            const cold = scriptedChain(() => "accept")
            cold.setFeesAvailable(false)
            const coldSender = yield* buildMockSender(cold.layer)
            const down = yield* Effect.flip(coldSender.submit(selfTransfer()))
            expect(down).toEqual(new SendUnavailable({ reason: "chain" }))
            expect(cold.sent).toHaveLength(0)
          })
        )
    )

    it.live(
      "a broadcast lost to an outage is returned, kept pending and broadcast again by the monitor",
      () =>
        run(
          Effect.gen(function* () {
            const chain = scriptedChain((nth) => (nth === 1 ? "outage" : "accept"))
            const sender = yield* buildMockSender(chain.layer, { pollInterval: "100 millis" })
            const hash = yield* sender.submit(selfTransfer())
            expect(hash).toBe(keccak256(chain.sent[0] as Hex))
            expect(yield* sender.status(hash)).toEqual({ txHash: hash, status: "pending" })
            yield* eventually(
              Effect.suspend(() => (chain.sent.length >= 2 ? Effect.void : Effect.fail("not yet")))
            )
            expect(chain.sent[1]).toBe(chain.sent[0])
          })
        )
    )

    describe("a batch taken under one hold of the key", () => {
      const requests = (count: number) => Array.from({ length: count }, (_, i) => selfTransfer(BigInt(i + 1)))
      const hashOf = (answer: Either.Either<Hex, TxSubmitError>) =>
        Either.getOrThrowWith(answer, (error) => new Error(`refused: ${error._tag}`))
      /** One broadcast per request, at `nonces`, each caller answered with the hash that went out. */
      const expectEachSentOnce = (
        chain: ReturnType<typeof scriptedChain>,
        answers: ReadonlyArray<Either.Either<Hex, TxSubmitError>>,
        nonces: ReadonlyArray<number>
      ) => {
        expect(chain.nonces()).toEqual(nonces)
        expect(answers.map(hashOf)).toEqual(chain.sent.map((raw) => keccak256(raw)))
      }

      it.live("is stored whole at consecutive nonces before its first broadcast", () =>
        run(
          Effect.gen(function* () {
            const chain = scriptedChain()
            let storedAtFirstBroadcast: ReadonlyArray<{ nonce: string; state: string }> | undefined
            let sender = ""
            chain.beforeBroadcast(
              Effect.suspend(() =>
                storedAtFirstBroadcast === undefined
                  ? Effect.map(Effect.orDie(Effect.provide(storedOf(sender), db)), (rows) => {
                      storedAtFirstBroadcast = rows
                    })
                  : Effect.void
              )
            )
            const batch = yield* batchOf(chain.layer, requests(5))
            sender = batch.address
            yield* batch.submit
            expect(storedAtFirstBroadcast).toEqual(
              [0, 1, 2, 3, 4].map((nonce) => ({ nonce: String(nonce), state: "pending" }))
            )
            expect(chain.nonces()).toEqual([0, 1, 2, 3, 4])
            const hashes = yield* Effect.forEach(batch.jobs, (job) => Deferred.await(job.done))
            expect(hashes).toEqual(chain.sent.map((raw) => keccak256(raw)))
          })
        )
      )

      it.live(
        "a request refused outright frees its nonce: those above it are re-signed one lower before they go out",
        () =>
          run(
            Effect.gen(function* () {
              const chain = scriptedChain((nth) => (nth === 2 ? "other" : "accept"))
              const { answers, address } = yield* submitAsOneBatch(chain.layer, requests(4))
              expect(Either.isLeft(answers[1] as Either.Either<Hex, TxSubmitError>)).toBe(true)
              expect(Either.getLeft(answers[1] as Either.Either<Hex, TxSubmitError>)).toEqual(
                Option.some(new TxRejected())
              )
              // The refused one at 1, then the two above it at 1 and 2, never at 2 and 3.
              expect(chain.nonces()).toEqual([0, 1, 1, 2])
              const [first, , third, fourth] = answers.map((answer) =>
                Either.isRight(answer) ? answer.right : undefined
              )
              expect([first, third, fourth]).toEqual([0, 2, 3].map((i) => keccak256(chain.sent[i] as Hex)))
              expect((yield* attemptsOf(third as Hex)).map((a) => a.kind)).toEqual(["original", "renonce"])
              expect((yield* attemptsOf(fourth as Hex)).map((a) => a.kind)).toEqual(["original", "renonce"])
              expect(yield* storedOf(address)).toEqual([
                { nonce: "0", state: "pending" },
                { nonce: "1", state: "dropped" },
                { nonce: "1", state: "pending" },
                { nonce: "2", state: "pending" }
              ])
              // Each caller's hash is the one that went out.
              expect(hashOf(answers[3] as Either.Either<Hex, TxSubmitError>)).toBe(fourth)
            })
          )
      )

      it.live("an unfunded key refuses the rest of the batch: every nonce it held is free again", () =>
        run(
          Effect.gen(function* () {
            const chain = scriptedChain((nth) => (nth >= 2 ? "insufficient_funds" : "accept"))
            const { answers, address } = yield* submitAsOneBatch(chain.layer, requests(3))
            expect(Either.isRight(answers[0] as Either.Either<Hex, TxSubmitError>)).toBe(true)
            expect(answers.slice(1).map((a) => Either.getLeft(a))).toEqual([
              Option.some(new HotKeyUnderfunded()),
              Option.some(new HotKeyUnderfunded())
            ])
            expect(chain.nonces()).toEqual([0, 1, 1])
            expect(yield* storedOf(address)).toEqual([
              { nonce: "0", state: "pending" },
              { nonce: "1", state: "dropped" },
              { nonce: "1", state: "dropped" }
            ])
          })
        )
      )

      it.live(
        "requests whose nonces another sender used go to the end of the batch, none broadcast at a used nonce",
        () =>
          run(
            Effect.gen(function* () {
              // Another sender holds 1 and 2: the requests stored at them are re-signed at 4 and 5.
              const chain = scriptedChain(undefined, [1, 2])
              const { answers, address } = yield* submitAsOneBatch(chain.layer, requests(4))
              // 0 and 3 as stored; the one at 1 refused as too low; nothing offered at 2.
              expect(chain.nonces()).toEqual([0, 1, 3, 4, 5])
              const hashes = answers.map(hashOf)
              expect(hashes).toEqual([0, 3, 4, 2].map((i) => keccak256(chain.sent[i] as Hex)))
              expect((yield* attemptsOf(hashes[1] as Hex)).map((a) => a.kind)).toEqual([
                "original",
                "renonce"
              ])
              expect((yield* attemptsOf(hashes[2] as Hex)).map((a) => a.kind)).toEqual([
                "original",
                "renonce"
              ])
              expect((yield* storedOf(address)).map((row) => row.nonce)).toEqual(["0", "4", "5", "3"])
            })
          )
      )

      it.live(
        "stopped in the middle of a batch, each caller not yet answered gets the hash its request is stored under, pending",
        () =>
          run(
            Effect.gen(function* () {
              const chain = scriptedChain()
              const stuck = yield* Deferred.make<void>()
              // The second broadcast never returns.
              chain.beforeBroadcast(
                Effect.suspend(() =>
                  chain.sent.length === 1
                    ? Effect.zipRight(Deferred.succeed(stuck, undefined), Effect.never)
                    : Effect.void
                )
              )
              const { address, jobs, submit } = yield* batchOf(chain.layer, requests(3))
              const fiber = yield* Effect.fork(submit)
              yield* Deferred.await(stuck)
              yield* Fiber.interrupt(fiber)
              const hashes = yield* Effect.forEach(jobs, (job) => Deferred.await(job.done))
              expect(chain.sent).toHaveLength(1)
              expect(hashes[0]).toBe(keccak256(chain.sent[0] as Hex))
              // The other two are stored, pending at the next nonces, under the hashes returned.
              for (const hash of hashes.slice(1))
                expect(yield* rowOf(hash)).toEqual({ state: "pending", confirmed: false })
              yield* expectAllPendingAt(address, [0, 1, 2])
            })
          )
      )

      it.live("a batch the store refuses is refused whole, and nothing of it is sent", () =>
        run(
          Effect.gen(function* () {
            const chain = scriptedChain()
            const sql = yield* SqlClient
            const [fine, broken] = requests(2)
            const { answers, address } = yield* submitAsOneBatch(chain.layer, [
              fine as ReturnType<typeof selfTransfer>,
              // The requester's own write fails, so the statement stores none of the batch.
              {
                ...(broken as ReturnType<typeof selfTransfer>),
                storedWith: () => sql`INSERT INTO no_such_table VALUES (1)`
              }
            ])
            expect(answers.map((a) => Either.getLeft(a))).toEqual([
              Option.some(new SendUnavailable({ reason: "store" })),
              Option.some(new SendUnavailable({ reason: "store" }))
            ])
            expect(chain.sent).toHaveLength(0)
            expect(yield* storedOf(address)).toEqual([])
          })
        )
      )

      it.live(
        "a broadcast the node took, whose answer was lost and whose retry was told nonce too low, is not signed again",
        () =>
          run(
            Effect.gen(function* () {
              const chain = scriptedChain((nth) => (nth === 1 ? "lost" : "accept"))
              const { answers, address } = yield* submitAsOneBatch(chain.layer, requests(2))
              expectEachSentOnce(chain, answers, [0, 1])
              yield* expectAllPendingAt(address, [0, 1])
            })
          )
      )

      it.live(
        "a defect once the batch is stored: the caller gets the hash it is stored under, and the rest goes out",
        () =>
          run(
            Effect.gen(function* () {
              const chain = scriptedChain((nth) => (nth === 2 ? "nonce_too_low" : "accept"))
              chain.beforeLookup(Effect.dieMessage("an answer the client cannot read"))
              const { answers, address } = yield* submitAsOneBatch(chain.layer, requests(3))
              expectEachSentOnce(chain, answers, [0, 1, 2])
              yield* expectAllPendingAt(address, [0, 1, 2])
            })
          )
      )

      it.live(
        "stopped while the batch is being stored: the statement finishes and each caller gets its hash",
        () =>
          run(
            Effect.gen(function* () {
              const chain = scriptedChain()
              const storing = yield* Deferred.make<void>()
              const { address, jobs, submit } = yield* batchOf(
                chain.layer,
                requests(2),
                (insert) => (sender, entries) =>
                  Effect.zipRight(
                    Effect.zipRight(Deferred.succeed(storing, undefined), Effect.sleep("200 millis")),
                    insert(sender, entries)
                  )
              )
              const fiber = yield* Effect.fork(submit)
              yield* Deferred.await(storing)
              yield* Fiber.interrupt(fiber)
              const hashes = yield* Effect.forEach(jobs, (job) =>
                Deferred.await(job.done).pipe(
                  Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => "unanswered" })
                )
              )
              expect(chain.sent).toHaveLength(0)
              for (const hash of hashes)
                expect(yield* rowOf(hash)).toEqual({ state: "pending", confirmed: false })
              yield* expectAllPendingAt(address, [0, 1])
            })
          )
      )

      /** The statement's answer lost on the way, as a closed connection loses it. */
      const lostAnswer = new TxStoreError({
        operation: "insert",
        cause: new SqlError({
          cause: new Error("Connection terminated unexpectedly"),
          message: "Failed to execute statement"
        })
      })

      it.live(
        "a batch stored whose answer was lost: each caller gets the hash it is stored under, for the monitor to send",
        () =>
          run(
            Effect.gen(function* () {
              const chain = scriptedChain()
              const { answers, address } = yield* submitAsOneBatch(
                chain.layer,
                requests(2),
                (insert) => (sender, entries) =>
                  Effect.zipRight(insert(sender, entries), Effect.fail(lostAnswer))
              )
              expect(chain.sent).toHaveLength(0)
              for (const hash of answers.map(hashOf))
                expect(yield* rowOf(hash)).toEqual({ state: "pending", confirmed: false })
              yield* expectAllPendingAt(address, [0, 1])
            })
          )
      )

      it.live(
        "a batch whose answer was lost and that is not found stored is refused as perhaps stored, and nothing is sent",
        () =>
          run(
            Effect.gen(function* () {
              const chain = scriptedChain()
              const { answers, address } = yield* submitAsOneBatch(
                chain.layer,
                requests(2),
                () => () => Effect.fail(lostAnswer)
              )
              expect(answers.map((a) => Either.getLeft(a))).toEqual([
                Option.some(new SendUnavailable({ reason: "store_unsure" })),
                Option.some(new SendUnavailable({ reason: "store_unsure" }))
              ])
              expect(chain.sent).toHaveLength(0)
              expect(yield* storedOf(address)).toEqual([])
            })
          )
      )
    })

    it.live("answers unknown for a hash it never sent", () =>
      run(
        Effect.gen(function* () {
          const sender = yield* buildSender(freshKey())
          const random = keccak256(toHex(`${Math.random()}`))
          expect(yield* sender.status(random)).toEqual({ txHash: random, status: "unknown" })
        })
      )
    )
  })
}
