/**
 * A paid handle lookup over x402 (docs/getting-started.md "Paid lookups"): a creator who knows
 * only a handle (`dev42` on microblog) buys its resolution to a user id, and gets the commitment
 * in the same answer. The payer is a stock x402 client: `@x402/core`'s `x402Client` and
 * `x402HTTPClient` with `@x402/evm`'s `exact` scheme, so nothing here signs by hand. The devnet's
 * attestor quotes the `permit2` transfer method those clients speak (docs/protocol.md §9, §10).
 *
 *   1. `GET /v1/info`: the lookup's price;
 *   2. `POST /v1/commitment` with the handle and no payment: 402 and the `PAYMENT-REQUIRED` quote;
 *   3. the payer (#6) approves Permit2 once (`@x402/evm`'s approval transaction);
 *   4. the client signs the quoted payment and the same request goes with `PAYMENT-SIGNATURE`: 200
 *      with the commitment, and `PAYMENT-RESPONSE` naming the settlement transaction;
 *   5. the same payment again is refused: it bought one lookup.
 *
 *   npx tsx examples/paid-lookup.ts
 */
import { x402Client, x402HTTPClient } from "@x402/core/client"
import type { PaymentRequired } from "@x402/core/types"
import {
  createPermit2ApprovalTx,
  getPermit2AllowanceReadParams,
  registerExactEvmScheme
} from "@x402/evm/exact/client"
import type { Address, Hex } from "viem"
import { testTokenAbi } from "../contracts/abi.js"
import {
  call,
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

runExample("paid-lookup", async () => {
  const file = loadDevnet()
  const { publicClient, wallet } = devnetClients(file)
  const { attestor } = await serviceClients(file)
  const payer = devnetAccount(PAYER)

  step("GET /v1/info: the lookup's mode and price")
  const info = await call("GET /v1/info", attestor.info.info())
  show("handleLookup", info.handleLookup)
  const price = info.handleLookup.price
  if (price === null) throw new Error("this attestor's lookups are not paid")

  // The stock client: the exact scheme for every EVM network, paying the devnet's test token (not
  // one of the library's default assets) up to the price /v1/info showed, and nothing more.
  const client = new x402Client()
  registerExactEvmScheme(client, { signer: payer })
  client.setSpendControls({
    allowedAssets: [
      { network: price.network, asset: price.asset, maxAmountPerPayment: price.amount.toString() }
    ]
  })
  const http = new x402HTTPClient(client)

  const lookup = (headers: Record<string, string> = {}) =>
    fetch(`${file.attestorUrl}/v1/commitment`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify({ platform: "microblog", handle: "dev42" })
    })

  step("POST /v1/commitment { platform: microblog, handle: dev42 } without payment")
  const challenged = await lookup()
  const body = await challenged.json()
  if (challenged.status !== 402)
    throw new Error(`expected 402, got ${challenged.status}: ${JSON.stringify(body)}`)
  show("status", `${challenged.status} ${JSON.stringify(body)}`)
  // docs/protocol.md §10 "Paid lookups": one `exact` option, paid with a Permit2 witness transfer.
  const paymentRequired: PaymentRequired = http.getPaymentRequiredResponse(
    (name) => challenged.headers.get(name),
    body
  )
  const [requirements] = paymentRequired.accepts
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
  const allowance = await publicClient.readContract(
    getPermit2AllowanceReadParams({ tokenAddress: asset, ownerAddress: payer.address })
  )
  if (allowance < amount)
    await mined(publicClient, await payerWallet.sendTransaction(createPermit2ApprovalTx(asset)))
  show("Permit2 allowance", "unlimited")

  step("The client signs the quoted payment; POST /v1/commitment again with PAYMENT-SIGNATURE")
  const payment = await http.createPaymentPayload(paymentRequired)
  show("payload", payment.payload)
  const paymentHeaders = http.encodePaymentSignatureHeader(payment)
  const paid = await lookup(paymentHeaders)
  if (paid.status !== 200) throw new Error(`the paid lookup answered ${paid.status}: ${await paid.text()}`)
  const commitment = (await paid.json()) as { userId: string; handleCommitment: Hex }
  show("userId of dev42", commitment.userId)
  show("handleCommitment", commitment.handleCommitment)
  const settlement = http.getPaymentSettleResponse((name) => paid.headers.get(name))
  show("PAYMENT-RESPONSE", settlement)
  await mined(publicClient, settlement.transaction as Hex)
  show("settlement", "mined: the price moved from the payer to payTo")

  step("The same PAYMENT-SIGNATURE again: it bought one lookup")
  const again = await lookup(paymentHeaders)
  if (again.status !== 402)
    throw new Error(`a payment used twice answered ${again.status}: ${await again.text()}`)
  show("status", `${again.status} ${JSON.stringify(await again.json())}`)
})
