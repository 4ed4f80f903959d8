import { describe, expect, it } from "@effect/vitest"
import {
  encodeErrorResult,
  HttpRequestError,
  InternalRpcError,
  LimitExceededRpcError,
  parseAbi,
  ResponseBodyTooLargeError,
  RpcRequestError,
  TimeoutError,
  TransactionRejectedRpcError
} from "viem"
import { feeVaultAbi } from "../../contracts/abi.js"
import {
  classifyRpcError,
  decodeRevert,
  interpretFailure,
  isAlreadyKnown,
  RpcRejected
} from "../../src/chain/errors.js"

const url = "http://127.0.0.1:1"
const body = { method: "eth_call", params: [] }
const rpcError = (code: number, message: string, extra?: { data?: unknown; status?: number }) =>
  new RpcRequestError({
    body,
    url,
    error: { code, message, ...(extra?.data === undefined ? {} : { data: extra.data }) },
    ...(extra?.status === undefined ? {} : { status: extra.status })
  })

describe("classifyRpcError", () => {
  it.each([
    ["nonce too low", "nonce_too_low"],
    ["Nonce too low. Expected nonce to be 5 but got 3.", "nonce_too_low"],
    ["OldNonce", "nonce_too_low"],
    ["nonce too high", "nonce_too_high"],
    ["replacement transaction underpriced", "underpriced"],
    ["transaction underpriced", "underpriced"],
    ["max fee per gas less than block base fee", "underpriced"],
    ["insufficient funds for gas * price + value", "insufficient_funds"],
    ["Insufficient funds for gas * price + value", "insufficient_funds"],
    ["query returned more than 10000 results", "range_too_large"],
    [
      "Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range",
      "range_too_large"
    ],
    ["block range is too wide", "range_too_large"],
    ["exceed maximum block range: 5000", "range_too_large"],
    ["query exceeds max results 20000, retry with the range 1-100", "range_too_large"],
    ["eth_getLogs is limited to a 10,000 range", "range_too_large"],
    ["invalid block range params", "other"],
    ["method not found", "other"]
  ] as const)("%s → %s", (message, kind) => {
    expect(classifyRpcError({ message })).toBe(kind)
  })

  it("reads the node's message out of viem's wrapped errors and out of RpcRejected", () => {
    const wrapped = new TransactionRejectedRpcError(rpcError(-32003, "nonce too low"))
    expect(classifyRpcError(wrapped)).toBe("nonce_too_low")
    const rejected = new RpcRejected({
      operation: "eth_sendRawTransaction",
      code: -32000,
      httpStatus: undefined,
      rpcMessage: "replacement transaction underpriced",
      kind: "underpriced",
      cause: undefined
    })
    expect(classifyRpcError(rejected)).toBe("underpriced")
    expect(classifyRpcError(new ResponseBodyTooLargeError({ maxSize: 1, size: 2 }))).toBe("range_too_large")
    expect(classifyRpcError("not an error")).toBe("other")
  })
})

describe("interpretFailure", () => {
  it("treats timeouts, lost connections, 5xx and 429 as transient", () => {
    expect(interpretFailure(new TimeoutError({ body, url }))._tag).toBe("Transient")
    expect(
      interpretFailure(new HttpRequestError({ body, url, cause: new Error("other side closed") }))._tag
    ).toBe("Transient")
    for (const status of [429, 500, 502, 503, 504])
      expect(interpretFailure(new HttpRequestError({ body, url, status }))._tag).toBe("Transient")
  })

  it("treats other HTTP statuses as rejections", () => {
    expect(interpretFailure(new HttpRequestError({ body, url, status: 403, details: "forbidden" }))).toEqual({
      _tag: "Rejected",
      code: undefined,
      httpStatus: 403,
      message: "forbidden"
    })
  })

  it("tells reverts from rejections and transient node errors", () => {
    expect(interpretFailure(rpcError(3, "execution reverted", { data: "0x1234567890" }))).toEqual({
      _tag: "Reverted",
      data: "0x1234567890",
      nodeMessage: "execution reverted"
    })
    // Hardhat-style: internal error code carrying revert data, nested one level.
    expect(
      interpretFailure(
        new InternalRpcError(rpcError(-32603, "Error: VM Exception", { data: { data: "0xdeadbeef00" } }))
      )
    ).toMatchObject({ _tag: "Reverted", data: "0xdeadbeef00" })
    expect(interpretFailure(rpcError(-32000, "execution reverted"))).toMatchObject({
      _tag: "Reverted",
      data: "0x"
    })
    expect(interpretFailure(rpcError(-32003, "nonce too low"))).toEqual({
      _tag: "Rejected",
      code: -32003,
      httpStatus: undefined,
      message: "nonce too low"
    })
    expect(
      interpretFailure(new LimitExceededRpcError(rpcError(-32005, "query returned more than 10000 results")))
    ).toMatchObject({ _tag: "Rejected", code: -32005 })
    expect(
      interpretFailure(new LimitExceededRpcError(rpcError(-32005, "daily request count exceeded")))._tag
    ).toBe("Transient")
    expect(interpretFailure(rpcError(-32005, "rate limited"))._tag).toBe("Transient")
    expect(interpretFailure(rpcError(-32603, "internal error"))._tag).toBe("Transient")
    expect(interpretFailure(rpcError(-32000, "header not found"))._tag).toBe("Transient")
    expect(interpretFailure(rpcError(-32000, "some refusal", { status: 503 }))._tag).toBe("Transient")
  })

  it("leaves errors that did not come from the node or the network to the caller", () => {
    expect(interpretFailure(new TypeError("bad argument"))).toEqual({ _tag: "Unknown" })
  })

  it("recognises a transaction the node already has", () => {
    expect(isAlreadyKnown(rpcError(-32000, "already known"))).toBe(true)
    expect(
      isAlreadyKnown(new TransactionRejectedRpcError(rpcError(-32003, "transaction already imported")))
    ).toBe(true)
    expect(isAlreadyKnown(rpcError(-32000, "nonce too low"))).toBe(false)
  })
})

describe("decodeRevert", () => {
  it("names the vault's custom errors with their arguments", () => {
    const data = encodeErrorResult({ abi: feeVaultAbi, errorName: "FeeAboveAmount", args: [100n, 250n] })
    expect(decodeRevert(data, [feeVaultAbi])).toEqual({
      errorName: "FeeAboveAmount",
      args: [100n, 250n],
      description: "FeeAboveAmount(100, 250)"
    })
    const none = encodeErrorResult({ abi: feeVaultAbi, errorName: "DataHashMismatch" })
    expect(decodeRevert(none, [feeVaultAbi]).description).toBe("DataHashMismatch()")
  })

  it("looks through several ABIs and always knows Error(string) and Panic(uint256)", () => {
    const other = parseAbi([
      "error Nope(uint256 code)",
      "error Named(address who, string why, bytes32[] ids)"
    ])
    const named = encodeErrorResult({
      abi: other,
      errorName: "Named",
      args: ["0x0000000000000000000000000000000000000001", "bad", [`0x${"00".repeat(31)}01`]]
    })
    expect(decodeRevert(named, [feeVaultAbi, other]).description).toBe(
      `Named(0x0000000000000000000000000000000000000001, "bad", [0x${"00".repeat(31)}01])`
    )
    const reason = encodeErrorResult({
      abi: parseAbi(["error Error(string)"]),
      errorName: "Error",
      args: ["too late"]
    })
    expect(decodeRevert(reason, [])).toEqual({
      errorName: "Error",
      args: ["too late"],
      reason: "too late",
      description: 'Error("too late")'
    })
    const panic = encodeErrorResult({
      abi: parseAbi(["error Panic(uint256)"]),
      errorName: "Panic",
      args: [0x11n]
    })
    expect(decodeRevert(panic, []).description).toBe("Panic(0x11: arithmetic underflow or overflow)")
  })

  it("falls back to the selector or the node's message", () => {
    expect(decodeRevert("0x12345678", [feeVaultAbi]).description).toBe(
      "execution reverted with unknown error 0x12345678"
    )
    expect(decodeRevert("0x", [], "execution reverted")).toEqual({ description: "execution reverted" })
    expect(decodeRevert("0x", [])).toEqual({ description: "execution reverted without data" })
  })
})
