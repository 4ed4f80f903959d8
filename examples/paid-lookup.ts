/**
 * A paid handle lookup over x402 (docs/getting-started.md "Paid lookups"): a creator who knows
 * only a handle (`dev42` on microblog) buys its resolution to a user id, and gets the commitment
 * in the same answer.
 *
 *   1. `GET /v1/info`: the lookup's price;
 *   2. `POST /v1/commitment` with the handle and no payment: 402 and the `PAYMENT-REQUIRED` quote;
 *   3. the payer (#6) approves Permit2 once and signs a Permit2 witness transfer of the price;
 *   4. the same request with `PAYMENT-SIGNATURE`: 200 with the commitment, and `PAYMENT-RESPONSE`
 *      naming the settlement transaction.
 *
 * Plain `fetch` here: the payment travels in headers of the 402 and 200 answers.
 *
 *   npx tsx examples/paid-lookup.ts
 */
import { randomBytes } from "node:crypto"
import {
  decodePaymentRequiredHeader,
  decodePaymentResponseHeader,
  encodePaymentSignatureHeader
} from "@x402/core/http"
import type { Address, Hex } from "viem"
import { maxUint256 } from "viem"
import { testTokenAbi } from "../contracts/abi.js"
import { permit2Domain, permit2WitnessTypes } from "../schema/eip712.js"
import {
  call,
  chainClockLead,
  devnetAccount,
  devnetClients,
  loadDevnet,
  mined,
  runExample,
  serviceClients,
  show,
  step
} from "./lib/devnet.js"

/** The payer: a devnet account of its own, so examples never share a nonce. */
const PAYER = 6
/** Permit2's canonical address (docs/protocol.md §9 "x402"). */
const PERMIT2: Address = "0x000000000022D473030F116dDEE9F6B43aC78BA3"

runExample("paid-lookup", async () => {
  const file = loadDevnet()
  const { publicClient, wallet } = devnetClients(file)
  const { attestor } = await serviceClients(file)
  const payer = devnetAccount(PAYER)

  // Permit2 checks the deadline against the chain's clock, the facilitator against this machine's.
  const lead = await chainClockLead(publicClient)
  if (lead > 120)
    throw new Error(
      `the chain's clock is ${lead} s ahead of this machine's (a bind's timelock was skipped on this devnet): restart \`npm run devnet\` to run this example`
    )

  step("GET /v1/info: the lookup's mode and price")
  const info = await call("GET /v1/info", attestor.info.info())
  show("handleLookup", info.handleLookup)

  const lookup = (paymentSignature?: string) =>
    fetch(`${file.attestorUrl}/v1/commitment`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        ...(paymentSignature === undefined ? {} : { "payment-signature": paymentSignature })
      },
      body: JSON.stringify({ platform: "microblog", handle: "dev42" })
    })

  step("POST /v1/commitment { platform: microblog, handle: dev42 } without payment")
  const challenged = await lookup()
  const header = challenged.headers.get("payment-required")
  if (challenged.status !== 402 || header === null)
    throw new Error(
      `expected 402 with PAYMENT-REQUIRED, got ${challenged.status}: ${await challenged.text()}`
    )
  show("status", `${challenged.status} ${JSON.stringify(await challenged.json())}`)
  // docs/protocol.md §10 "Paid lookups": one `exact` option, paid with a Permit2 witness transfer.
  const [requirements] = decodePaymentRequiredHeader(header).accepts
  if (requirements === undefined) throw new Error("the 402 quotes no payment option")
  show("accepts[0]", requirements)

  step("Fund the payer (#6) and approve Permit2 once")
  const payerWallet = wallet(payer)
  const asset = requirements.asset as Address
  const amount = BigInt(requirements.amount)
  await mined(
    publicClient,
    await payerWallet.writeContract({
      address: asset,
      abi: testTokenAbi,
      functionName: "mint",
      args: [payer.address, amount]
    })
  )
  const allowance = await publicClient.readContract({
    address: asset,
    abi: testTokenAbi,
    functionName: "allowance",
    args: [payer.address, PERMIT2]
  })
  if (allowance < amount)
    await mined(
      publicClient,
      await payerWallet.writeContract({
        address: asset,
        abi: testTokenAbi,
        functionName: "approve",
        args: [PERMIT2, maxUint256]
      })
    )
  show("Permit2 allowance", "unlimited")

  step("Sign a Permit2 PermitWitnessTransferFrom of exactly the price to payTo")
  const spender = requirements.extra?.spenderAddress as Address
  const now = Math.floor(Date.now() / 1000)
  const authorization = {
    from: payer.address,
    permitted: { token: asset, amount: amount.toString() },
    spender,
    // Permit2 nonces are unordered: any unused number.
    nonce: BigInt(`0x${randomBytes(31).toString("hex")}`).toString(),
    deadline: String(now + requirements.maxTimeoutSeconds),
    witness: { to: requirements.payTo as Address, validAfter: String(now - 60) }
  }
  const signature: Hex = await payer.signTypedData({
    domain: permit2Domain(file.chainId, PERMIT2),
    types: permit2WitnessTypes,
    primaryType: "PermitWitnessTransferFrom",
    message: {
      permitted: { token: asset, amount },
      spender,
      nonce: BigInt(authorization.nonce),
      deadline: BigInt(authorization.deadline),
      witness: { to: authorization.witness.to, validAfter: BigInt(authorization.witness.validAfter) }
    }
  })
  show("signature", signature)

  step("POST /v1/commitment again with PAYMENT-SIGNATURE")
  const paid = await lookup(
    encodePaymentSignatureHeader({
      x402Version: 2,
      accepted: requirements,
      payload: { signature, permit2Authorization: authorization }
    })
  )
  if (paid.status !== 200) throw new Error(`the paid lookup answered ${paid.status}: ${await paid.text()}`)
  const commitment = (await paid.json()) as { userId: string; handleCommitment: Hex }
  show("userId of dev42", commitment.userId)
  show("handleCommitment", commitment.handleCommitment)
  const response = paid.headers.get("payment-response")
  if (response === null) throw new Error("the paid answer has no PAYMENT-RESPONSE")
  const settlement = decodePaymentResponseHeader(response)
  show("PAYMENT-RESPONSE", settlement)
  await mined(publicClient, settlement.transaction as Hex)
  show("settlement", "mined: the price moved from the payer to payTo")
})
