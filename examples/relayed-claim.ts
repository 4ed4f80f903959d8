/**
 * A relayed claim, start to finish (docs/getting-started.md "A first relayed claim"):
 *
 *   1. register an owner account for mnemonic account #5 and compute its id off-chain;
 *   2. deposit a test token into it;
 *   3. ask the relayer for its fee (`GET /v1/quote`);
 *   4. sign a `Claim` (EIP-712) and relay it (`POST /v1/claim`);
 *   5. follow it with `POST /v1/tx-status` and find the account in `GET /v1/accounts`;
 *   6. again for a second account that is registered by the claim itself (`register` in the body).
 *
 *   npx tsx examples/relayed-claim.ts      # against `npm run devnet`; DEVNET_FILE=… for another
 */
import {
  type Address,
  encodeAbiParameters,
  type Hex,
  keccak256,
  parseEventLogs,
  parseUnits,
  toHex
} from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { feeVaultAbi, testTokenAbi } from "../contracts/abi.js"
import { vaultDomain, vaultTypes } from "../schema/eip712.js"
import { computeId, ownerCommitment, ZERO_ADDRESS } from "../schema/ids.js"
import { ClaimRequest, QuoteQuery } from "../schema/relayer.js"
import {
  call,
  devnetAccount,
  devnetClients,
  indexedAccount,
  loadDevnet,
  mined,
  nowSeconds,
  relayedTx,
  runExample,
  serviceClients,
  show,
  step,
  wire
} from "./lib/devnet.js"

/** The owner's key and the account that pays gas for its own setup (free for users on the devnet). */
const OWNER = 5

runExample("relayed-claim", async () => {
  const file = loadDevnet()
  const { publicClient, wallet } = devnetClients(file)
  const { relayer } = await serviceClients(file)
  const owner = devnetAccount(OWNER)
  const ownerWallet = wallet(owner)
  const asset = file.settlementAsset
  const { symbol, decimals } = file.assets[asset] ?? { symbol: "?", decimals: 18 }
  const units = (n: string) => parseUnits(n, decimals)

  step("GET /v1/config: the relayer that submits claims, its chain and vault")
  const config = await call("GET /v1/config", relayer.quote.config())
  show("relayer (goes into claim.relayer)", config.relayer)
  show("minDeadlineSeconds", config.minDeadlineSeconds)

  // docs/protocol.md §2: a kind-1 id commits to the owner and a salt; a fresh salt gives a fresh
  // account, so the example can run again on the same devnet.
  step("Compute the id of a new owner account (kind 1), the way the vault does")
  const salt = keccak256(toHex(generatePrivateKey()))
  const id = computeId(1, ownerCommitment(owner.address, salt), ZERO_ADDRESS, 0n)
  show("owner (account #5)", owner.address)
  show("salt", salt)
  show("id = keccak256(abi.encode(1, keccak256(abi.encode(owner, salt)), 0x0, 0))", id)

  step("registerOwner on the vault (sent by the owner; anyone may send it)")
  const registration = await mined(
    publicClient,
    await ownerWallet.writeContract({
      address: file.vault,
      abi: feeVaultAbi,
      functionName: "registerOwner",
      args: [owner.address, salt, ZERO_ADDRESS, 0n]
    })
  )
  const [registered] = parseEventLogs({ abi: feeVaultAbi, logs: registration.logs, eventName: "Registered" })
  if (registered?.args.id !== id) throw new Error(`the vault registered ${registered?.args.id}, not ${id}`)
  show("Registered event id", registered.args.id)

  // docs/protocol.md §9: the devnet's sample balances are plain ERC-20 balances of accounts
  // #3..#9; money reaches a vault account only through `deposit` (§5). Test tokens have an open
  // `mint`, so the example mints what it deposits and can run again.
  step(`Deposit 100 ${symbol} into the account: mint, approve the vault, deposit`)
  await depositTo(file.vault, asset, id, units("100"))
  show("vault balance", await vaultBalance(id))

  // The relayer's fee: it depends on asset, adapter, action and flags, never on the amount; a claim
  // must pay at least the current quote (402 fee_too_low otherwise, docs/protocol.md §7).
  step("GET /v1/quote: the relayer's fee for a direct claim of this asset")
  const quote = await call(
    "GET /v1/quote",
    relayer.quote.quote({ urlParams: wire(QuoteQuery, { asset, adapter: ZERO_ADDRESS }) })
  )
  show("relayerFee", quote.relayerFee)
  show("validUntil", quote.validUntil)

  const recipient = privateKeyToAccount(generatePrivateKey()).address
  step("Sign a Claim of 40 for a fresh recipient and relay it with POST /v1/claim")
  const first = await relayClaim({ id, amount: units("40"), relayerFee: quote.relayerFee, recipient })
  show("recipient received", await tokenBalance(recipient))
  show("expected (amount - relayerFee)", units("40") - quote.relayerFee)
  if ((await tokenBalance(recipient)) !== units("40") - quote.relayerFee)
    throw new Error("the recipient did not receive amount - relayerFee")

  step("GET /v1/accounts: the indexed account once the list covers the claim's block")
  const account = await indexedAccount(relayer, id, first)
  show("owner", account.owner)
  show("balances", account.balances)
  show("nonce (the next claim signs this one)", account.nonce)

  // docs/protocol.md §5: deposits are allowed before registration, and calls batch in one
  // `multicall`; the relayer sends `registerOwner` and `claim` together when the body carries
  // `register`, and quotes the extra gas with `register=1`.
  step("A second account, registered by its first claim: deposit first (any id can receive)")
  const salt2 = keccak256(toHex(generatePrivateKey()))
  const id2 = computeId(1, ownerCommitment(owner.address, salt2), ZERO_ADDRESS, 0n)
  show("id", id2)
  await depositTo(file.vault, asset, id2, units("10"))
  show("vault balance", await vaultBalance(id2))

  step("GET /v1/quote with register=1, then POST /v1/claim with `register` in the body")
  const quote2 = await call(
    "GET /v1/quote",
    relayer.quote.quote({ urlParams: wire(QuoteQuery, { asset, adapter: ZERO_ADDRESS, register: "1" }) })
  )
  show("relayerFee (with registration)", quote2.relayerFee)
  const second = await relayClaim({
    id: id2,
    amount: units("8"),
    relayerFee: quote2.relayerFee,
    recipient,
    register: {
      kind: 1,
      owner: owner.address,
      salt: salt2,
      fallbackRecipient: ZERO_ADDRESS,
      fallbackDelay: 0n
    }
  })
  const account2 = await indexedAccount(relayer, id2, second)
  show("owner", account2.owner)
  show("balances", account2.balances)
  if (account2.owner.toLowerCase() !== owner.address.toLowerCase())
    throw new Error("the second account is not owned by account #5")

  async function depositTo(vault: Address, token: Address, to: Hex, amount: bigint) {
    for (const request of [
      { address: token, abi: testTokenAbi, functionName: "mint", args: [owner.address, amount] },
      { address: token, abi: testTokenAbi, functionName: "approve", args: [vault, amount] },
      { address: vault, abi: feeVaultAbi, functionName: "deposit", args: [to, token, amount] }
    ] as const) {
      await mined(publicClient, await ownerWallet.writeContract(request as never))
    }
  }

  function vaultBalance(of: Hex) {
    return publicClient.readContract({
      address: file.vault,
      abi: feeVaultAbi,
      functionName: "balanceOf",
      args: [of, asset]
    })
  }

  function tokenBalance(of: Address) {
    return publicClient.readContract({
      address: asset,
      abi: testTokenAbi,
      functionName: "balanceOf",
      args: [of]
    })
  }

  /** Signs and relays a direct claim; the block it was mined in. */
  async function relayClaim(input: {
    readonly id: Hex
    readonly amount: bigint
    readonly relayerFee: bigint
    readonly recipient: Address
    readonly register?: unknown
  }): Promise<number> {
    // docs/protocol.md §5 "Claim semantics": the direct adapter (0x0) pays `amount - relayerFee`
    // to the address in `adapterData`, and the signature covers its hash.
    const adapterData = encodeAbiParameters([{ type: "address" }], [input.recipient])
    // docs/protocol.md §4: the claim signs the vault's current nonce of the account (0 for an
    // account not registered yet).
    const nonce = await publicClient.readContract({
      address: file.vault,
      abi: feeVaultAbi,
      functionName: "nonces",
      args: [input.id]
    })
    const claim = {
      beneficiaryId: input.id,
      asset,
      amount: input.amount,
      adapter: ZERO_ADDRESS,
      dataHash: keccak256(adapterData),
      relayer: config.relayer,
      relayerFee: input.relayerFee,
      nonce,
      // Well past the relayer's minDeadlineSeconds.
      deadline: (await nowSeconds(publicClient)) + 3600n
    }
    // docs/protocol.md §3: domain { name: "FeeVault", version: "1", chainId, verifyingContract: vault }.
    const signature = await owner.signTypedData({
      domain: vaultDomain(file.chainId, file.vault),
      types: vaultTypes,
      primaryType: "Claim",
      message: claim
    })
    show("claim", claim)
    show("signature", signature)
    const payload = wire(ClaimRequest, {
      claim,
      adapterData,
      signature,
      ...(input.register === undefined ? {} : { register: input.register })
    })
    const { txHash } = await call("POST /v1/claim", relayer.claims.claim({ payload }))
    show("txHash", txHash)
    const block = await relayedTx(relayer, txHash)
    show("tx-status", `success in block ${block}`)
    return block
  }
})
