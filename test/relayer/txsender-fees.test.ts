/**
 * Fee rules of the sender: estimates under the cap, replacements at least 12.5% higher in both
 * fields, none when the cap forbids it; and what a failed submission looks like to a client.
 */
import { Effect, Exit, Option } from "effect"
import { describe, expect, it } from "vitest"
import { Unavailable } from "../../schema/errors.js"
import { bumped, initialFees, replacementFees } from "../../src/txsender/fees.js"
import {
  HotKeyUnderfunded,
  SendUnavailable,
  TxRejected,
  TxSender,
  txSubmitErrorToApi
} from "../../src/txsender/TxSender.js"

const fees = (maxFeePerGas: bigint, maxPriorityFeePerGas: bigint) => ({ maxFeePerGas, maxPriorityFeePerGas })

describe("fees", () => {
  it("bumps by 12.5% rounded up, and by at least 1 wei", () => {
    expect(bumped(1000n)).toBe(1125n)
    expect(bumped(1001n)).toBe(1127n)
    expect(bumped(0n)).toBe(1n)
    expect(bumped(1n)).toBe(2n)
    for (const value of [7n, 999_999_999n, 30_000_000_000n])
      expect(bumped(value) * 1000n >= value * 1125n).toBe(true)
  })

  it("takes the estimate under the cap, the tip never above the fee cap", () => {
    expect(initialFees(fees(20n, 2n), 100n)).toEqual(fees(20n, 2n))
    expect(initialFees(fees(200n, 2n), 100n)).toEqual(fees(100n, 2n))
    expect(initialFees(fees(200n, 150n), 100n)).toEqual(fees(100n, 100n))
  })

  it("replaces with the estimate or the minimum bump, whichever is higher, within the cap", () => {
    expect(replacementFees(fees(100n, 10n), fees(50n, 5n), 1_000n)).toEqual(Option.some(fees(113n, 12n)))
    expect(replacementFees(fees(100n, 10n), fees(400n, 30n), 1_000n)).toEqual(Option.some(fees(400n, 30n)))
    expect(replacementFees(fees(100n, 10n), fees(400n, 30n), 200n)).toEqual(Option.some(fees(200n, 30n)))
    expect(replacementFees(fees(100n, 10n), fees(50n, 5n), 112n)).toEqual(Option.none())
  })
})

describe("submission errors", () => {
  it("all become 503 unavailable, with nothing internal in the message", () => {
    for (const error of [
      new HotKeyUnderfunded(),
      new TxRejected(),
      new SendUnavailable({ reason: "chain" }),
      new SendUnavailable({ reason: "lock" })
    ]) {
      const api = txSubmitErrorToApi(error)
      expect(api).toBeInstanceOf(Unavailable)
      expect(api.message).not.toMatch(/0x/)
    }
  })

  it("the test layer dies on an operation a test did not stub", async () => {
    const exit = await Effect.runPromiseExit(
      Effect.flatMap(TxSender, (sender) => sender.status("0x00")).pipe(Effect.provide(TxSender.test({})))
    )
    expect(Exit.isFailure(exit) && String(exit.cause)).toContain("TxSender.status not stubbed")
  })
})
