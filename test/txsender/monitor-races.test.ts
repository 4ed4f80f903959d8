/**
 * The monitor (src/txsender/monitor.ts) where the chain moves between its reading and its work
 * under the key's lock, on PGlite and (with `DATABASE_URL`) PostgreSQL, over a scripted node: a
 * transaction judged taken that another replica re-signed and got mined meanwhile, and a stuck
 * transaction mined while it was simulated for a replacement. Either is settled as mined, never
 * re-signed, dropped or cancelled. Then its fairness: a transaction capped at the fee ceiling is
 * not simulated round after round, and replacements the node refused do not use up the limit.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { type Address, type Hex, parseGwei, parseTransaction } from "viem"
import {
  ChainClient,
  ChainReverted,
  RpcRejected,
  type RpcRejectionKind
} from "../../src/chain/ChainClient.js"
import { makeMockChainClient } from "../../src/chain/MockChainClient.js"
import { migrate } from "../../src/store/migrations.js"
import type { KeyLock } from "../../src/txsender/lock.js"
import { makeMonitor } from "../../src/txsender/monitor.js"
import { senderCoreOn, withoutLock } from "../relayer/txsender-support.js"
import { testDatabases } from "../support/database.js"

const PAYLOAD = {
  to: "0x00000000000000000000000000000000000051a4" as Address,
  data: "0x1234" as Hex,
  value: 0n,
  gas: 60_000n
}
const FEES = { maxFeePerGas: parseGwei("2"), maxPriorityFeePerGas: parseGwei("1") }
const BLOCK: Hex = `0x${"bb".repeat(32)}`

/** A node whose nonces, receipts and simulation outcome the test sets; it records broadcasts. */
const scriptedNode = () => {
  const node = {
    latest: 0,
    pending: 0,
    reverts: false,
    receipts: new Map<string, { status: "success" | "reverted"; blockNumber: bigint; blockHash: Hex }>(),
    sent: [] as Array<Hex>,
    /** Simulations asked for. */
    calls: 0,
    /** How the next broadcasts are refused, in turn; accepted once it is empty. */
    refusals: [] as Array<RpcRejectionKind>,
    /** Runs when the payload is simulated. */
    onCall: () => {}
  }
  const shape = makeMockChainClient({
    chainId: Effect.succeed(31337),
    getTransactionCount: (_, tag) => Effect.sync(() => (tag === "pending" ? node.pending : node.latest)),
    getBalance: () => Effect.succeed(10n ** 18n),
    estimateFeesPerGas: Effect.succeed(FEES),
    getTransactionReceipt: (hash) =>
      Effect.sync(() => {
        const receipt = node.receipts.get(hash.toLowerCase())
        return receipt === undefined ? Option.none() : Option.some(receipt as never)
      }),
    getTransaction: () => Effect.succeed(Option.none()),
    getBlock: () => Effect.succeed({ number: 100n, hash: BLOCK } as never),
    call: () =>
      Effect.suspend(() => {
        node.calls++
        node.onCall()
        return node.reverts
          ? Effect.fail(new ChainReverted({ operation: "eth_call", data: "0x", description: "nonce used" }))
          : Effect.succeed("0x" as Hex)
      }),
    sendRawTransaction: (raw) =>
      Effect.suspend(() => {
        node.sent.push(raw)
        const refusal = node.refusals.shift()
        return refusal === undefined
          ? Effect.succeed("0x" as Hex)
          : Effect.fail(
              new RpcRejected({
                operation: "eth_sendRawTransaction",
                code: -32000,
                httpStatus: undefined,
                rpcMessage: "replacement transaction underpriced",
                kind: refusal,
                cause: null
              })
            )
      })
  })
  return { node, layer: Layer.succeed(ChainClient, shape) }
}

/** A sender's core on the node with one request stored at nonce 0 (with `fees`); its id. */
const oneStored = (chain: Layer.Layer<ChainClient>, fees = FEES) =>
  Effect.gen(function* () {
    const core = yield* senderCoreOn(chain)
    const s = yield* core.sender
    const original = yield* core.sign(s, PAYLOAD, 0n, fees, "original")
    const [id] = yield* core.store.insert(s, [{ purpose: "request", payload: PAYLOAD, attempt: original }])
    return { core, s, original, id: id as string }
  })

const rowOf = (id: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const [row] = yield* sql<{ state: string; outcome: string | null; nonce: string }>`
      SELECT state, outcome, nonce::text AS nonce FROM relayer_txs WHERE id = ${id}`
    const attempts = yield* sql<{ nonce: string; kind: string }>`
      SELECT nonce::text AS nonce, kind FROM relayer_tx_attempts WHERE tx_id = ${id} ORDER BY seq`
    return { ...row, attempts: attempts.map((a) => `${a.kind}@${a.nonce}`) }
  })

for (const database of testDatabases()) {
  describe(database.name, () => {
    const storage = Layer.effectDiscard(migrate).pipe(Layer.provideMerge(database.layer))

    layer(storage, { timeout: 60_000 })((it) => {
      for (const reverts of [true, false])
        it.effect(
          `judged taken, then re-signed and mined by another replica while this one waited for the lock (its simulation ${reverts ? "reverts" : "succeeds"}): settled, not dropped or sent again`,
          () =>
            Effect.gen(function* () {
              const { node, layer: chain } = scriptedNode()
              const { core, s, id } = yield* oneStored(chain)
              // Another sender used nonce 0; the request has no receipt there.
              node.latest = 1
              node.pending = 1
              let waited = false
              // While this replica waits for the lock, the other re-signs it at 1 and it is mined.
              const withLock: KeyLock = (effect) =>
                Effect.gen(function* () {
                  if (!waited) {
                    waited = true
                    const moved = yield* Effect.orDie(core.sign(s, PAYLOAD, 1n, FEES, "renonce"))
                    yield* Effect.orDie(core.store.addAttempt(id, moved))
                    node.receipts.set(moved.hash.toLowerCase(), {
                      status: "success",
                      blockNumber: 5n,
                      blockHash: BLOCK
                    })
                    node.latest = 2
                    node.pending = 2
                    node.reverts = reverts
                  }
                  return yield* withoutLock(effect)
                })
              const monitor = makeMonitor(core, withLock, {
                replaceAfterMs: 3_600_000,
                maxReplacements: 1,
                confirmations: 12
              })
              yield* monitor.tick // passed without a receipt: a suspect
              yield* monitor.tick // taken: worked on under the lock
              yield* monitor.tick
              expect(node.sent).toEqual([])
              expect(yield* rowOf(id)).toEqual({
                state: "mined",
                outcome: "success",
                nonce: "1",
                attempts: ["original@0", "renonce@1"]
              })
            })
        )

      it.effect(
        "a stuck transaction mined while it is simulated for a replacement is settled, not cancelled",
        () =>
          Effect.gen(function* () {
            const { node, layer: chain } = scriptedNode()
            const { core, original, id } = yield* oneStored(chain)
            node.pending = 1 // the node holds it, unmined
            // Mined while the monitor simulates it: its account nonce is used, so the call reverts.
            node.onCall = () => {
              node.onCall = () => {}
              node.latest = 1
              node.receipts.set(original.hash.toLowerCase(), {
                status: "success",
                blockNumber: 5n,
                blockHash: BLOCK
              })
              node.reverts = true
            }
            const monitor = makeMonitor(core, withoutLock, {
              replaceAfterMs: 0,
              maxReplacements: 3,
              confirmations: 12
            })
            yield* monitor.tick
            expect(node.sent.map((raw) => parseTransaction(raw).to)).not.toContain(core.address)
            expect(yield* rowOf(id)).toEqual({
              state: "mined",
              outcome: "success",
              nonce: "0",
              attempts: ["original@0"]
            })
          })
      )

      it.effect("a stuck head transaction capped at the fee ceiling is not simulated round after round", () =>
        Effect.gen(function* () {
          const { node, layer: chain } = scriptedNode()
          // Signed at the ceiling of senderCoreOn (100 gwei): no bump fits under it.
          const { core, id } = yield* oneStored(chain, {
            maxFeePerGas: parseGwei("100"),
            maxPriorityFeePerGas: parseGwei("1")
          })
          node.pending = 1 // the node holds it, unmined: the head of the queue
          const monitor = makeMonitor(core, withoutLock, {
            replaceAfterMs: 0,
            maxReplacements: 5,
            confirmations: 12
          })
          for (let round = 0; round < 3; round++) yield* monitor.tick
          expect(node.calls).toBe(0)
          expect(node.sent).toEqual([])
          expect((yield* rowOf(id)).attempts).toEqual(["original@0"])
        })
      )

      it.effect("replacements the node refused do not count toward the replacement limit", () =>
        Effect.gen(function* () {
          const { node, layer: chain } = scriptedNode()
          const { core, id } = yield* oneStored(chain)
          node.pending = 1 // the node holds it, unmined
          // The first two bumps are refused, the later ones accepted.
          node.refusals = ["underpriced", "underpriced"]
          const monitor = makeMonitor(core, withoutLock, {
            replaceAfterMs: 0,
            maxReplacements: 2,
            confirmations: 12
          })
          for (let round = 0; round < 5; round++) yield* monitor.tick
          // Two refused and two accepted bumps, then the limit: nothing more is sent.
          expect(node.sent).toHaveLength(4)
          expect((yield* rowOf(id)).attempts).toEqual([
            "original@0",
            "bump:refused@0",
            "bump:refused@0",
            "bump@0",
            "bump@0"
          ])
          // Each bump over the one before, refused or not.
          const fees = node.sent.map((raw) => parseTransaction(raw).maxFeePerGas ?? 0n)
          for (let i = 1; i < fees.length; i++) expect(fees[i]! > fees[i - 1]!).toBe(true)
        })
      )
    })
  })
}
