/**
 * What the transaction sender's tests share: anvil's extra JSON-RPC methods, an outsider using
 * the hot key, waiting on the chain, and a proxy that lets an outsider slip a transaction in
 * right before the sender's broadcast reaches the node.
 */
import http from "node:http"
import type { AddressInfo } from "node:net"
import { Effect, type Layer, Option, Schedule } from "effect"
import { type Address, type Hex, keccak256, parseGwei } from "viem"
import {
  generatePrivateKey,
  mnemonicToAccount,
  type PrivateKeyAccount,
  privateKeyToAccount
} from "viem/accounts"
import type { TxStatus } from "../../schema/relayer.js"
import { ANVIL_CHAIN_ID, ANVIL_MNEMONIC } from "../../src/chain/anvil.js"
import type { ChainClient } from "../../src/chain/ChainClient.js"
import { localSigner } from "../../src/keys/Signer.js"
import { makeSenderCore } from "../../src/txsender/core.js"
import { KeyHold, type KeyLock, semaphoreHold } from "../../src/txsender/lock.js"
import type { TxSenderShape } from "../../src/txsender/TxSender.js"

/** Mnemonic account `index` as a private key and its address. */
export const testKey = (index: number): { readonly privateKey: Hex; readonly address: Address } => {
  const key = mnemonicToAccount(ANVIL_MNEMONIC, { addressIndex: index }).getHdKey().privateKey
  if (key === null) throw new Error(`no private key for account #${index}`)
  const privateKey: Hex = `0x${Buffer.from(key).toString("hex")}`
  return { privateKey, address: privateKeyToAccount(privateKey).address }
}

export const rpc = async <A = unknown>(url: string, method: string, params: ReadonlyArray<unknown> = []) => {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params })
  })
  const body = (await response.json()) as { result?: A; error?: { message: string } }
  if (body.error !== undefined) throw new Error(`${method}: ${body.error.message}`)
  return body.result as A
}

export const rpcEffect = <A = unknown>(url: string, method: string, params: ReadonlyArray<unknown> = []) =>
  Effect.promise(() => rpc<A>(url, method, params))

export const setAutomine = (url: string, on: boolean) => rpcEffect(url, "evm_setAutomine", [on])
export const mine = (url: string) => rpcEffect(url, "evm_mine")

export const nonceOf = (url: string, address: Address, tag: "latest" | "pending" = "latest") =>
  Effect.map(rpcEffect<Hex>(url, "eth_getTransactionCount", [address, tag]), Number)

interface RpcTransaction {
  readonly hash: Hex
  readonly nonce: Hex
  readonly from: Address
  readonly to: Address | null
  readonly input: Hex
  readonly blockNumber: Hex | null
  readonly maxFeePerGas?: Hex
  readonly maxPriorityFeePerGas?: Hex
}

export const transactionOf = (url: string, hash: Hex) =>
  rpcEffect<RpcTransaction | null>(url, "eth_getTransactionByHash", [hash])

/** The hot key's transactions in anvil's pool, by nonce. */
export const poolOf = (url: string, address: Address) =>
  Effect.map(
    rpcEffect<{
      pending: Record<string, Record<string, RpcTransaction>>
      queued: Record<string, Record<string, RpcTransaction>>
    }>(url, "txpool_content"),
    (content) => {
      const key = Object.keys(content.pending).find((a) => a.toLowerCase() === address.toLowerCase())
      const queuedKey = Object.keys(content.queued).find((a) => a.toLowerCase() === address.toLowerCase())
      return {
        ...(queuedKey === undefined ? {} : content.queued[queuedKey]),
        ...(key === undefined ? {} : content.pending[key])
      } as Record<string, RpcTransaction>
    }
  )

/** Signs and sends a self-transfer from `privateKey` at `nonce`, as another process would. */
export const outsiderSend = async (
  url: string,
  privateKey: Hex,
  nonce: number,
  fees: { readonly maxFeePerGas: bigint; readonly maxPriorityFeePerGas: bigint } = {
    maxFeePerGas: parseGwei("50"),
    maxPriorityFeePerGas: parseGwei("20")
  }
): Promise<Hex> => {
  const account: PrivateKeyAccount = privateKeyToAccount(privateKey)
  const raw = await account.signTransaction({
    type: "eip1559",
    chainId: ANVIL_CHAIN_ID,
    nonce,
    to: account.address,
    value: 0n,
    gas: 21_000n,
    ...fees
  })
  await rpc(url, "eth_sendRawTransaction", [raw])
  return keccak256(raw)
}

/** Retries `check` every 50 ms until it holds, for up to `seconds`. */
export const eventually = <A, E, R>(check: Effect.Effect<A, E, R>, seconds = 20) =>
  check.pipe(
    Effect.retry({ schedule: Schedule.spaced("50 millis").pipe(Schedule.upTo(`${seconds} seconds`)) })
  )

/** Polls the sender until `hash` reaches a status other than pending. */
export const settledStatus = (sender: TxSenderShape, hash: Hex, seconds = 30) =>
  eventually(
    Effect.flatMap(sender.status(hash), (status: TxStatus) =>
      status.status === "pending" ? Effect.fail("still pending" as const) : Effect.succeed(status)
    ),
    seconds
  )

/**
 * A JSON-RPC proxy in front of anvil. Before forwarding the first `eth_sendRawTransaction`, it
 * runs `before` and waits for it: an outsider uses the hot key's next nonce in that moment.
 */
export const startRacingProxy = async (targetUrl: string, before: () => Promise<void>) => {
  let raced = false
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      void (async () => {
        const body = Buffer.concat(chunks).toString("utf8")
        if (!raced && body.includes('"eth_sendRawTransaction"')) {
          raced = true
          await before()
        }
        const upstream = await fetch(targetUrl, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body
        })
        const text = await upstream.text()
        response.writeHead(upstream.status, { "content-type": "application/json" })
        response.end(text)
      })().catch(() => {
        response.writeHead(500)
        response.end()
      })
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}

/** A sender's core on `chain` for a key of its own: chain 31337, fees capped at 100 gwei. */
/** Runs work as under the key's lock without taking any: for a test with one sender. */
export const withoutLock: KeyLock = (effect) => Effect.provideService(effect, KeyHold, semaphoreHold)

export const senderCoreOn = (chain: Layer.Layer<ChainClient>) =>
  makeSenderCore({
    signer: localSigner(generatePrivateKey()),
    chainId: Option.some(31337),
    maxFeePerGas: parseGwei("100"),
    service: "relayer"
  }).pipe(Effect.provide(chain))
