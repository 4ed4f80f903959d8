/**
 * A test a project that builds on the services would write: the relayer's claim path (`Claims`
 * over the one relay step, with the live signature, preflight, rate-limit and nonce-reservation
 * checks) composed with a mocked chain and an embedded database, importing only the package's
 * entry points (docs/architecture.md "Entry points").
 *
 * The repository runs it against its sources; test/packaging/pack.test.ts runs it in a scratch
 * project against the packed package.
 */
import { ConfigProvider, Effect, Layer, ManagedRuntime, Schema } from "effect"
import {
  ClaimRequest,
  computeId,
  feeVaultAbi,
  ownerCommitment,
  vaultDomain,
  vaultTypes
} from "fee-vault-services/client"
import {
  AccountReader,
  BindBudget,
  ChainId,
  Claims,
  DenyList,
  FeeOracle,
  IdRateLimit,
  NonceReservations,
  Relayer,
  RelayerSettings,
  RevertCooldowns,
  TxPreflight,
  type TxRequest,
  TxSender,
  VaultSignatures
} from "fee-vault-services/relayer"
import { embeddedDatabase, mockChainClient, stubLayer } from "fee-vault-services/testing"
import {
  decodeFunctionData,
  encodeAbiParameters,
  encodeFunctionResult,
  type Hex,
  keccak256,
  toHex,
  zeroAddress
} from "viem"
import { privateKeyToAccount } from "viem/accounts"
import { afterAll, describe, expect, it } from "vitest"

const CHAIN_ID = 31337
const VAULT = "0x00000000000000000000000000000000000000e1"
const USDT = "0x00000000000000000000000000000000000000a1"
const SHIELD = "0x00000000000000000000000000000000000000b1"
const E18 = 10n ** 18n
const FEE = 5n * E18

const relayerKey = keccak256(toHex("downstream relayer key"))
const relayer = privateKeyToAccount(relayerKey)
const owner = privateKeyToAccount(keccak256(toHex("downstream owner key")))
const salt = keccak256(toHex("downstream salt"))
const id = computeId(1, ownerCommitment(owner.address, salt), zeroAddress, 0n)

/** The vault as the mocked chain answers for it: `id` is registered to `owner` with 100 USDT. */
const vaultAnswers = (data: Hex): Hex => {
  const { args } = decodeFunctionData({ abi: feeVaultAbi, data })
  const calls = (args?.[0] ?? []) as ReadonlyArray<Hex>
  const results = calls.map((call) => {
    const { functionName } = decodeFunctionData({ abi: feeVaultAbi, data: call })
    switch (functionName) {
      case "accountOf":
        return encodeFunctionResult({
          abi: feeVaultAbi,
          functionName,
          result: [1, owner.address, zeroAddress, 0n, 0n, zeroAddress, 0n, 0n]
        })
      case "balanceOf":
        return encodeFunctionResult({ abi: feeVaultAbi, functionName, result: 100n * E18 })
      default:
        return encodeFunctionResult({ abi: feeVaultAbi, functionName: "nonces", result: 0n })
    }
  })
  return encodeFunctionResult({ abi: feeVaultAbi, functionName: "multicall", result: results })
}

/** What the hot key was asked to send. */
const sent: Array<TxRequest> = []
const TX_HASH = keccak256(toHex("downstream tx"))

const settings = RelayerSettings.layer.pipe(
  Layer.provide(
    Layer.setConfigProvider(
      ConfigProvider.fromMap(
        new Map([
          ["RPC_URL", "http://127.0.0.1:1"],
          ["CHAIN_ID", String(CHAIN_ID)],
          ["FEE_VAULT", VAULT],
          ["SETTLEMENT_ASSET", USDT],
          ["SHIELD_ADAPTER", SHIELD],
          ["RELAYER_PRIVATE_KEY", relayerKey]
        ])
      )
    )
  )
)

// The chain: the vault's reads, an owner without code, and a transaction that executes.
const chain = mockChainClient({
  chainId: Effect.succeed(CHAIN_ID),
  call: (request) => Effect.succeed(vaultAnswers(request.data)),
  getCode: () => Effect.succeed("0x"),
  estimateGas: () => Effect.succeed(150_000n)
})

// Stubbed around the claim rules: a fixed quote and gas price, a hot key that records, no cooldowns.
const feeOracle = stubLayer(FeeOracle, {
  quote: "function",
  gasBudget: "function",
  gasPrice: "effect",
  isCurrent: "function"
})({
  quote: () =>
    Effect.succeed({
      relayerFee: FEE,
      gasEstimate: 200_000n,
      gasPrice: 1n,
      price: { num: 1n, den: 1n },
      validUntil: 60
    }),
  gasBudget: () => 200_000n,
  // The price a transaction sent now pays per gas, which the fee must cover at its gas limit.
  gasPrice: Effect.succeed(1n)
})
const sender = stubLayer(TxSender, { address: "data", submit: "function", status: "function" })({
  address: relayer.address,
  submit: (request) => Effect.sync(() => sent.push(request)).pipe(Effect.as(TX_HASH))
})
const cooldowns = stubLayer(RevertCooldowns, { check: "function", settled: "function" })({
  check: () => Effect.void,
  settled: () => Effect.void
})

/** `Claims` with the live checks; the nonce reservations and bind budgets live in the embedded database. */
const claimPath = Relayer.writeServices.pipe(
  Layer.provide(
    Layer.mergeAll(
      AccountReader.layer,
      DenyList.layer,
      VaultSignatures.layer,
      TxPreflight.layer,
      IdRateLimit.layer,
      BindBudget.layer,
      NonceReservations.layer,
      feeOracle,
      cooldowns
    )
  ),
  Layer.provide(Layer.mergeAll(chain, ChainId.test(CHAIN_ID), sender, embeddedDatabase(), settings))
)

const runtime = ManagedRuntime.make(claimPath)
afterAll(() => runtime.dispose())

const adapterData = encodeAbiParameters([{ type: "address" }], [owner.address])

/** A claim the owner signs, as a wallet sends it: the JSON body, decoded by the wire schema. */
const claimRequest = async (relayerFee: bigint): Promise<ClaimRequest> => {
  const claim = {
    beneficiaryId: id,
    asset: USDT,
    amount: 10n * E18,
    adapter: zeroAddress,
    dataHash: keccak256(adapterData),
    relayer: relayer.address,
    relayerFee,
    nonce: 0n,
    deadline: BigInt(Math.floor(Date.now() / 1000) + 3600)
  } as const
  const signature = await owner.signTypedData({
    domain: vaultDomain(CHAIN_ID, VAULT),
    types: vaultTypes,
    primaryType: "Claim",
    message: claim
  })
  const body = JSON.stringify({ claim, adapterData, signature }, (_, value) =>
    typeof value === "bigint" ? value.toString() : value
  )
  return Schema.decodeUnknownSync(ClaimRequest)(JSON.parse(body))
}

const submit = (request: ClaimRequest) =>
  runtime.runPromise(Effect.either(Effect.flatMap(Claims, (claims) => claims.submit(request))))

describe("the relayer's claim path, composed", () => {
  it("refuses a claim whose fee is below the quote, sending nothing", async () => {
    const answer = await submit(await claimRequest(FEE - 1n))
    expect(answer._tag).toBe("Left")
    if (answer._tag === "Left") expect(answer.left._tag).toBe("FeeTooLow")
    expect(sent).toHaveLength(0)
  })

  it("sends an owner-signed claim that pays the quote to the vault", async () => {
    const answer = await submit(await claimRequest(FEE))
    expect(answer).toMatchObject({ _tag: "Right", right: { txHash: TX_HASH } })
    expect(sent).toHaveLength(1)
    expect(sent[0]?.to.toLowerCase()).toBe(VAULT.toLowerCase())
    const call = decodeFunctionData({ abi: feeVaultAbi, data: sent[0]!.data })
    expect(call.functionName).toBe("claim")
  })
})
