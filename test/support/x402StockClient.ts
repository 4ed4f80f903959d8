/**
 * Stock x402 clients as payers run them (docs/protocol.md §10 "Paid lookups"): `@x402/core`'s
 * `x402Client` and `x402HTTPClient` with `@x402/evm`'s `exact` scheme, nothing signed by hand.
 *
 * The library's scheme speaks the `permit2` transfer method, whose spender is the canonical
 * `x402ExactPermit2Proxy`; reading `permit2-exact` it falls back to EIP-3009. A `permit2-exact`
 * quote whose `spenderAddress` is that same proxy (the devnet facilitator's) asks for the very same
 * Permit2 witness transfer, so `permit2ExactScheme` hands the library's scheme that quote under the
 * method's other name; the payment still says it accepts the quote as quoted. Any other spender is
 * refused: the library cannot sign for it.
 */
import { x402Client, x402HTTPClient } from "@x402/core/client"
import type { SchemeNetworkClient } from "@x402/core/types"
import { x402ExactPermit2ProxyAddress } from "@x402/evm"
import { ExactEvmScheme, registerExactEvmScheme } from "@x402/evm/exact/client"
import { type Address, getAddress, type LocalAccount } from "viem"

/** `@x402/evm`'s exact scheme, also paying a `permit2-exact` quote whose spender is the canonical proxy. */
export const permit2ExactScheme = (signer: LocalAccount): SchemeNetworkClient => {
  const stock = new ExactEvmScheme(signer)
  return {
    scheme: "exact",
    createPaymentPayload: (version, requirements, context) => {
      if (requirements.extra?.assetTransferMethod !== "permit2-exact")
        return stock.createPaymentPayload(version, requirements, context)
      const spender = requirements.extra.spenderAddress
      if (typeof spender !== "string" || getAddress(spender) !== getAddress(x402ExactPermit2ProxyAddress))
        throw new Error("@x402/evm signs Permit2 transfers to its canonical proxy only")
      return stock.createPaymentPayload(
        version,
        { ...requirements, extra: { ...requirements.extra, assetTransferMethod: "permit2" } },
        context
      )
    }
  }
}

export interface StockClientOptions {
  readonly signer: LocalAccount
  /** The one non-default asset the client may pay, up to `maxAmount` atomic units a payment. */
  readonly network: `${string}:${string}`
  readonly asset: Address
  readonly maxAmount: bigint
  /** `stock`: `registerExactEvmScheme` as is; `permit2-exact`: with `permit2ExactScheme`. */
  readonly scheme: "stock" | "permit2-exact"
}

/** An `x402HTTPClient` over a stock `x402Client`, paying only the given asset up to its cap. */
export const stockClient = (options: StockClientOptions): x402HTTPClient => {
  const client = new x402Client()
  if (options.scheme === "stock") registerExactEvmScheme(client, { signer: options.signer })
  else client.register("eip155:*", permit2ExactScheme(options.signer))
  client.setSpendControls({
    allowedAssets: [
      { network: options.network, asset: options.asset, maxAmountPerPayment: options.maxAmount.toString() }
    ]
  })
  return new x402HTTPClient(client)
}
