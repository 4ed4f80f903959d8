/**
 * Stock x402 clients pay for lookups on the devnet in each transfer method of
 * `HANDLE_LOOKUP_TRANSFER_METHOD` (docs/protocol.md §9 "x402", §10 "Paid lookups"): an attestor
 * configured for the method, the facilitator stand-in settling with `@x402/evm`'s own scheme, and a
 * payer that is `@x402/core`'s `x402HTTPClient` with `@x402/evm`'s `exact` scheme (test/support/
 * x402StockClient.ts), nothing signed by hand. It pays for `dev42` on microblog, the settlement is
 * mined and moves exactly the price, and the same payment again is refused without a settlement.
 */

import { join } from "node:path"
import type { x402HTTPClient } from "@x402/core/client"
import type { PaymentRequired } from "@x402/core/types"
import { createPermit2ApprovalTx } from "@x402/evm/exact/client"
import { erc20Abi, type Hex, parseEventLogs, parseUnits } from "viem"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { testTokenAbi } from "../../contracts/abi.js"
import { devnetAccount, devnetClients } from "../../contracts/deploy.js"
import { X402_EXACT_PERMIT2_PROXY_ADDRESS } from "../../src/devnet/x402.js"
import { stockClient } from "../support/x402StockClient.js"
import { AttestorClient } from "./support/attestorClient.js"
import { VaultDevnet } from "./support/relayerDevnet.js"

const payTo = devnetAccount(0).address
const PRICE = parseUnits("0.01", 18)
const NETWORK = "eip155:31337"

let net: VaultDevnet

beforeAll(async () => {
  net = await VaultDevnet.start("attestor-stock-clients")
}, 300_000)

afterAll(async () => {
  await net?.dispose()
})

/** Mints to the payer and gives Permit2 its one-time approval with `@x402/evm`'s transaction. */
const fundAndApprove = async (index: number) => {
  const payer = devnetAccount(index)
  await net.send(index, {
    address: net.settlementAsset,
    abi: testTokenAbi,
    functionName: "mint",
    args: [payer.address, parseUnits("1", 18)]
  })
  const { publicClient, walletClient } = await devnetClients(net.rpcUrl, payer)
  const hash = await walletClient.sendTransaction(createPermit2ApprovalTx(net.settlementAsset) as never)
  expect((await publicClient.waitForTransactionReceipt({ hash })).status).toBe("success")
}

const lookup = (attestor: AttestorClient, headers: Record<string, string> = {}) =>
  fetch(`${attestor.url}/v1/commitment`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ platform: "microblog", handle: "dev42" })
  })

/** The 402's challenge as the stock client reads it. */
const challenge = async (attestor: AttestorClient, http: x402HTTPClient): Promise<PaymentRequired> => {
  const res = await lookup(attestor)
  expect(res.status).toBe(402)
  return http.getPaymentRequiredResponse((name) => res.headers.get(name), await res.json())
}

const settlementsOf = (attestor: AttestorClient) =>
  (attestor.facilitator?.received() ?? []).filter((r) => r.path === "/settle").length

/**
 * The stock client pays for dev42: 200 for user 42, a mined settlement through the proxy moving
 * exactly the price to payTo; the same payment again is 402 payment_failed, nothing settled.
 */
const paysOnceForDev42 = async (attestor: AttestorClient, http: x402HTTPClient, payerIndex: number) => {
  const payer = devnetAccount(payerIndex).address
  const paymentRequired = await challenge(attestor, http)
  const payment = await http.createPaymentPayload(paymentRequired)
  const headers = http.encodePaymentSignatureHeader(payment)
  const payerBefore = await net.tokenBalance(net.settlementAsset, payer)
  const payToBefore = await net.tokenBalance(net.settlementAsset, payTo)

  const paid = await lookup(attestor, headers)
  expect(paid.status).toBe(200)
  expect(await paid.json()).toMatchObject({ platform: "microblog", userId: "42" })
  const settled = http.getPaymentSettleResponse((name) => paid.headers.get(name))
  expect(settled).toMatchObject({ success: true, network: NETWORK })
  expect(settled.payer?.toLowerCase()).toBe(payer.toLowerCase())
  const receipt = await net.publicClient().getTransactionReceipt({ hash: settled.transaction as Hex })
  expect(receipt.status).toBe("success")
  expect(receipt.to).toBe(X402_EXACT_PERMIT2_PROXY_ADDRESS.toLowerCase())
  const transfers = parseEventLogs({ abi: erc20Abi, eventName: "Transfer", logs: receipt.logs })
  expect(transfers.map((t) => t.args)).toEqual([{ from: payer, to: payTo, value: PRICE }])
  expect(await net.tokenBalance(net.settlementAsset, payer)).toBe(payerBefore - PRICE)
  expect(await net.tokenBalance(net.settlementAsset, payTo)).toBe(payToBefore + PRICE)

  const settlements = settlementsOf(attestor)
  const again = await lookup(attestor, headers)
  expect(again.status).toBe(402)
  expect(await again.json()).toMatchObject({ code: "payment_failed" })
  expect(settlementsOf(attestor)).toBe(settlements)
  expect(await net.tokenBalance(net.settlementAsset, payer)).toBe(payerBefore - PRICE)
}

const attestorFor = (method: "permit2-exact" | "permit2") =>
  AttestorClient.start(
    net,
    { HANDLE_LOOKUP_TRANSFER_METHOD: method, DATA_DIR: join(net.chain.dir, "data", `attestor-${method}`) },
    { standIns: true, facilitator: true }
  )

describe("HANDLE_LOOKUP_TRANSFER_METHOD=permit2", () => {
  const PAYER = 6
  let attestor: AttestorClient
  beforeAll(async () => {
    attestor = await attestorFor("permit2")
    await fundAndApprove(PAYER)
  }, 300_000)
  afterAll(async () => {
    await attestor?.stop()
  })

  const http = () =>
    stockClient({
      signer: devnetAccount(PAYER),
      network: NETWORK,
      asset: net.settlementAsset,
      maxAmount: PRICE,
      scheme: "stock"
    })

  it("quotes @x402/evm's exact requirements, and /v1/info names the method", async () => {
    const { accepts } = await challenge(attestor, http())
    expect(accepts).toEqual([
      {
        scheme: "exact",
        network: NETWORK,
        asset: net.settlementAsset,
        amount: PRICE.toString(),
        payTo,
        maxTimeoutSeconds: 300,
        extra: { assetTransferMethod: "permit2", name: expect.any(String), version: "1" }
      }
    ])
    const info = (await (await fetch(`${attestor.url}/v1/info`)).json()) as {
      handleLookup: { price: { assetTransferMethod: string } }
    }
    expect(info.handleLookup.price.assetTransferMethod).toBe("permit2")
  })

  it("a stock client pays for dev42 once: settled on chain, the same payment again refused", {
    timeout: 60_000
  }, async () => {
    await paysOnceForDev42(attestor, http(), PAYER)
  })

  it("the facilitator is sent the quote and the Permit2 authorization to the canonical proxy, nothing else", async () => {
    const verify = attestor.facilitator?.received().find((r) => r.path === "/verify")
    const body = verify?.body as {
      paymentRequirements: unknown
      paymentPayload: { payload: Record<string, unknown>; extensions?: unknown }
    }
    expect(body.paymentRequirements).toEqual((await challenge(attestor, http())).accepts[0])
    expect(Object.keys(body.paymentPayload.payload).sort()).toEqual(["permit2Authorization", "signature"])
    expect(body.paymentPayload.payload.permit2Authorization).toMatchObject({
      spender: X402_EXACT_PERMIT2_PROXY_ADDRESS
    })
    expect(body.paymentPayload.extensions).toBeUndefined()
  })
})

describe("HANDLE_LOOKUP_TRANSFER_METHOD=permit2-exact (the default)", () => {
  const PAYER = 7
  let attestor: AttestorClient
  beforeAll(async () => {
    attestor = await attestorFor("permit2-exact")
    await fundAndApprove(PAYER)
  }, 300_000)
  afterAll(async () => {
    await attestor?.stop()
  })

  const http = (scheme: "stock" | "permit2-exact") =>
    stockClient({
      signer: devnetAccount(PAYER),
      network: NETWORK,
      asset: net.settlementAsset,
      maxAmount: PRICE,
      scheme
    })

  it("the stock scheme as is signs EIP-3009 for permit2-exact: refused before the facilitator", async () => {
    const client = http("stock")
    const payment = await client.createPaymentPayload(await challenge(attestor, client))
    expect(payment.payload).toHaveProperty("authorization")
    const asked = attestor.facilitator?.received().length
    const res = await lookup(attestor, client.encodePaymentSignatureHeader(payment))
    expect(res.status).toBe(402)
    expect(await res.json()).toMatchObject({ code: "payment_failed" })
    expect(attestor.facilitator?.received().length).toBe(asked)
  })

  it("the library's scheme, given the quote's spender (the canonical proxy), pays for dev42 once", {
    timeout: 60_000
  }, async () => {
    const client = http("permit2-exact")
    expect((await challenge(attestor, client)).accepts[0]?.extra).toMatchObject({
      assetTransferMethod: "permit2-exact",
      spenderAddress: X402_EXACT_PERMIT2_PROXY_ADDRESS
    })
    await paysOnceForDev42(attestor, client, PAYER)
  })
})
