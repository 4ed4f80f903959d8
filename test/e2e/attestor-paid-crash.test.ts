/**
 * A paid lookup across a crash (docs/attestor.md §4 "Paid handle lookup flow", replay): the attestor
 * runs as its own process in paid mode against the devnet's facilitator stand-in; the stand-in
 * settles the payment on chain and holds its answer, and the attestor is killed with SIGKILL before
 * it hears of it. Started again on the same data, the same `PAYMENT-SIGNATURE` gets the answer kept
 * before the settlement: the settlement is found on chain, nothing is settled again, the payer is
 * charged once.
 */
import {
  decodePaymentRequiredHeader,
  decodePaymentResponseHeader,
  encodePaymentSignatureHeader
} from "@x402/core/http"
import { Effect, Exit, Scope } from "effect"
import { erc20Abi, type Hex, maxUint256, parseUnits } from "viem"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { testTokenAbi } from "../../contracts/abi.js"
import { devnetAccount } from "../../contracts/deploy.js"
import {
  attestorEnv,
  devnetFacilitator,
  devnetStandIns,
  freeLoopbackPort,
  paidLookupEnv,
  standInEnv,
  writeDevnetFile
} from "../../layers/devnet.js"
import { type FacilitatorStandIn, PERMIT2_ADDRESS } from "../../src/devnet/x402.js"
import { type ServiceProcess, startService } from "../support/process.js"
import { signPermit2Payment } from "../support/x402Payer.js"
import { VaultDevnet } from "./support/relayerDevnet.js"

const PAYER_INDEX = 6
const payer = devnetAccount(PAYER_INDEX)
const payTo = devnetAccount(0).address
const PRICE = parseUnits("0.01", 18)

let net: VaultDevnet
let scope: Scope.CloseableScope
let facilitator: FacilitatorStandIn
let env: Record<string, string>
const running: Array<ServiceProcess> = []

beforeAll(async () => {
  net = await VaultDevnet.start("attestor-paid-crash")
  scope = await Effect.runPromise(Scope.make())
  facilitator = await Effect.runPromise(Scope.extend(devnetFacilitator(net.chain), scope))
  const port = await Effect.runPromise(freeLoopbackPort)
  // The deployment file the attestor reads, as the devnet writes it.
  await Effect.runPromise(
    writeDevnetFile(net.chain, {
      relayerUrl: "http://127.0.0.1:1",
      attestorUrl: `http://127.0.0.1:${port}`,
      facilitatorUrl: facilitator.url
    })
  )
  const url = `http://127.0.0.1:${port}`
  // The platforms' directories (microblog's is where dev42 is user 42), as the devnet runs them.
  const standIns = await Effect.runPromise(Scope.extend(devnetStandIns([{ member: 1, url }]), scope))
  env = {
    ...attestorEnv(net.chain, port),
    ...standInEnv(standIns, url),
    ...paidLookupEnv(net.chain, facilitator.url),
    RATE_LIMIT_BURST: "1000",
    RATE_LIMIT_PER_MINUTE: "1000"
  }
  await net.send(PAYER_INDEX, {
    address: net.settlementAsset,
    abi: testTokenAbi,
    functionName: "mint",
    args: [payer.address, parseUnits("1", 18)]
  })
  await net.send(PAYER_INDEX, {
    address: net.settlementAsset,
    abi: erc20Abi,
    functionName: "approve",
    args: [PERMIT2_ADDRESS, maxUint256]
  })
}, 300_000)

afterAll(async () => {
  for (const service of running) await service.stop()
  if (scope !== undefined) await Effect.runPromise(Scope.close(scope, Exit.void))
  await net?.dispose()
})

const started = async (): Promise<string> => {
  const service = startService("attestor", env)
  running.push(service)
  return service.url()
}

const post = (url: string, paymentSignature?: string) =>
  fetch(`${url}/v1/commitment`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(paymentSignature === undefined ? {} : { "payment-signature": paymentSignature })
    },
    body: JSON.stringify({ platform: "microblog", handle: "dev42" })
  })

/**
 * A retry as a client makes it: while the payer's payment is still settling (or the lease of an
 * attestor that stopped has not lapsed), 429 `rate_limited` says when to ask again.
 */
const untilNotRateLimited = async (send: () => Promise<Response>): Promise<Response> => {
  for (;;) {
    const res = await send()
    if (res.status !== 429) return res
    const seconds = Number(res.headers.get("retry-after") ?? "1")
    await new Promise((resolve) => setTimeout(resolve, Math.max(seconds, 1) * 1000))
  }
}

const balance = (address: `0x${string}`) => net.tokenBalance(net.settlementAsset, address)

describe("a paid lookup across a kill -9", () => {
  it("killed between settlement and answer, started again: the retry gets the commitment, one settlement on chain, the payer charged once", {
    timeout: 240_000
  }, async () => {
    const first = await started()
    const challenge = (await post(first)).headers.get("payment-required") ?? ""
    const [requirements] = decodePaymentRequiredHeader(challenge).accepts
    if (requirements === undefined) throw new Error("no accepts entry")
    const signature = encodePaymentSignatureHeader(
      // The payment-identifier id is the payer's secret a replay shows (docs/protocol.md §10).
      await signPermit2Payment(payer, requirements, { paymentId: "crash-test-payment-0001" })
    )
    const before = { payer: await balance(payer.address), payTo: await balance(payTo) }

    const held = facilitator.holdSettlementAnswers()
    const lost = post(first, signature).catch((error: unknown) => error)
    await held.settled
    // Settled on chain; the attestor has not heard of it. Killed now, it never answers.
    const victim = running[0]
    if (victim === undefined) throw new Error("no attestor")
    victim.child.kill("SIGKILL")
    await victim.exited
    expect(await lost).toBeInstanceOf(Error)
    held.release()

    const second = await started()
    const retried = await untilNotRateLimited(() => post(second, signature))
    expect(retried.status).toBe(200)
    const body = (await retried.json()) as { userId: string; handleCommitment: Hex }
    expect(body.userId).toBe("42")
    const response = decodePaymentResponseHeader(retried.headers.get("payment-response") ?? "")
    expect(response).toMatchObject({ success: true, network: "eip155:31337" })
    expect(response.payer?.toLowerCase()).toBe(payer.address.toLowerCase())
    const receipt = await net.publicClient().getTransactionReceipt({ hash: response.transaction as Hex })
    expect(receipt.status).toBe("success")

    const again = await post(second, signature)
    expect(await again.json()).toEqual(body)
    expect(again.headers.get("payment-response")).toBe(retried.headers.get("payment-response"))
    expect(facilitator.received().filter((r) => r.path === "/settle")).toHaveLength(1)
    expect(await balance(payer.address)).toBe(before.payer - PRICE)
    expect(await balance(payTo)).toBe(before.payTo + PRICE)
  })
})
