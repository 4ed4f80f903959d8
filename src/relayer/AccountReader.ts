/**
 * What the relayer needs to know about one account before it relays for it: registration, owner,
 * nonce and balances, all as of one block. Read from the vault itself, in one `eth_call` of the
 * vault's own `multicall` so every value comes from the same state; the indexer's projection can
 * replace this layer without changing its users.
 */
import { Context, Effect, Layer, Option } from "effect"
import { type Address, decodeFunctionResult, encodeFunctionData, type Hex } from "viem"
import { feeVaultAbi } from "../../contracts/abi.js"
import { Unavailable } from "../../schema/errors.js"
import { ChainClient } from "../chain/ChainClient.js"
import { CHAIN_UNAVAILABLE } from "../chain/errors.js"
import { RelayerSettings } from "../config/relayer.js"

export interface VaultAccount {
  readonly kind: 1 | 2
  /** The zero address for a handle account no bind has finalized. */
  readonly owner: Address
  readonly fallbackRecipient: Address
  readonly fallbackDelay: bigint
  readonly pendingOwner: Address
  readonly pendingReadyAt: bigint
}

export interface AccountSnapshot {
  /** None when the id is not registered. */
  readonly account: Option.Option<VaultAccount>
  readonly nonce: bigint
  /** `bindNonces(id)`: what `CancelBind` and attestors' `BindOwner` sign. */
  readonly bindNonce: bigint
  /** The vault balance of one of the assets asked for (0 for any other). */
  readonly balance: (asset: Address) => bigint
}

export interface AccountReaderShape {
  readonly read: (id: Hex, assets?: ReadonlyArray<Address>) => Effect.Effect<AccountSnapshot, Unavailable>
}

export class AccountReader extends Context.Tag("AccountReader")<AccountReader, AccountReaderShape>() {
  /** Reads at the chain's latest block. */
  static readonly layer: Layer.Layer<AccountReader, never, ChainClient | RelayerSettings> = Layer.effect(
    AccountReader,
    Effect.gen(function* () {
      const chain = yield* ChainClient
      const { vault } = yield* RelayerSettings
      return {
        read: (id, assets = []) => {
          const calls: Array<Hex> = [
            encodeFunctionData({ abi: feeVaultAbi, functionName: "accountOf", args: [id] }),
            encodeFunctionData({ abi: feeVaultAbi, functionName: "nonces", args: [id] }),
            encodeFunctionData({ abi: feeVaultAbi, functionName: "bindNonces", args: [id] }),
            ...assets.map((asset) =>
              encodeFunctionData({ abi: feeVaultAbi, functionName: "balanceOf", args: [id, asset] })
            )
          ]
          return chain
            .call({
              to: vault,
              data: encodeFunctionData({ abi: feeVaultAbi, functionName: "multicall", args: [calls] }),
              errorAbi: feeVaultAbi
            })
            .pipe(
              Effect.mapError(
                (error) =>
                  new Unavailable({
                    message: error._tag === "ChainReverted" ? "reading the vault failed" : CHAIN_UNAVAILABLE
                  })
              ),
              Effect.flatMap((data) =>
                Effect.try({
                  try: () => decodeSnapshot(data, assets),
                  catch: () => new Unavailable({ message: "the vault answered with unexpected data" })
                })
              )
            )
        }
      }
    })
  )
}

const decodeSnapshot = (data: Hex, assets: ReadonlyArray<Address>): AccountSnapshot => {
  const results = decodeFunctionResult({ abi: feeVaultAbi, functionName: "multicall", data })
  const [accountData, nonceData, bindNonceData, ...balanceData] = results
  if (
    accountData === undefined ||
    nonceData === undefined ||
    bindNonceData === undefined ||
    balanceData.length !== assets.length
  )
    throw new Error("multicall returned the wrong number of results")
  const [kind, owner, fallbackRecipient, fallbackDelay, , pendingOwner, pendingReadyAt] =
    decodeFunctionResult({
      abi: feeVaultAbi,
      functionName: "accountOf",
      data: accountData
    })
  const nonce = decodeFunctionResult({ abi: feeVaultAbi, functionName: "nonces", data: nonceData })
  const bindNonce = decodeFunctionResult({
    abi: feeVaultAbi,
    functionName: "bindNonces",
    data: bindNonceData
  })
  const balances = new Map<string, bigint>()
  assets.forEach((asset, i) => {
    balances.set(
      asset.toLowerCase(),
      decodeFunctionResult({ abi: feeVaultAbi, functionName: "balanceOf", data: balanceData[i] ?? "0x" })
    )
  })
  return {
    account:
      kind === 1 || kind === 2
        ? Option.some({ kind, owner, fallbackRecipient, fallbackDelay, pendingOwner, pendingReadyAt })
        : Option.none(),
    nonce,
    bindNonce,
    balance: (asset) => balances.get(asset.toLowerCase()) ?? 0n
  }
}
