import { afterAll, beforeAll, beforeEach, describe, expect, it } from "@effect/vitest"
import { Effect, Option, Schedule } from "effect"
import { type Address, encodeFunctionData, type Hash, type Hex, zeroAddress } from "viem"
import { type HDAccount, mnemonicToAccount } from "viem/accounts"
import { ANVIL_CHAIN_ID, ANVIL_MNEMONIC, type AnvilInstance, spawnAnvil } from "../../src/chain/anvil.js"
import {
  ChainClient,
  type ChainClientOptions,
  type ChainClientShape,
  ChainResultInvalid,
  ChainReverted,
  ChainUnavailable,
  RpcRejected
} from "../../src/chain/ChainClient.js"
import { prometheusText } from "../../src/http/metrics.js"
import { mine, setAutomine } from "../relayer/txsender-support.js"
import { compileReverter, reverterAbi } from "./reverter.js"
import { closedPort, type RpcProxy, startRpcProxy } from "./rpcProxy.js"

const accounts = new Map<number, HDAccount>()
const account = (index: number): HDAccount => {
  const known = accounts.get(index)
  if (known !== undefined) return known
  const derived = mnemonicToAccount(ANVIL_MNEMONIC, { addressIndex: index })
  accounts.set(index, derived)
  return derived
}

let anvil: AnvilInstance
let proxy: RpcProxy
let sendProxy: RpcProxy
let reverter: Address

// Short backoff so that tests of retries stay fast; the attempts are what is checked.
const base = { timeoutMs: 2_000, retries: 3, retryBaseDelayMs: 5 } as const

/** Runs `program` with a live ChainClient built from these options. */
const withChain = <A, E>(
  options: Partial<ChainClientOptions> & { readonly rpcUrl: string },
  program: (chain: ChainClientShape) => Effect.Effect<A, E>
): Effect.Effect<A, E> =>
  Effect.flatMap(ChainClient, program).pipe(Effect.provide(ChainClient.layer({ ...base, ...options })))

const direct = () => ({ rpcUrl: anvil.rpcUrl })

const waitForReceipt = (chain: ChainClientShape, hash: Hash) =>
  chain.getTransactionReceipt(hash).pipe(
    Effect.flatMap(
      Option.match({ onNone: () => Effect.fail("not mined yet" as const), onSome: Effect.succeed })
    ),
    Effect.retry({
      schedule: Schedule.spaced("20 millis").pipe(Schedule.upTo("10 seconds")),
      while: (error) => error === "not mined yet"
    })
  )

/** Signs a transaction with fees, gas and nonce read through the client under test. */
const signTx = (
  chain: ChainClientShape,
  from: HDAccount,
  tx: { readonly to?: Address; readonly data: Hex; readonly nonce?: number; readonly value?: bigint }
) =>
  Effect.gen(function* () {
    const nonce = tx.nonce ?? (yield* chain.getTransactionCount(from.address, "pending"))
    const fees = yield* chain.estimateFeesPerGas
    const gas =
      tx.to === undefined
        ? 1_000_000n
        : yield* chain.estimateGas({ from: from.address, to: tx.to, data: tx.data, value: tx.value })
    return yield* Effect.promise(() =>
      from.signTransaction({
        type: "eip1559",
        chainId: ANVIL_CHAIN_ID,
        nonce,
        to: tx.to ?? null,
        data: tx.data,
        value: tx.value ?? 0n,
        gas,
        maxFeePerGas: fees.maxFeePerGas,
        maxPriorityFeePerGas: fees.maxPriorityFeePerGas
      })
    )
  })

const sendAndWait = (chain: ChainClientShape, from: HDAccount, tx: Parameters<typeof signTx>[2]) =>
  signTx(chain, from, tx).pipe(
    Effect.flatMap(chain.sendRawTransaction),
    Effect.flatMap((hash) => waitForReceipt(chain, hash))
  )

beforeAll(async () => {
  anvil = await spawnAnvil()
  proxy = await startRpcProxy(anvil.rpcUrl)
  sendProxy = await startRpcProxy(anvil.rpcUrl)
  const { bytecode } = compileReverter()
  const receipt = await Effect.runPromise(
    withChain(direct(), (chain) => sendAndWait(chain, account(0), { data: bytecode }))
  )
  if (receipt.contractAddress === null || receipt.contractAddress === undefined)
    throw new Error("Reverter was not deployed")
  reverter = receipt.contractAddress
})

afterAll(async () => {
  await proxy?.close()
  await sendProxy?.close()
  await anvil?.stop()
})

beforeEach(() => {
  proxy.reset()
  sendProxy.reset()
})

describe("ChainClient against anvil", () => {
  it.live("reads the chain id, the head and blocks by tag, number and hash", () =>
    withChain(direct(), (chain) =>
      Effect.gen(function* () {
        expect(yield* chain.chainId).toBe(ANVIL_CHAIN_ID)
        const head = yield* chain.blockNumber
        expect(head).toBeGreaterThanOrEqual(1n)

        const latest = yield* chain.getBlock()
        expect(latest.number).toBe(head)
        const byNumber = yield* chain.getBlock({ blockNumber: head })
        const byHash = yield* chain.getBlock({ blockHash: latest.hash })
        expect(byNumber).toEqual(latest)
        expect(byHash).toEqual(latest)
        const parent = yield* chain.getBlock({ blockNumber: head - 1n })
        expect(latest.parentHash).toBe(parent.hash)
        expect(latest.timestamp).toBeGreaterThanOrEqual(parent.timestamp)
        expect((yield* chain.getBlock({ tag: "earliest" })).number).toBe(0n)

        const missing = yield* Effect.flip(chain.getBlock({ blockNumber: head + 1_000n }))
        expect(missing).toMatchObject({ _tag: "BlockNotFound", block: `number ${head + 1_000n}` })
        const unknownHash = yield* Effect.flip(chain.getBlock({ blockHash: `0x${"ab".repeat(32)}` }))
        expect(unknownHash._tag).toBe("BlockNotFound")
      })
    )
  )

  it.live("finds a sent transaction and its receipt, and nothing for an unknown hash", () =>
    withChain(direct(), (chain) =>
      Effect.gen(function* () {
        const poker = account(1)
        const data = encodeFunctionData({ abi: reverterAbi, functionName: "poke", args: [11n] })
        const receipt = yield* sendAndWait(chain, poker, { to: reverter, data })
        expect(receipt.status).toBe("success")
        expect(receipt.to).toBe(reverter.toLowerCase())

        const tx = yield* chain.getTransaction(receipt.transactionHash)
        expect(Option.map(tx, (t) => t.from)).toEqual(Option.some(poker.address.toLowerCase()))
        const block = yield* chain.getBlock({ blockNumber: receipt.blockNumber })
        expect(block.hash).toBe(receipt.blockHash)

        const unknown: Hash = `0x${"11".repeat(32)}`
        expect(yield* chain.getTransactionReceipt(unknown)).toEqual(Option.none())
        expect(yield* chain.getTransaction(unknown)).toEqual(Option.none())
      })
    )
  )

  it.live("reads balances, code, nonces and fees", () =>
    withChain(direct(), (chain) =>
      Effect.gen(function* () {
        const someone = account(5).address
        expect(yield* chain.getBalance(someone)).toBe(10_000n * 10n ** 18n)
        expect(yield* chain.getBalance(someone, 0n)).toBe(10_000n * 10n ** 18n)
        expect((yield* chain.getCode(reverter)).length).toBeGreaterThan(2)
        expect(yield* chain.getCode(someone)).toBe("0x")
        expect(yield* chain.getTransactionCount(account(0).address)).toBeGreaterThanOrEqual(1)
        expect(yield* chain.getTransactionCount(someone, "pending")).toBe(0)
        expect(yield* chain.gasPrice).toBeGreaterThan(0n)
        const fees = yield* chain.estimateFeesPerGas
        expect(fees.maxFeePerGas).toBeGreaterThanOrEqual(fees.maxPriorityFeePerGas)
      })
    )
  )

  it.live("readContract returns the value typed by the ABI; at an address without code it fails", () =>
    withChain(direct(), (chain) =>
      Effect.gen(function* () {
        const value: bigint = yield* chain.readContract({
          abi: reverterAbi,
          address: reverter,
          functionName: "value"
        })
        expect(value).toBeGreaterThan(0n)
        const atGenesis = yield* Effect.flip(
          chain.readContract({ abi: reverterAbi, address: reverter, functionName: "value", blockNumber: 0n })
        )
        expect(atGenesis).toBeInstanceOf(ChainResultInvalid)

        const noContract = yield* Effect.flip(
          chain.readContract({ abi: reverterAbi, address: account(5).address, functionName: "value" })
        )
        expect(noContract).toMatchObject({
          _tag: "ChainResultInvalid",
          operation: "eth_call(value)",
          reason: "empty return data (no contract at the address?)"
        })
      })
    )
  )

  it.live("decodes a custom error by name with the call's ABI", () =>
    withChain(direct(), (chain) =>
      Effect.gen(function* () {
        const error = yield* Effect.flip(
          chain.readContract({ abi: reverterAbi, address: reverter, functionName: "nope", args: [42n] })
        )
        expect(error).toBeInstanceOf(ChainReverted)
        expect(error).toMatchObject({ errorName: "Nope", args: [42n], message: "Nope(42)" })
        if (!(error instanceof ChainReverted)) return
        expect(error.data.startsWith("0x63a2a81f")).toBe(true)
      })
    )
  )

  it.live("decodes reverts of raw calls and estimates with the client's errorAbi", () =>
    withChain({ rpcUrl: anvil.rpcUrl, errorAbi: reverterAbi }, (chain) =>
      Effect.gen(function* () {
        const nope = yield* Effect.flip(
          chain.call({
            to: reverter,
            data: encodeFunctionData({ abi: reverterAbi, functionName: "nope", args: [7n] })
          })
        )
        expect(nope).toMatchObject({
          _tag: "ChainReverted",
          operation: "eth_call",
          errorName: "Nope",
          args: [7n]
        })

        const estimate = yield* Effect.flip(
          chain.estimateGas({
            from: account(1).address,
            to: reverter,
            data: encodeFunctionData({ abi: reverterAbi, functionName: "poke", args: [0n] })
          })
        )
        expect(estimate).toMatchObject({
          _tag: "ChainReverted",
          operation: "eth_estimateGas",
          errorName: "Nope",
          args: [0n],
          message: "Nope(0)"
        })
      })
    )
  )

  it.live("estimates at the latest block, not after the transactions waiting in the pool", () =>
    withChain({ rpcUrl: anvil.rpcUrl, errorAbi: reverterAbi }, (chain) =>
      Effect.gen(function* () {
        const current = yield* chain.readContract({
          address: reverter,
          abi: reverterAbi,
          functionName: "value"
        })
        const expectCurrent = encodeFunctionData({
          abi: reverterAbi,
          functionName: "expectValue",
          args: [current]
        })
        // A transaction that changes the value waits in the pool, unmined, while the estimate runs;
        // mining is back on afterwards whatever happens, for the tests after this one.
        const { waiting, estimate } = yield* Effect.gen(function* () {
          yield* setAutomine(anvil.rpcUrl, false)
          const waiting = yield* signTx(chain, account(2), {
            to: reverter,
            data: encodeFunctionData({ abi: reverterAbi, functionName: "poke", args: [current + 1n] })
          }).pipe(Effect.flatMap(chain.sendRawTransaction))
          const estimate = yield* Effect.either(
            chain.estimateGas({ from: account(1).address, to: reverter, data: expectCurrent })
          )
          return { waiting, estimate }
        }).pipe(Effect.ensuring(setAutomine(anvil.rpcUrl, true)))
        yield* mine(anvil.rpcUrl)
        yield* waitForReceipt(chain, waiting)

        // On the pending block (anvil's default) it would revert: the value would have moved on.
        expect(estimate._tag).toBe("Right")
        const after = yield* Effect.flip(
          chain.estimateGas({ from: account(1).address, to: reverter, data: expectCurrent })
        )
        expect(after).toMatchObject({ _tag: "ChainReverted", errorName: "Nope", args: [current + 1n] })
      })
    )
  )

  it.live("reports Error(string) and Panic reverts without any custom ABI", () =>
    withChain(direct(), (chain) =>
      Effect.gen(function* () {
        const refused = yield* Effect.flip(
          chain.call({ to: reverter, data: encodeFunctionData({ abi: reverterAbi, functionName: "refuse" }) })
        )
        expect(refused).toMatchObject({
          _tag: "ChainReverted",
          errorName: "Error",
          reason: "not allowed",
          message: 'Error("not allowed")'
        })

        const panicked = yield* Effect.flip(
          chain.call({
            to: reverter,
            data: encodeFunctionData({ abi: reverterAbi, functionName: "divide", args: [0n] })
          })
        )
        expect(panicked).toMatchObject({
          _tag: "ChainReverted",
          errorName: "Panic",
          args: [0x12n],
          message: "Panic(0x12: division or modulo by zero)"
        })

        // A custom error nobody declared keeps its raw data and names its selector.
        const unknown = yield* Effect.flip(
          chain.call({
            to: reverter,
            data: encodeFunctionData({ abi: reverterAbi, functionName: "nope", args: [1n] })
          })
        )
        expect(unknown).toBeInstanceOf(ChainReverted)
        if (!(unknown instanceof ChainReverted)) return
        expect(unknown.errorName).toBeUndefined()
        expect(unknown.data).toBe(`0x63a2a81f${"1".padStart(64, "0")}`)
        expect(unknown.message).toBe("execution reverted with unknown error 0x63a2a81f")

        // Success returns the raw return data.
        const ok = yield* chain.call({
          to: reverter,
          data: encodeFunctionData({ abi: reverterAbi, functionName: "divide", args: [5n] })
        })
        expect(ok).toBe(`0x${"2".padStart(64, "0")}`)
      })
    )
  )

  it.live("getLogs returns decoded logs for an event or events, raw logs otherwise", () =>
    withChain(direct(), (chain) =>
      Effect.gen(function* () {
        const poker = account(1)
        const receipt = yield* sendAndWait(chain, poker, {
          to: reverter,
          data: encodeFunctionData({ abi: reverterAbi, functionName: "poke", args: [5n] })
        })
        const range = { address: reverter, fromBlock: receipt.blockNumber, toBlock: receipt.blockNumber }
        const poked = reverterAbi.find((item) => item.type === "event" && item.name === "Poked")
        if (poked?.type !== "event") throw new Error("no Poked event in the ABI")

        const decoded = yield* chain.getLogs({ ...range, event: poked })
        expect(decoded).toHaveLength(1)
        const [log] = decoded
        expect(log?.eventName).toBe("Poked")
        expect(log?.args).toEqual({ by: poker.address, value: 5n })
        expect(log?.transactionHash).toBe(receipt.transactionHash)

        const viaEvents = yield* chain.getLogs({ ...range, events: [poked] })
        expect(viaEvents.map((l) => l.args)).toEqual([{ by: poker.address, value: 5n }])

        const raw = yield* chain.getLogs(range)
        expect(raw).toHaveLength(1)
        expect(raw[0]?.topics[0]).toBe(log?.topics[0])

        const none = yield* chain.getLogs({
          address: zeroAddress,
          fromBlock: 0n,
          toBlock: receipt.blockNumber
        })
        expect(none).toEqual([])
      })
    )
  )
})

/** `chain_rpc_requests_total` of one operation and outcome, as `/v1/metrics` shows it. */
const rpcRequests = (operation: string, outcome: string) =>
  Effect.map(prometheusText, (text) => {
    const line = text
      .split("\n")
      .find((l) => l.startsWith(`chain_rpc_requests_total{operation="${operation}",outcome="${outcome}"}`))
    return line === undefined ? 0 : Number(line.split(" ").at(-1))
  })

describe("ChainClient failures", () => {
  it.live("retries HTTP 502 answers and succeeds, each attempt counted by outcome", () =>
    Effect.gen(function* () {
      const unavailableBefore = yield* rpcRequests("eth_chainId", "unavailable")
      const okBefore = yield* rpcRequests("eth_chainId", "ok")
      proxy.setRule(({ nth }) => (nth <= 2 ? { kind: "status", status: 502 } : { kind: "forward" }))
      const id = yield* withChain({ rpcUrl: proxy.url }, (chain) => chain.chainId)
      expect(id).toBe(ANVIL_CHAIN_ID)
      expect(proxy.count("eth_chainId")).toBe(3)
      expect((yield* rpcRequests("eth_chainId", "unavailable")) - unavailableBefore).toBe(2)
      expect((yield* rpcRequests("eth_chainId", "ok")) - okBefore).toBe(1)
    })
  )

  it.live("retries a closed connection and succeeds", () =>
    Effect.gen(function* () {
      proxy.setRule(({ nth }) => (nth === 1 ? { kind: "destroy" } : { kind: "forward" }))
      const head = yield* withChain({ rpcUrl: proxy.url }, (chain) => chain.blockNumber)
      expect(head).toBeGreaterThanOrEqual(1n)
      expect(proxy.count("eth_blockNumber")).toBe(2)
    })
  )

  it.live("gives up after the configured attempts when every answer is a 503", () =>
    Effect.gen(function* () {
      proxy.setRule(() => ({ kind: "status", status: 503 }))
      const error = yield* Effect.flip(
        withChain({ rpcUrl: proxy.url, retries: 2 }, (chain) => chain.gasPrice)
      )
      expect(error).toBeInstanceOf(ChainUnavailable)
      expect(error).toMatchObject({ operation: "eth_gasPrice", attempts: 3, reason: "HTTP 503" })
      expect(proxy.count("eth_gasPrice")).toBe(3)
    })
  )

  it.live("times out a slow answer per request and reports ChainUnavailable after bounded attempts", () =>
    Effect.gen(function* () {
      proxy.setRule(() => ({ kind: "delay", ms: 1_500 }))
      const started = Date.now()
      const error = yield* Effect.flip(
        withChain({ rpcUrl: proxy.url, timeoutMs: 150, retries: 2 }, (chain) => chain.blockNumber)
      )
      const elapsed = Date.now() - started
      expect(error).toMatchObject({ _tag: "ChainUnavailable", attempts: 3, reason: "request timed out" })
      expect(proxy.count("eth_blockNumber")).toBe(3)
      // Three timed-out attempts and short backoffs, far less than one full delay each.
      expect(elapsed).toBeGreaterThanOrEqual(3 * 150)
      expect(elapsed).toBeLessThan(3 * 1_500)
    })
  )

  it.live("reports a refused connection as ChainUnavailable", () =>
    Effect.gen(function* () {
      const port = yield* Effect.promise(closedPort)
      const error = yield* Effect.flip(
        withChain({ rpcUrl: `http://127.0.0.1:${port}`, retries: 1 }, (chain) => chain.chainId)
      )
      expect(error).toBeInstanceOf(ChainUnavailable)
      expect(error).toMatchObject({ attempts: 2 })
    })
  )

  it.live("does not retry a getLogs range rejection and classifies it as range_too_large", () =>
    Effect.gen(function* () {
      proxy.setRule(({ method }) =>
        method === "eth_getLogs"
          ? { kind: "rpcError", code: -32005, message: "query returned more than 10000 results" }
          : { kind: "forward" }
      )
      const error = yield* Effect.flip(
        withChain({ rpcUrl: proxy.url }, (chain) => chain.getLogs({ fromBlock: 0n, toBlock: 1_000_000n }))
      )
      expect(error).toBeInstanceOf(RpcRejected)
      expect(error).toMatchObject({
        operation: "eth_getLogs",
        code: -32005,
        rpcMessage: "query returned more than 10000 results",
        kind: "range_too_large"
      })
      expect(proxy.count("eth_getLogs")).toBe(1)
    })
  )

  it.live("retries a rate limit answered as a JSON-RPC error", () =>
    Effect.gen(function* () {
      proxy.setRule(({ nth }) =>
        nth <= 2
          ? { kind: "rpcError", code: -32005, message: "request rate limited, try again later" }
          : { kind: "forward" }
      )
      expect(yield* withChain({ rpcUrl: proxy.url }, (chain) => chain.chainId)).toBe(ANVIL_CHAIN_ID)
      expect(proxy.count("eth_chainId")).toBe(3)
    })
  )

  it.live("does not retry a revert or a refusal by HTTP status, each counted by its outcome", () =>
    Effect.gen(function* () {
      const revertedBefore = yield* rpcRequests("eth_call", "reverted")
      const rejectedBefore = yield* rpcRequests("eth_chainId", "rejected")
      const reverted = yield* Effect.flip(
        withChain({ rpcUrl: proxy.url, errorAbi: reverterAbi }, (chain) =>
          chain.call({
            to: reverter,
            data: encodeFunctionData({ abi: reverterAbi, functionName: "nope", args: [3n] })
          })
        )
      )
      expect(reverted).toMatchObject({ _tag: "ChainReverted", errorName: "Nope" })
      expect(proxy.count("eth_call")).toBe(1)

      proxy.setRule(() => ({ kind: "status", status: 401, body: "unauthorized" }))
      const refused = yield* Effect.flip(withChain({ rpcUrl: proxy.url }, (chain) => chain.chainId))
      expect(refused).toMatchObject({ _tag: "RpcRejected", httpStatus: 401, code: undefined, kind: "other" })
      expect(proxy.count("eth_chainId")).toBe(1)
      expect((yield* rpcRequests("eth_call", "reverted")) - revertedBefore).toBe(1)
      expect((yield* rpcRequests("eth_chainId", "rejected")) - rejectedBefore).toBe(1)
    })
  )

  it.live("rejects a transaction with a used nonce as nonce_too_low, without retrying", () =>
    withChain({ rpcUrl: proxy.url }, (chain) =>
      Effect.gen(function* () {
        const sender = account(2)
        const data = encodeFunctionData({ abi: reverterAbi, functionName: "poke", args: [9n] })
        const first = yield* sendAndWait(chain, sender, { to: reverter, data })
        expect(first.status).toBe("success")
        const used = (yield* chain.getTransactionCount(sender.address)) - 1

        const other = encodeFunctionData({ abi: reverterAbi, functionName: "poke", args: [10n] })
        const stale = yield* signTx(chain, sender, { to: reverter, data: other, nonce: used })
        proxy.setRule(() => ({ kind: "forward" }))
        const error = yield* Effect.flip(chain.sendRawTransaction(stale))
        expect(error).toBeInstanceOf(RpcRejected)
        expect(error).toMatchObject({ kind: "nonce_too_low", rpcMessage: "nonce too low", code: -32003 })
        expect(proxy.count("eth_sendRawTransaction")).toBe(1)
      })
    )
  )

  it.live("treats a transaction the node already has as sent", () =>
    withChain({ rpcUrl: proxy.url }, (chain) =>
      Effect.gen(function* () {
        const sender = account(3)
        const nonce = yield* chain.getTransactionCount(sender.address, "pending")
        // A nonce gap keeps the transaction queued, so the second send meets it in the pool.
        const queued = yield* signTx(chain, sender, {
          to: reverter,
          data: encodeFunctionData({ abi: reverterAbi, functionName: "poke", args: [4n] }),
          nonce: nonce + 5
        })
        const hash = yield* chain.sendRawTransaction(queued)
        expect(yield* chain.sendRawTransaction(queued)).toBe(hash)
      })
    )
  )

  it.live("sends raw transactions through sendRpcUrl when it is set, else through rpcUrl", () =>
    Effect.gen(function* () {
      const sender = account(4)
      const data = encodeFunctionData({ abi: reverterAbi, functionName: "poke", args: [8n] })

      const hash = yield* withChain({ rpcUrl: proxy.url, sendRpcUrl: sendProxy.url }, (chain) =>
        signTx(chain, sender, { to: reverter, data }).pipe(Effect.flatMap(chain.sendRawTransaction))
      )
      expect(sendProxy.count("eth_sendRawTransaction")).toBe(1)
      expect(sendProxy.count()).toBe(1)
      expect(proxy.count("eth_sendRawTransaction")).toBe(0)
      expect(proxy.count()).toBeGreaterThan(0)

      const receipt = yield* withChain({ rpcUrl: proxy.url }, (chain) =>
        waitForReceipt(chain, hash).pipe(
          Effect.zipLeft(
            signTx(chain, sender, { to: reverter, data }).pipe(Effect.flatMap(chain.sendRawTransaction))
          )
        )
      )
      expect(receipt.status).toBe("success")
      expect(proxy.count("eth_sendRawTransaction")).toBe(1)
      expect(sendProxy.count("eth_sendRawTransaction")).toBe(1)
    })
  )
})
