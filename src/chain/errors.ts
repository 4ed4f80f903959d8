/**
 * What can go wrong when talking to the chain, told apart so callers can act on it: retry later
 * (`ChainUnavailable`), explain a failed simulation (`ChainReverted`), or handle a node's refusal
 * (`RpcRejected`, classified by `classifyRpcError`). Also the translation of viem's errors into
 * these, shared by the live client and its tests.
 */
import { Data } from "effect"
import {
  type Abi,
  BaseError,
  decodeErrorResult,
  type Hex,
  HttpRequestError,
  ResponseBodyTooLargeError,
  RpcRequestError,
  SocketClosedError,
  TimeoutError,
  WebSocketRequestError
} from "viem"
import { Unavailable } from "../../schema/errors.js"

/**
 * The RPC could not be reached, did not answer in time, or answered with a transient failure
 * (HTTP 5xx/429, rate limit). Already retried `attempts` times in total; never the caller's fault.
 */
export class ChainUnavailable extends Data.TaggedError("ChainUnavailable")<{
  readonly operation: string
  readonly reason: string
  readonly attempts: number
  readonly cause: unknown
}> {
  override get message() {
    return `chain unavailable during ${this.operation} after ${this.attempts} attempt(s): ${this.reason}`
  }
}

/**
 * Execution reverted (eth_call, eth_estimateGas, a contract read). `data` is the raw revert data;
 * `errorName`/`args` are set when an ABI given to the client or the call knows the error, and
 * `reason` for a plain `Error(string)`.
 */
export class ChainReverted extends Data.TaggedError("ChainReverted")<{
  readonly operation: string
  readonly data: Hex
  readonly errorName?: string
  readonly args?: readonly unknown[]
  readonly reason?: string
  /** Human-readable: `Nope(42)`, `Error("not allowed")`, `Panic(0x11: arithmetic overflow)`. */
  readonly description: string
  readonly cause?: unknown
}> {
  override get message() {
    return this.description
  }
}

export type RpcRejectionKind =
  | "nonce_too_low"
  | "nonce_too_high"
  | "underpriced"
  | "insufficient_funds"
  | "range_too_large"
  | "other"

/**
 * The node answered with an error that is neither a revert nor transient, so repeating the same
 * request will not help. `code` and `rpcMessage` are the node's own; `kind` is their classification.
 */
export class RpcRejected extends Data.TaggedError("RpcRejected")<{
  readonly operation: string
  /** JSON-RPC error code; absent when the refusal came as a bare HTTP status. */
  readonly code: number | undefined
  readonly httpStatus: number | undefined
  readonly rpcMessage: string
  readonly kind: RpcRejectionKind
  readonly cause: unknown
}> {
  override get message() {
    return `${this.operation} rejected by the node (${this.code ?? `HTTP ${this.httpStatus ?? "?"}`}): ${this.rpcMessage}`
  }
}

/** No block with that number, hash or tag (yet, or any more after a reorg). */
export class BlockNotFound extends Data.TaggedError("BlockNotFound")<{
  readonly block: string
}> {
  override get message() {
    return `block not found: ${this.block}`
  }
}

/**
 * The node answered, but the result does not fit the ABI: typically no contract at the address
 * (empty return data) or a contract with a different interface.
 */
export class ChainResultInvalid extends Data.TaggedError("ChainResultInvalid")<{
  readonly operation: string
  readonly reason: string
  readonly cause: unknown
}> {
  override get message() {
    return `${this.operation} returned data that does not match the ABI: ${this.reason}`
  }
}

/** Failures any request can end in. */
export type ChainRequestError = ChainUnavailable | RpcRejected

// ---------------------------------------------------------------------------------------------
// Classification

const patterns: ReadonlyArray<readonly [Exclude<RpcRejectionKind, "other">, RegExp]> = [
  [
    "nonce_too_low",
    /nonce (is )?too low|noncetoolow|oldnonce|nonce has already been used|nonce .*lower than (the )?(current|account|next)/i
  ],
  ["nonce_too_high", /nonce (is )?too high|noncetoohigh|nonce gap|nonce .*too far in the future/i],
  [
    "insufficient_funds",
    /insufficient funds|insufficientfunds|insufficient balance|sender doesn't have enough funds|not enough funds/i
  ],
  [
    "underpriced",
    /underpriced|fee ?cap (is )?(less|lower) than (the )?block base ?fee|max fee per gas less than block base fee|feecaptoolow|gas price too low|fee too low|priority fee .*too low/i
  ],
  [
    "range_too_large",
    /query returned more than|more than [\d,]+ (results|logs)|too many (results|logs|blocks)|(block )?range (is )?too (large|wide|big)|block range limit|exceeds? (the )?max(imum)? (block )?range|max(imum)? block range|max(imum)? results|log response size exceeded|response size (exceeded|too large|is larger)|limited to a? ?[\d,]+ (block )?range|query timeout exceeded|requested too many blocks|response body exceeded the size limit/i
  ]
]

// Only for the error text, which anvil pads with the raw revert bytes.
// biome-ignore lint/suspicious/noControlCharactersInRegex: stripping control characters is the point
const controlCharacters = /[\u0000-\u001f\u007f]+/g
const clean = (text: string): string => text.replace(controlCharacters, " ").replace(/\s+/g, " ").trim()

/** `classifyRpcError` for a node's error message alone. */
export const classifyRpcMessage = (message: string): RpcRejectionKind => {
  for (const [kind, pattern] of patterns) if (pattern.test(message)) return kind
  return "other"
}

/** The errors a failure is made of, outermost first (viem nests them through `cause`). */
const causeChain = (error: unknown): readonly unknown[] => {
  const chain: unknown[] = []
  let current: unknown = error
  while (current !== undefined && current !== null && chain.length < 32 && !chain.includes(current)) {
    chain.push(current)
    current = typeof current === "object" && "cause" in current ? current.cause : undefined
  }
  return chain
}

const messageOf = (error: unknown): string | undefined => {
  if (error instanceof BaseError) return error.details || error.shortMessage
  if (typeof error === "object" && error !== null && "message" in error && typeof error.message === "string")
    return error.message
  return undefined
}

/**
 * Sorts a node's refusal into what a caller can act on: a tx sender (nonce, price, funds) or an
 * indexer shrinking its `eth_getLogs` ranges. Accepts an `RpcRejected`, a viem error, or anything
 * with a `message`.
 */
export const classifyRpcError = (error: unknown): RpcRejectionKind => {
  if (error instanceof RpcRejected) return error.kind
  for (const link of causeChain(error)) {
    if (link instanceof ResponseBodyTooLargeError) return "range_too_large"
    if (link instanceof RpcRequestError) return classifyRpcMessage(clean(link.details))
  }
  const message = messageOf(error)
  return message === undefined ? "other" : classifyRpcMessage(clean(message))
}

const alreadyKnown =
  /already known|already imported|known transaction|alreadyknown|already in (the )?(mempool|tx ?pool)/i

/** The node refused a transaction because it already has it (pooled or mined): a resend. */
export const isAlreadyKnown = (error: unknown): boolean =>
  causeChain(error).some((link) => link instanceof RpcRequestError && alreadyKnown.test(link.details))

/** How one failed request should be treated. */
export type Failure =
  | { readonly _tag: "Transient"; readonly reason: string }
  | { readonly _tag: "Reverted"; readonly data: Hex; readonly nodeMessage: string }
  | {
      readonly _tag: "Rejected"
      readonly code: number | undefined
      readonly httpStatus: number | undefined
      readonly message: string
    }
  /** Not a failure of the node or the network: a bug, left to the caller to treat as a defect. */
  | { readonly _tag: "Unknown" }

const isHex = (value: unknown): value is Hex => typeof value === "string" && /^0x[0-9a-fA-F]*$/.test(value)

// Some nodes nest the revert data one level deeper (`{ data: { data: "0x…" } }`).
const revertDataOf = (data: unknown): Hex | undefined => {
  if (isHex(data)) return data
  if (typeof data === "object" && data !== null && "data" in data && isHex(data.data)) return data.data
  return undefined
}

const transientStatus = (status: number | undefined): boolean =>
  status !== undefined && (status === 408 || status === 429 || status >= 500)

const transientMessage =
  /rate limit|too many requests|request limit|exceeded .*(capacity|quota|compute units)|try again|temporar|timed? ?out|service unavailable|bad gateway|header not found|no backend|overloaded|busy/i

// Execution-reverted code of EIP-1474 / geth; the others carry reverts on some clients.
const REVERTED = 3
const revertCarriers = new Set([-32000, -32015, -32603])
// Internal error and limit exceeded: usually the provider's trouble, not the request's.
const transientCodes = new Set([-1, -32002, -32005, -32603, 429])

/** Sorts a failed viem request into retry / revert / rejection / bug. */
export const interpretFailure = (error: unknown): Failure => {
  const chain = causeChain(error)
  for (const link of chain) {
    if (link instanceof TimeoutError) return { _tag: "Transient", reason: "request timed out" }
    if (link instanceof SocketClosedError || link instanceof WebSocketRequestError)
      return { _tag: "Transient", reason: "connection closed" }
  }
  const rpc = chain.find((link): link is RpcRequestError => link instanceof RpcRequestError)
  if (rpc !== undefined) {
    const message = clean(rpc.details)
    const data = revertDataOf(rpc.data)
    if (
      rpc.code === REVERTED ||
      (revertCarriers.has(rpc.code) && (/revert/i.test(message) || (data !== undefined && data.length >= 10)))
    )
      return { _tag: "Reverted", data: data ?? "0x", nodeMessage: message }
    const kind = classifyRpcMessage(message)
    if (
      kind === "other" &&
      (transientCodes.has(rpc.code) || transientStatus(rpc.status) || transientMessage.test(message))
    )
      return { _tag: "Transient", reason: `node error ${rpc.code}: ${message}` }
    return { _tag: "Rejected", code: rpc.code, httpStatus: rpc.status, message }
  }
  const tooLarge = chain.find((link) => link instanceof ResponseBodyTooLargeError)
  if (tooLarge !== undefined)
    return {
      _tag: "Rejected",
      code: undefined,
      httpStatus: undefined,
      message: "response body exceeded the size limit"
    }
  const httpError = chain.find((link): link is HttpRequestError => link instanceof HttpRequestError)
  if (httpError !== undefined) {
    // No status: the request never got an answer (refused, reset, closed, unreadable body).
    if (httpError.status === undefined || transientStatus(httpError.status)) {
      const detail = clean(httpError.details || httpError.shortMessage)
      return {
        _tag: "Transient",
        reason: httpError.status === undefined ? `no answer: ${detail}` : `HTTP ${httpError.status}`
      }
    }
    return {
      _tag: "Rejected",
      code: undefined,
      httpStatus: httpError.status,
      message: clean(httpError.details || `HTTP ${httpError.status}`)
    }
  }
  return { _tag: "Unknown" }
}

// ---------------------------------------------------------------------------------------------
// Revert data

const panicReasons: Readonly<Record<number, string>> = {
  1: "assertion failed",
  17: "arithmetic underflow or overflow",
  18: "division or modulo by zero",
  33: "invalid enum value",
  34: "invalid storage byte array",
  49: "pop on empty array",
  50: "array index out of bounds",
  65: "out of memory",
  81: "call to an uninitialized function"
}

const formatValue = (value: unknown): string => {
  if (typeof value === "bigint") return value.toString()
  if (typeof value === "string") return isHex(value) ? value : JSON.stringify(value)
  if (Array.isArray(value)) return `[${value.map(formatValue).join(", ")}]`
  if (typeof value === "object" && value !== null)
    return `{${Object.entries(value)
      .map(([key, field]) => `${key}: ${formatValue(field)}`)
      .join(", ")}}`
  return String(value)
}

export interface DecodedRevert {
  readonly errorName?: string
  readonly args?: readonly unknown[]
  readonly reason?: string
  readonly description: string
}

/**
 * Names a revert from its raw data with the ABIs that may declare it (`Error(string)` and
 * `Panic(uint256)` are always known). Falls back to the node's own message for unknown errors.
 */
export const decodeRevert = (data: Hex, abis: ReadonlyArray<Abi>, nodeMessage = ""): DecodedRevert => {
  if (data.length < 10) return { description: nodeMessage || "execution reverted without data" }
  const errors = abis.flatMap((abi) => abi.filter((item) => item.type === "error"))
  try {
    const decoded = decodeErrorResult({ abi: errors, data })
    const args: readonly unknown[] = decoded.args ?? []
    if (decoded.errorName === "Error" && typeof args[0] === "string")
      return { errorName: "Error", args, reason: args[0], description: `Error(${JSON.stringify(args[0])})` }
    if (decoded.errorName === "Panic" && typeof args[0] === "bigint") {
      const code = args[0]
      const known = panicReasons[Number(code)]
      const hex = `0x${code.toString(16).padStart(2, "0")}`
      return {
        errorName: "Panic",
        args,
        description: `Panic(${known === undefined ? hex : `${hex}: ${known}`})`
      }
    }
    return {
      errorName: decoded.errorName,
      args,
      description: `${decoded.errorName}(${args.map(formatValue).join(", ")})`
    }
  } catch {
    return { description: `execution reverted with unknown error ${data.slice(0, 10)}` }
  }
}

// ---------------------------------------------------------------------------------------------
// Logging

/** Every error the chain client fails with. */
export type ChainError = ChainUnavailable | ChainReverted | RpcRejected | BlockNotFound | ChainResultInvalid

export const isChainError = (error: unknown): error is ChainError =>
  error instanceof ChainUnavailable ||
  error instanceof ChainReverted ||
  error instanceof RpcRejected ||
  error instanceof BlockNotFound ||
  error instanceof ChainResultInvalid

/**
 * A chain error for a log line, from its classified fields only: the node's message, viem's text
 * (request URL, body, headers) and a revert's arguments (addresses, amounts) stay out. A transient
 * reason keeps its class (`no answer`, `HTTP 503`, `node error -32005`, `request timed out`).
 */
export const describeChainError = (error: ChainError): string => {
  switch (error._tag) {
    case "ChainUnavailable":
      return `ChainUnavailable: ${error.operation}: ${error.reason.split(":")[0]} after ${error.attempts} attempt(s)`
    case "RpcRejected":
      return `RpcRejected: ${error.operation}: ${error.code === undefined ? `HTTP ${error.httpStatus ?? "?"}` : `code ${error.code}`}, ${error.kind}`
    case "ChainReverted":
      return `ChainReverted: ${error.operation}: ${error.errorName ?? "unknown error"}`
    case "ChainResultInvalid":
      return `ChainResultInvalid: ${error.operation}`
    case "BlockNotFound":
      return error.message
  }
}

/** What a route answers when it needs the chain and the RPC does not answer: 503 `unavailable`. */
export const CHAIN_UNAVAILABLE = "the chain RPC is not answering"

/** The one mapping of a chain failure to the wire, for every route that needs the chain. */
export const chainUnavailable = (_?: unknown): Unavailable => new Unavailable({ message: CHAIN_UNAVAILABLE })
