/**
 * The devnet's x402 stand-ins (docs/protocol.md §9 "Devnet stand-ins", x402; §10 "Paid lookups (x402
 * version 2)"): Permit2 and the exact-Permit2 proxy at their canonical addresses on an anvil chain,
 * and a facilitator on a loopback HTTP server that verifies and settles `exact` payments made with
 * the permit2 method, paying gas from the key it is given (the devnet uses mnemonic account #0).
 *
 * The facilitator is `@x402/core`'s `x402Facilitator` with `@x402/evm`'s exact scheme, behind the
 * wire `HTTPFacilitatorClient` speaks: `GET /supported`, `POST /verify` and `POST /settle` with
 * `{ x402Version, paymentPayload, paymentRequirements }`. `/supported` lists this chain's `exact`
 * kind twice, once per transfer method of docs/protocol.md §10: as the library announces it (no
 * `extra`: the `permit2` method, spender the canonical proxy), and with the `extra` the
 * `permit2-exact` facilitators announce (`assetTransferMethod: "permit2-exact"`, `signerAddress`,
 * `spenderAddress` = the same proxy). Both sign the same Permit2 witness transfer to the proxy, so
 * the library's scheme verifies and settles both. Tests read every request body it received and can
 * make it unreachable, list only one method, fail settlements, hold verifications until they let
 * them go, or settle and hold the settlement's answer.
 *
 * Nothing here is logged: request bodies carry payment signatures.
 */
import { readFileSync } from "node:fs"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import { createRequire } from "node:module"
import path from "node:path"
import { x402Facilitator } from "@x402/core/facilitator"
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types"
import { toFacilitatorEvmSigner } from "@x402/evm"
import { registerExactEvmScheme } from "@x402/evm/exact/facilitator"
import { Effect, type Scope } from "effect"
import {
  type Address,
  createPublicClient,
  createWalletClient,
  defineChain,
  encodeAbiParameters,
  type Hex,
  http,
  keccak256,
  publicActions,
  stringToHex
} from "viem"
import { privateKeyToAccount } from "viem/accounts"
import { x402ExactPermit2ProxyAbi } from "../../contracts/abi.js"
import { loadArtifacts } from "../../contracts/build.js"
import { closeOnce, listen } from "./loopbackServer.js"

/** Permit2's canonical address (the same on every chain). */
export const PERMIT2_ADDRESS: Address = "0x000000000022D473030F116dDEE9F6B43aC78BA3"
/** The canonical x402 exact-Permit2 proxy, the Permit2 spender `@x402/evm` settles through. */
export const X402_EXACT_PERMIT2_PROXY_ADDRESS: Address = "0x402085c248EeA27D92E8b30b2C58ed07f9E20001"

// Permit2's EIP-712 domain has no version.
const EIP712_DOMAIN_TYPEHASH = keccak256(
  stringToHex("EIP712Domain(string name,uint256 chainId,address verifyingContract)")
)

/** Permit2's EIP-712 domain separator on `chainId` at the canonical address. */
export const permit2DomainSeparator = (chainId: number): Hex =>
  keccak256(
    encodeAbiParameters(
      [{ type: "bytes32" }, { type: "bytes32" }, { type: "uint256" }, { type: "address" }],
      [EIP712_DOMAIN_TYPEHASH, keccak256(stringToHex("Permit2")), BigInt(chainId), PERMIT2_ADDRESS]
    )
  )

const permit2Abi = [
  {
    type: "function",
    name: "DOMAIN_SEPARATOR",
    inputs: [],
    outputs: [{ name: "", type: "bytes32" }],
    stateMutability: "view"
  }
] as const

/** Permit2's runtime code as Uniswap ships it for tests (a `hex"..."` literal); read, never copied. */
const readPermit2Runtime = (): string => {
  const require = createRequire(import.meta.url)
  const packageDir = path.dirname(require.resolve("@uniswap/v4-periphery/package.json"))
  const source = readFileSync(path.join(packageDir, "lib/permit2/test/utils/DeployPermit2.sol"), "utf8")
  const literal = /hex"([0-9a-fA-F]+)"/.exec(source)?.[1]
  if (literal === undefined)
    throw new Error("no Permit2 bytecode in @uniswap/v4-periphery's DeployPermit2.sol")
  return literal.toLowerCase()
}

/** Offsets (in hex characters, at the start of each 32-byte operand) of every PUSH32 in `code`. */
const push32Operands = (code: string): Array<{ at: number; word: string }> => {
  const found: Array<{ at: number; word: string }> = []
  for (let i = 0; i < code.length; ) {
    const op = Number.parseInt(code.slice(i, i + 2), 16)
    if (op === 0x7f) found.push({ at: i + 2, word: code.slice(i + 2, i + 66) })
    // Skip push data so that it is never read as opcodes.
    i += op >= 0x60 && op <= 0x7f ? 2 + 2 * (op - 0x5f) : 2
  }
  return found
}

/**
 * Permit2's runtime code with its immutable cached chain id and domain separator set for `chainId`
 * at the canonical address. `DOMAIN_SEPARATOR()` returns the cached word whenever the chain id
 * matches the cached one, and the shipped code caches them for some other deployment. Solidity
 * pushes the immutables in declaration order right before the EIP712Domain typehash constant:
 * cached chain id, cached separator, typehash.
 */
export const permit2RuntimeFor = (chainId: number): Hex => {
  const code = readPermit2Runtime()
  const pushes = push32Operands(code)
  const typehash = EIP712_DOMAIN_TYPEHASH.slice(2)
  const index = pushes.findIndex((p) => p.word === typehash)
  const chainIdWord = pushes[index - 2]
  const separatorWord = pushes[index - 1]
  if (index < 2 || chainIdWord === undefined || separatorWord === undefined)
    throw new Error("Permit2's bytecode does not have the expected EIP-712 immutables")
  if (BigInt(`0x${chainIdWord.word}`) >= 2n ** 64n)
    throw new Error("Permit2's bytecode: the word before the cached separator is not a chain id")
  const chainWord = chainId.toString(16).padStart(64, "0")
  const separator = permit2DomainSeparator(chainId).slice(2)
  const patched =
    code.slice(0, chainIdWord.at) +
    chainWord +
    code.slice(chainIdWord.at + 64, separatorWord.at) +
    separator +
    code.slice(separatorWord.at + 64)
  return `0x${patched}`
}

/**
 * Installs Permit2 and the exact-Permit2 proxy at their canonical addresses (`anvil_setCode`), and
 * checks that Permit2's `DOMAIN_SEPARATOR()` is the one clients sign against and that the proxy
 * names Permit2. The proxy's runtime code comes from its creation code run with `eth_call`, so no
 * account spends a nonce on it.
 */
export async function installX402Contracts(rpcUrl: string): Promise<{ permit2: Address; proxy: Address }> {
  const client = createPublicClient({ transport: http(rpcUrl) })
  const chainId = await client.getChainId()
  const setCode = (address: Address, code: Hex) =>
    client.request({ method: "anvil_setCode" as never, params: [address, code] as never })

  await setCode(PERMIT2_ADDRESS, permit2RuntimeFor(chainId))
  const separator = await client.readContract({
    address: PERMIT2_ADDRESS,
    abi: permit2Abi,
    functionName: "DOMAIN_SEPARATOR"
  })
  if (separator !== permit2DomainSeparator(chainId))
    throw new Error(`Permit2's DOMAIN_SEPARATOR() on chain ${chainId} is not the expected one`)

  const artifacts = await loadArtifacts()
  const { data: runtime } = await client.call({ data: artifacts.X402ExactPermit2Proxy.bytecode })
  if (runtime === undefined || runtime === "0x")
    throw new Error("the x402 proxy's creation code returned no code")
  await setCode(X402_EXACT_PERMIT2_PROXY_ADDRESS, runtime)
  const permit2 = await client.readContract({
    address: X402_EXACT_PERMIT2_PROXY_ADDRESS,
    abi: x402ExactPermit2ProxyAbi,
    functionName: "PERMIT2"
  })
  if (permit2 !== PERMIT2_ADDRESS) throw new Error("the x402 proxy does not name Permit2")
  return { permit2: PERMIT2_ADDRESS, proxy: X402_EXACT_PERMIT2_PROXY_ADDRESS }
}

/** The transfer methods of docs/protocol.md §10 that `/supported` can list. */
export type StandInTransferMethod = "permit2-exact" | "permit2"

/** `down`: connections are dropped unanswered; `settle_error`: `/settle` answers a failed settlement. */
export type FacilitatorFault = "down" | "settle_error"

export interface FacilitatorStandInOptions {
  readonly rpcUrl: string
  /** Signs settlements and pays their gas. */
  readonly privateKey: Hex
  /** Default "127.0.0.1". */
  readonly host?: string
  /** Default 0 (a free port). */
  readonly port?: number
  /** What `/supported` lists (default both); a test of a facilitator without one leaves it out. */
  readonly methods?: ReadonlyArray<StandInTransferMethod>
}

export interface FacilitatorStandIn {
  /** `http://<host>:<port>`, for `HTTPFacilitatorClient({ url })`. */
  readonly url: string
  /** The facilitator's signer: the address that sends settlements. */
  readonly signerAddress: Address
  /** Every request answered or refused, in order (`body` undefined for a GET); not the dropped ones. */
  readonly received: () => ReadonlyArray<{ path: string; body: unknown }>
  readonly setFault: (fault: FacilitatorFault | undefined) => void
  /**
   * `/verify` requests received from now on (recorded at once) are answered only once the
   * returned function is called.
   */
  readonly holdVerifications: () => () => void
  /**
   * `/settle` requests received from now on are settled on chain as usual, then answered only once
   * `release` is called; `settled` resolves when the first of them has settled. A test cuts the
   * attestor off (a dropped connection, a `kill -9`) between the settlement and its answer.
   */
  readonly holdSettlementAnswers: () => { readonly settled: Promise<void>; readonly release: () => void }
  readonly close: () => Promise<void>
}

const MAX_BODY_BYTES = 64 * 1024

class BodyTooLarge extends Error {}

const readBody = (req: IncomingMessage): Promise<string> =>
  new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    req.on("data", (chunk: Buffer) => {
      size += chunk.length
      if (size > MAX_BODY_BYTES) {
        reject(new BodyTooLarge())
        req.destroy()
        return
      }
      chunks.push(chunk)
    })
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")))
    req.on("error", reject)
  })

const send = (res: ServerResponse, status: number, body: unknown): void => {
  const text = JSON.stringify(body)
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(text)
  })
  res.end(text)
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** The facilitator stand-in on a loopback port; `close()` ends it. */
export async function startFacilitatorStandIn(
  options: FacilitatorStandInOptions
): Promise<FacilitatorStandIn> {
  const host = options.host ?? "127.0.0.1"
  const probe = createPublicClient({ transport: http(options.rpcUrl) })
  const chainId = await probe.getChainId()
  const network = `eip155:${chainId}` as const
  const chain = defineChain({
    id: chainId,
    name: `devnet-${chainId}`,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [options.rpcUrl] } }
  })
  const account = privateKeyToAccount(options.privateKey)
  const client = createWalletClient({
    account,
    chain,
    transport: http(options.rpcUrl),
    pollingInterval: 50
  }).extend(publicActions)

  // viem's own signatures are stricter than the signer interface's loose argument types.
  const signer = toFacilitatorEvmSigner({
    address: account.address,
    readContract: (args) => client.readContract(args as never),
    verifyTypedData: (args) => client.verifyTypedData(args as never),
    writeContract: (args) => client.writeContract(args as never),
    sendTransaction: (args) => client.sendTransaction(args as never),
    waitForTransactionReceipt: (args) => client.waitForTransactionReceipt(args as never),
    getCode: (args) => client.getCode(args)
  })
  const facilitator = new x402Facilitator()
  registerExactEvmScheme(facilitator, { signer, networks: network })

  const methods = options.methods ?? ["permit2-exact", "permit2"]
  const supported = () => {
    const all = facilitator.getSupported()
    // The exact scheme also registers x402 version 1 on public networks; only this chain's v2 counts.
    const kinds = all.kinds.filter((kind) => kind.x402Version === 2 && kind.network === network)
    return {
      kinds: [
        ...(methods.includes("permit2-exact")
          ? kinds.map((kind) => ({
              ...kind,
              extra: {
                assetTransferMethod: "permit2-exact",
                signerAddress: account.address,
                spenderAddress: X402_EXACT_PERMIT2_PROXY_ADDRESS
              }
            }))
          : []),
        ...(methods.includes("permit2") ? kinds : [])
      ],
      extensions: all.extensions,
      signers: all.signers
    }
  }

  // One settlement at a time, so that concurrent ones never race for the signer's account nonce.
  let settling: Promise<unknown> = Promise.resolve()
  const serially = <A>(task: () => Promise<A>): Promise<A> => {
    const run = settling.then(task, task)
    settling = run.catch(() => undefined)
    return run
  }

  const log: Array<{ path: string; body: unknown }> = []
  let fault: FacilitatorFault | undefined
  let verifications: Promise<void> = Promise.resolve()
  let settlementAnswers: Promise<void> = Promise.resolve()
  let settlementDone = () => {}

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (fault === "down") {
      req.socket.destroy()
      return
    }
    const pathname = new URL(req.url ?? "/", "http://stand-in").pathname
    const route =
      pathname === "/supported"
        ? "GET"
        : pathname === "/verify" || pathname === "/settle"
          ? "POST"
          : undefined
    if (route === undefined) {
      req.resume()
      return send(res, 404, { error: "not found" })
    }
    if (req.method !== route) {
      req.resume()
      return send(res, 405, { error: "method not allowed" })
    }
    if (route === "GET") {
      req.resume()
      log.push({ path: pathname, body: undefined })
      return send(res, 200, supported())
    }
    let body: unknown
    try {
      body = JSON.parse(await readBody(req))
    } catch (error) {
      if (error instanceof BodyTooLarge) return send(res, 413, { error: "request body too large" })
      log.push({ path: pathname, body: undefined })
      return send(res, 400, { error: "the body is not JSON" })
    }
    log.push({ path: pathname, body })
    if (!isRecord(body) || !isRecord(body.paymentPayload) || !isRecord(body.paymentRequirements))
      return send(res, 400, { error: "expected { x402Version, paymentPayload, paymentRequirements }" })
    const payload = body.paymentPayload as unknown as PaymentPayload
    const requirements = body.paymentRequirements as unknown as PaymentRequirements
    try {
      if (pathname === "/verify") {
        await verifications
        return send(res, 200, await facilitator.verify(payload, requirements))
      }
      if (fault === "settle_error") {
        const authorization = (payload.payload as { permit2Authorization?: { from?: unknown } })
          ?.permit2Authorization
        return send(res, 200, {
          success: false,
          errorReason: "unexpected_settle_error",
          transaction: "",
          network: requirements.network,
          ...(typeof authorization?.from === "string" ? { payer: authorization.from } : {})
        })
      }
      const settled = await serially(() => facilitator.settle(payload, requirements))
      settlementDone()
      await settlementAnswers
      return send(res, 200, settled)
    } catch (error) {
      // x402's reference facilitator answers an exception with 500 and its message.
      return send(res, 500, { error: error instanceof Error ? error.message : String(error) })
    }
  }

  const server = createServer((req, res) => {
    handle(req, res).catch(() => {
      if (!res.headersSent) send(res, 500, { error: "internal error" })
      else res.destroy()
    })
  })
  const { port } = await listen(server, options.port ?? 0, host)
  return {
    url: `http://${host}:${port}`,
    signerAddress: account.address,
    received: () => [...log],
    setFault: (next) => {
      fault = next
    },
    holdVerifications: () => {
      let release = () => {}
      verifications = new Promise<void>((resolve) => {
        release = resolve
      })
      return release
    },
    holdSettlementAnswers: () => {
      let release = () => {}
      settlementAnswers = new Promise<void>((resolve) => {
        release = resolve
      })
      const settled = new Promise<void>((resolve) => {
        settlementDone = resolve
      })
      return { settled, release }
    },
    close: closeOnce(server)
  }
}

/** The facilitator stand-in as a scoped resource: started on acquire, closed with the scope. */
export const facilitatorStandIn = (
  options: FacilitatorStandInOptions
): Effect.Effect<FacilitatorStandIn, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.promise(() => startFacilitatorStandIn(options)),
    (standIn) => Effect.promise(() => standIn.close())
  )
