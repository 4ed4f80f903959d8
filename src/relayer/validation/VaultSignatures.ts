/**
 * EIP-712 signatures of the vault's messages (docs/protocol.md §3), checked the way the vault checks
 * them so a request is refused here exactly when the vault would refuse it: a 65-byte `r || s || v`
 * with `v` 27/28 and a low `s` from an EOA owner; any signature of an owner with code (ERC-1271) is
 * left to the simulation, which asks the owner contract itself.
 */
import { Context, Effect, Layer, Option } from "effect"
import { type Address, type Hex, hexToBigInt, isAddressEqual } from "viem"
import type { VaultPrimaryType } from "../../../schema/eip712.js"
import { InvalidSignature, type Unavailable } from "../../../schema/errors.js"
import { type Keccak256, viemKeccak256 } from "../../../schema/ids.js"
import { ChainClient } from "../../chain/ChainClient.js"
import { ChainId } from "../../chain/chainId.js"
import { chainUnavailable } from "../../chain/errors.js"
import { wasmKeccak256 } from "../../chain/keccak.js"
import { recoverSigner, checkedAgainstViem as secp256k1AgreesWithViem } from "../../chain/secp256k1.js"
import { RelayerSettings } from "../../config/relayer.js"
import { checkedAgainstViem, makeVaultDigest, type VaultDigest, type VaultMessage } from "./vaultDigest.js"

export type { VaultMessage } from "./vaultDigest.js"

/** secp256k1 order / 2: OpenZeppelin's ECDSA refuses larger `s` (malleable signatures). */
const HALF_ORDER = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0n

/** The signer of a vault digest as the vault's ECDSA recovery sees it, or none. */
export const recoverEcdsa = (digest: Hex, signature: Hex): Effect.Effect<Option.Option<Address>> => {
  if (signature.length !== 2 + 65 * 2) return Effect.succeed(Option.none())
  if (hexToBigInt(`0x${signature.slice(66, 130)}`) > HALF_ORDER) return Effect.succeed(Option.none())
  // `recoverSigner` finds no signer for a `v` other than 27 or 28.
  return Effect.sync(() => Option.fromNullable(recoverSigner(digest, signature)))
}

/** How an owner's signature was accepted. */
export type OwnerSignature = "ecdsa" | "erc1271"

export interface VaultSignaturesShape {
  /** Read from the RPC on first use when not configured: 503 `unavailable` while it is down. */
  readonly chainId: Effect.Effect<number, Unavailable>
  readonly vault: Address
  readonly digest: <P extends VaultPrimaryType>(
    primaryType: P,
    message: VaultMessage<P>
  ) => Effect.Effect<Hex, Unavailable>
  /**
   * Accepts a signature that recovers to `owner`, or any signature when `owner` has code (the
   * simulation asks it through ERC-1271). `what` names the message in the refusal.
   */
  readonly verifyOwner: <P extends VaultPrimaryType>(options: {
    readonly owner: Address
    readonly primaryType: P
    readonly message: VaultMessage<P>
    readonly signature: Hex
    readonly what: string
  }) => Effect.Effect<OwnerSignature, InvalidSignature | Unavailable>
}

export class VaultSignatures extends Context.Tag("VaultSignatures")<VaultSignatures, VaultSignaturesShape>() {
  static readonly make = (options: {
    readonly chainId: number | Effect.Effect<number, Unavailable>
    readonly vault: Address
    /** Whether there is code at an address (latest block). */
    readonly hasCode: (address: Address) => Effect.Effect<boolean, Unavailable>
    /** The keccak-256 of the digests: viem's unless given (the layer gives the WebAssembly one). */
    readonly keccak256?: Keccak256
  }): VaultSignaturesShape => {
    const chainId = typeof options.chainId === "number" ? Effect.succeed(options.chainId) : options.chainId
    const keccak = options.keccak256 ?? viemKeccak256
    // Made, and compared with viem's, once the chain's id is known (once, unless it changes).
    let made: { readonly chainId: number; readonly digest: VaultDigest } | undefined
    const digestOn = (id: number): Effect.Effect<VaultDigest> =>
      made !== undefined && made.chainId === id
        ? Effect.succeed(made.digest)
        : Effect.tap(
            checkedAgainstViem(makeVaultDigest(keccak, id, options.vault), id, options.vault),
            (digest) => {
              made = { chainId: id, digest }
            }
          )
    const digest = <P extends VaultPrimaryType>(primaryType: P, message: VaultMessage<P>) =>
      Effect.flatMap(chainId, (id) => Effect.map(digestOn(id), (digestOf) => digestOf(primaryType, message)))
    return {
      chainId,
      vault: options.vault,
      digest,
      verifyOwner: ({ owner, primaryType, message, signature, what }) =>
        digest(primaryType, message).pipe(
          Effect.flatMap((hash) => recoverEcdsa(hash, signature)),
          Effect.flatMap((signer) =>
            Option.isSome(signer) && isAddressEqual(signer.value, owner)
              ? Effect.succeed<OwnerSignature>("ecdsa")
              : // Only a signature that fails as ECDSA costs the code lookup.
                Effect.flatMap(options.hasCode(owner), (contract) =>
                  contract
                    ? Effect.succeed<OwnerSignature>("erc1271")
                    : Effect.fail(new InvalidSignature({ message: `${what} signature is not the owner's` }))
                )
          )
        )
    }
  }

  /**
   * Domain from the settings, or with the chain's id read on first use when `CHAIN_ID` is unset
   * (so the relayer starts with its RPC down); digests with keccak-256 in WebAssembly; code
   * lookups on the chain.
   */
  static readonly layer: Layer.Layer<VaultSignatures, never, RelayerSettings | ChainClient | ChainId> =
    Layer.effect(
      VaultSignatures,
      Effect.gen(function* () {
        const settings = yield* RelayerSettings
        const chain = yield* ChainClient
        yield* secp256k1AgreesWithViem
        return VaultSignatures.make({
          chainId: (yield* ChainId).get,
          vault: settings.vault,
          keccak256: yield* wasmKeccak256,
          hasCode: (address) =>
            chain.getCode(address).pipe(
              Effect.map((code) => code !== "0x"),
              Effect.mapError(chainUnavailable)
            )
        })
      })
    )
}
