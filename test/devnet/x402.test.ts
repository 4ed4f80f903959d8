/**
 * The devnet's x402 stand-ins (src/devnet/x402.ts, docs/protocol.md §9 "x402", §10 "Paid lookups"): Permit2
 * and the exact-Permit2 proxy at their canonical addresses on anvil, and the facilitator driven
 * through `@x402/core`'s `HTTPFacilitatorClient` with a real Permit2 witness signature: what
 * `/supported` announces (both transfer methods, or the ones it is told), verification, a
 * settlement that moves exactly the amount on chain, a replay and a wrong amount refused, a stock
 * `@x402/evm` client's `permit2` payment settled by the library's own scheme, the faults, and the
 * scoped Effect flavour.
 */

import { HTTPFacilitatorClient } from "@x402/core/http"
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types"
import { Effect, Exit, Scope } from "effect"
import {
  type Address,
  createPublicClient,
  erc20Abi,
  type Hex,
  hashDomain,
  http,
  maxUint256,
  type PublicClient,
  parseUnits
} from "viem"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { testTokenAbi, x402ExactPermit2ProxyAbi } from "../../contracts/abi.js"
import { loadArtifacts } from "../../contracts/build.js"
import { type ChainTarget, devnetAccount, devnetClients } from "../../contracts/deploy.js"
import { lookupRequirements } from "../../src/attestor/lookups/payments/x402.js"
import { type AnvilInstance, startAnvil } from "../../src/chain/anvil.js"
import {
  type FacilitatorStandIn,
  facilitatorStandIn,
  installX402Contracts,
  PERMIT2_ADDRESS,
  permit2DomainSeparator,
  startFacilitatorStandIn,
  X402_EXACT_PERMIT2_PROXY_ADDRESS
} from "../../src/devnet/x402.js"
import { signPermit2Payment, stockClientPayment } from "../support/x402Payer.js"

const admin = devnetAccount(0)
const payer = devnetAccount(4)
const adminKey = (): Hex => {
  const key = admin.getHdKey().privateKey
  if (key === null) throw new Error("no key for account #0")
  return `0x${Buffer.from(key).toString("hex")}`
}

const PRICE = parseUnits("0.01", 18)

const scope = Effect.runSync(Scope.make())
let anvil: AnvilInstance
let chainId: number
let publicClient: PublicClient
let adminChain: ChainTarget
let payerChain: ChainTarget
let token: Address
let requirements: PaymentRequirements
let facilitator: FacilitatorStandIn
let client: HTTPFacilitatorClient

const balanceOf = (owner: Address) =>
  publicClient.readContract({ address: token, abi: erc20Abi, functionName: "balanceOf", args: [owner] })

/** A `PAYMENT-SIGNATURE` payload as a client makes it, for `amount` to `to` (default: the quote). */
const signPayment = async (
  overrides: { amount?: bigint; to?: Address; signedTo?: Address } = {}
): Promise<PaymentPayload> => ({
  ...(await signPermit2Payment(payer, requirements, overrides)),
  resource: { url: "http://127.0.0.1:9/v1/commitment", description: "a lookup", mimeType: "application/json" }
})

beforeAll(async () => {
  anvil = await Effect.runPromise(Scope.extend(startAnvil(), scope))
  publicClient = createPublicClient({ transport: http(anvil.rpcUrl) })
  chainId = await publicClient.getChainId()
  adminChain = await devnetClients(anvil.rpcUrl, admin)
  payerChain = await devnetClients(anvil.rpcUrl, payer)

  const artifacts = await loadArtifacts()
  const deployHash = await adminChain.walletClient.deployContract({
    abi: testTokenAbi,
    bytecode: artifacts.TestToken.bytecode,
    args: ["Tether USD (test)", "USDT", 18]
  })
  const deployed = await publicClient.waitForTransactionReceipt({ hash: deployHash })
  if (deployed.contractAddress == null) throw new Error("the test token was not deployed")
  token = deployed.contractAddress
  const send = async (target: ChainTarget, hash: Promise<Hex>) => {
    const receipt = await target.publicClient.waitForTransactionReceipt({ hash: await hash })
    if (receipt.status !== "success") throw new Error("setup transaction reverted")
  }
  await send(
    payerChain,
    payerChain.walletClient.writeContract({
      address: token,
      abi: testTokenAbi,
      functionName: "mint",
      args: [payer.address, parseUnits("10", 18)]
    })
  )

  await installX402Contracts(anvil.rpcUrl)
  // The one-time approval a payer gives Permit2 (docs/attestor.md §4 "Paid handle lookup flow").
  await send(
    payerChain,
    payerChain.walletClient.writeContract({
      address: token,
      abi: erc20Abi,
      functionName: "approve",
      args: [PERMIT2_ADDRESS, maxUint256]
    })
  )

  facilitator = await startFacilitatorStandIn({ rpcUrl: anvil.rpcUrl, privateKey: adminKey() })
  client = new HTTPFacilitatorClient({ url: facilitator.url, timeoutMs: 10_000 })
  requirements = lookupRequirements({
    chainId,
    asset: token,
    assetName: "Tether USD (test)",
    assetVersion: "1",
    amount: PRICE,
    payTo: admin.address,
    maxTimeoutSeconds: 60,
    signerAddress: facilitator.signerAddress,
    spenderAddress: X402_EXACT_PERMIT2_PROXY_ADDRESS
  })
})

afterAll(async () => {
  await facilitator?.close()
  await Effect.runPromise(Scope.close(scope, Exit.void))
})

afterEach(() => {
  facilitator?.setFault(undefined)
})

describe("the x402 contracts", () => {
  it("puts Permit2 at its canonical address with this chain's domain separator", async () => {
    const separator = await publicClient.readContract({
      address: PERMIT2_ADDRESS,
      abi: [
        {
          type: "function",
          name: "DOMAIN_SEPARATOR",
          inputs: [],
          outputs: [{ type: "bytes32" }],
          stateMutability: "view"
        }
      ] as const,
      functionName: "DOMAIN_SEPARATOR"
    })
    expect(separator).toBe(permit2DomainSeparator(chainId))
    // The separator a client's signTypedData uses for the same domain.
    expect(separator).toBe(
      hashDomain({
        domain: { name: "Permit2", chainId: BigInt(chainId), verifyingContract: PERMIT2_ADDRESS },
        types: {
          EIP712Domain: [
            { name: "name", type: "string" },
            { name: "chainId", type: "uint256" },
            { name: "verifyingContract", type: "address" }
          ]
        }
      })
    )
  })

  it("puts the exact-Permit2 proxy at its canonical address, naming Permit2 and the witness type", async () => {
    const read = <F extends "PERMIT2" | "WITNESS_TYPE_STRING">(functionName: F) =>
      publicClient.readContract({
        address: X402_EXACT_PERMIT2_PROXY_ADDRESS,
        abi: x402ExactPermit2ProxyAbi,
        functionName
      })
    expect(await read("PERMIT2")).toBe(PERMIT2_ADDRESS)
    expect(await read("WITNESS_TYPE_STRING")).toBe(
      "Witness witness)TokenPermissions(address token,uint256 amount)Witness(address to,uint256 validAfter)"
    )
  })
})

describe("the facilitator stand-in", () => {
  it("announces exact on this chain with the permit2-exact extra, its signer and the proxy, and as the library does", async () => {
    const supported = await client.getSupported()
    expect(supported.kinds).toEqual([
      {
        x402Version: 2,
        scheme: "exact",
        network: `eip155:${chainId}`,
        extra: {
          assetTransferMethod: "permit2-exact",
          signerAddress: admin.address,
          spenderAddress: X402_EXACT_PERMIT2_PROXY_ADDRESS
        }
      },
      { x402Version: 2, scheme: "exact", network: `eip155:${chainId}` }
    ])
    expect(supported.signers["eip155:*"]).toEqual([admin.address])
  })

  it("lists only the transfer methods it is told to", async () => {
    const only = async (methods: ReadonlyArray<"permit2-exact" | "permit2">) => {
      const standIn = await startFacilitatorStandIn({ rpcUrl: anvil.rpcUrl, privateKey: adminKey(), methods })
      try {
        return (await new HTTPFacilitatorClient({ url: standIn.url, timeoutMs: 5_000 }).getSupported()).kinds
      } finally {
        await standIn.close()
      }
    }
    expect(await only(["permit2"])).toEqual([
      { x402Version: 2, scheme: "exact", network: `eip155:${chainId}` }
    ])
    expect((await only(["permit2-exact"])).map((kind) => kind.extra?.assetTransferMethod)).toEqual([
      "permit2-exact"
    ])
  })

  it("settles a stock @x402/evm client's permit2 payment through the canonical proxy", async () => {
    const quoted = lookupRequirements({
      chainId,
      asset: token,
      assetName: "Tether USD (test)",
      assetVersion: "1",
      amount: PRICE,
      payTo: admin.address,
      maxTimeoutSeconds: 60,
      transferMethod: "permit2"
    })
    const payment = await stockClientPayment(payer, quoted)
    expect(payment.payload).toMatchObject({
      permit2Authorization: { from: payer.address, spender: X402_EXACT_PERMIT2_PROXY_ADDRESS }
    })
    expect(await client.verify(payment, quoted)).toMatchObject({ isValid: true, payer: payer.address })
    const before = await balanceOf(payer.address)
    const settled = await client.settle(payment, quoted)
    expect(settled.success).toBe(true)
    const receipt = await publicClient.getTransactionReceipt({ hash: settled.transaction as Hex })
    expect(receipt.status).toBe("success")
    expect(receipt.to).toBe(X402_EXACT_PERMIT2_PROXY_ADDRESS.toLowerCase())
    expect(await balanceOf(payer.address)).toBe(before - PRICE)
    expect((await client.settle(payment, quoted)).success).toBe(false)
  })

  it("verifies a payment, settles it on chain for exactly the amount, and refuses it again", async () => {
    const payment = await signPayment()
    const verified = await client.verify(payment, requirements)
    expect(verified).toMatchObject({ isValid: true, payer: payer.address })

    const payToBefore = await balanceOf(admin.address)
    const payerBefore = await balanceOf(payer.address)
    const settled = await client.settle(payment, requirements)
    expect(settled).toMatchObject({ success: true, network: `eip155:${chainId}`, payer: payer.address })
    const receipt = await publicClient.getTransactionReceipt({ hash: settled.transaction as Hex })
    expect(receipt.status).toBe("success")
    expect(receipt.from).toBe(admin.address.toLowerCase())
    expect(receipt.to).toBe(X402_EXACT_PERMIT2_PROXY_ADDRESS.toLowerCase())
    expect(await balanceOf(admin.address)).toBe(payToBefore + PRICE)
    expect(await balanceOf(payer.address)).toBe(payerBefore - PRICE)

    // The Permit2 nonce is spent: neither verification nor a second settlement passes, nothing moves.
    expect(await client.verify(payment, requirements)).toMatchObject({
      isValid: false,
      invalidReason: "permit2_simulation_failed"
    })
    const blockBefore = await publicClient.getBlockNumber()
    const again = await client.settle(payment, requirements)
    expect(again.success).toBe(false)
    // Permit2's InvalidNonce(), which @x402/evm reports undecoded as a failed transaction.
    expect(again.errorReason).toMatch(/^invalid_exact_evm_transaction_failed/)
    expect(again.transaction).toBe("")
    expect(await balanceOf(admin.address)).toBe(payToBefore + PRICE)
    expect(await balanceOf(payer.address)).toBe(payerBefore - PRICE)
    expect(await publicClient.getBlockNumber()).toBe(blockBefore)
  })

  it("refuses a payment for another amount, to another payee, or with a witness the payer did not sign", async () => {
    const before = await balanceOf(payer.address)
    const other = await signPayment({ amount: PRICE + 1n })
    expect(await client.verify(other, requirements)).toMatchObject({
      isValid: false,
      invalidReason: "permit2_amount_mismatch"
    })
    const settled = await client.settle(other, requirements)
    expect(settled.success).toBe(false)

    const elsewhere = await signPayment({ to: payer.address })
    expect(await client.verify(elsewhere, requirements)).toMatchObject({
      isValid: false,
      invalidReason: "invalid_permit2_recipient_mismatch"
    })

    // Signed for someone else, presented as paying payTo: the signature does not recover.
    const forged = await signPayment({ signedTo: payer.address })
    expect(await client.verify(forged, requirements)).toMatchObject({
      isValid: false,
      invalidReason: "invalid_permit2_signature"
    })
    expect((await client.settle(forged, requirements)).success).toBe(false)
    expect(await balanceOf(payer.address)).toBe(before)
  })

  it("answers a failed settlement with settle_error and moves nothing", async () => {
    const payment = await signPayment()
    expect((await client.verify(payment, requirements)).isValid).toBe(true)
    facilitator.setFault("settle_error")
    const before = await balanceOf(payer.address)
    const settled = await client.settle(payment, requirements)
    expect(settled).toMatchObject({ success: false, transaction: "", payer: payer.address })
    expect(await balanceOf(payer.address)).toBe(before)
    // Still unspent: once the fault clears, the same authorization settles.
    facilitator.setFault(undefined)
    expect((await client.settle(payment, requirements)).success).toBe(true)
    expect(await balanceOf(payer.address)).toBe(before - PRICE)
  })

  it("is unreachable while down, and answers again after", async () => {
    facilitator.setFault("down")
    const payment = await signPayment()
    await expect(client.getSupported()).rejects.toThrow()
    await expect(client.verify(payment, requirements)).rejects.toThrow()
    await expect(client.settle(payment, requirements)).rejects.toThrow()
    facilitator.setFault(undefined)
    expect((await client.verify(payment, requirements)).isValid).toBe(true)
  })

  it("records the body of every request it answered", async () => {
    const payment = await signPayment()
    const seen = facilitator.received().length
    await client.verify(payment, requirements)
    const [last, ...rest] = facilitator.received().slice(seen)
    expect(rest).toEqual([])
    expect(last).toEqual({
      path: "/verify",
      body: { x402Version: 2, paymentPayload: payment, paymentRequirements: requirements }
    })
    expect(facilitator.received().map((r) => r.path)).toContain("/settle")
    expect(facilitator.received().map((r) => r.path)).toContain("/supported")
  })

  it("answers 404 elsewhere and 400 to a body that is not a payment", async () => {
    expect((await fetch(`${facilitator.url}/nowhere`)).status).toBe(404)
    expect((await fetch(`${facilitator.url}/verify`)).status).toBe(405)
    const response = await fetch(`${facilitator.url}/verify`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ x402Version: 2 })
    })
    expect(response.status).toBe(400)
  })
})

describe("facilitatorStandIn", () => {
  it("lives as long as its scope", async () => {
    const inner = Effect.runSync(Scope.make())
    const standIn = await Effect.runPromise(
      Scope.extend(facilitatorStandIn({ rpcUrl: anvil.rpcUrl, privateKey: adminKey() }), inner)
    )
    const scoped = new HTTPFacilitatorClient({ url: standIn.url, timeoutMs: 5_000 })
    expect((await scoped.getSupported()).kinds).toHaveLength(2)
    await Effect.runPromise(Scope.close(inner, Exit.void))
    await expect(scoped.getSupported()).rejects.toThrow()
  })
})
