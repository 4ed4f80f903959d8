/**
 * A payer of x402 version 2 `permit2-exact` payments as a client makes them (docs/protocol.md §10 "Paid
 * lookups"): a Permit2 `PermitWitnessTransferFrom` for the quoted amount to the quoted spender,
 * with the witness `to = payTo`, under Permit2's domain of the quote's chain. Overrides make the
 * wrong payments the refusal tests need.
 */
import { randomBytes } from "node:crypto"
import { x402Client } from "@x402/core/client"
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types"
import { ExactEvmScheme } from "@x402/evm/exact/client"
import type { Address, Hex, LocalAccount } from "viem"
import { permit2WitnessTypes } from "../../schema/eip712.js"
import { PERMIT2_ADDRESS } from "../../src/devnet/x402.js"

export interface PaymentOverrides {
  /** The amount permitted and signed (default: the quote's). */
  readonly amount?: bigint
  /** The token permitted and signed (default: the quote's asset). */
  readonly token?: Address
  /** The spender permitted and signed (default: the quote's `extra.spenderAddress`). */
  readonly spender?: Address
  /** Seconds from now to the deadline signed (default: the quote's `maxTimeoutSeconds`). */
  readonly deadlineIn?: number
  /** The witness `to` sent (default: the quote's `payTo`). */
  readonly to?: Address
  /** The witness `to` signed, when it should differ from the one sent. */
  readonly signedTo?: Address
  /** The requirements the payment says it accepts (default: the quote). */
  readonly accepted?: PaymentRequirements
  /** The payer the authorization names as `from` (default: the account that signs). */
  readonly from?: Address
  /** The Permit2 nonce (default: a fresh random one). */
  readonly nonce?: bigint
  /** The payer's clock, unix seconds (default: now). */
  readonly now?: number
  /** The signature sent instead of the one made (a forgery). */
  readonly signature?: Hex
  /** The x402 `payment-identifier` id sent (the payer's secret for replays); none by default. */
  readonly paymentId?: string
}

const chainIdOf = (network: string): number => {
  const match = /^eip155:([1-9][0-9]*)$/.exec(network)
  if (match?.[1] === undefined) throw new Error(`not an EVM network: ${network}`)
  return Number(match[1])
}

/** A `PAYMENT-SIGNATURE` payload from `payer` for `requirements`, with a fresh Permit2 nonce. */
export const signPermit2Payment = async (
  payer: LocalAccount,
  requirements: PaymentRequirements,
  overrides: PaymentOverrides = {}
): Promise<PaymentPayload> => {
  const amount = overrides.amount ?? BigInt(requirements.amount)
  const token = overrides.token ?? (requirements.asset as Address)
  const spender = overrides.spender ?? (requirements.extra?.spenderAddress as Address)
  const now = overrides.now ?? Math.floor(Date.now() / 1000)
  const authorization = {
    from: overrides.from ?? payer.address,
    permitted: { token, amount: amount.toString() },
    spender,
    nonce: (overrides.nonce ?? BigInt(`0x${randomBytes(31).toString("hex")}`)).toString(),
    deadline: String(now + (overrides.deadlineIn ?? requirements.maxTimeoutSeconds)),
    witness: { to: overrides.to ?? (requirements.payTo as Address), validAfter: String(now - 60) }
  }
  if (payer.signTypedData === undefined) throw new Error("the payer cannot sign typed data")
  const signature = await payer.signTypedData({
    domain: { name: "Permit2", chainId: chainIdOf(requirements.network), verifyingContract: PERMIT2_ADDRESS },
    types: permit2WitnessTypes,
    primaryType: "PermitWitnessTransferFrom",
    message: {
      permitted: { token, amount },
      spender,
      nonce: BigInt(authorization.nonce),
      deadline: BigInt(authorization.deadline),
      witness: {
        to: overrides.signedTo ?? authorization.witness.to,
        validAfter: BigInt(authorization.witness.validAfter)
      }
    }
  })
  return {
    x402Version: 2,
    accepted: overrides.accepted ?? requirements,
    payload: { signature: overrides.signature ?? signature, permit2Authorization: authorization },
    ...(overrides.paymentId === undefined
      ? {}
      : { extensions: { "payment-identifier": { info: { required: false, id: overrides.paymentId } } } })
  }
}

/**
 * A stock `@x402/evm` client's payment of `quoted` (a `permit2` quote), signed by `payer`, for a
 * resource on a dead loopback port: what a wallet built on the library sends.
 */
export const stockClientPayment = (
  payer: LocalAccount,
  quoted: PaymentRequirements
): Promise<PaymentPayload> => {
  const client = new x402Client().register(quoted.network as `${string}:${string}`, new ExactEvmScheme(payer))
  client.setSpendControls({ allowedAssets: [{ network: quoted.network, asset: quoted.asset }] })
  return client.createPaymentPayload({
    x402Version: 2,
    resource: {
      url: "http://127.0.0.1:9/v1/commitment",
      description: "a lookup",
      mimeType: "application/json"
    },
    accepts: [quoted]
  })
}
