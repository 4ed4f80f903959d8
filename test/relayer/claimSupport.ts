/**
 * Stub layers for the claim pipeline's unit tests: settings from a map, an account table instead
 * of the vault, a fee oracle with a fixed quote and gas price reading (or the real one, over a
 * gas price the test sets), a mocked chain for simulation and gas, and a
 * TxSender that records what it was asked to send. Only the rules themselves run for real.
 */
import { ConfigProvider, Effect, Layer, Option } from "effect"
import { encodeAbiParameters, getAddress, type Hex, keccak256, toHex } from "viem"
import { type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts"
import { Relayer } from "../../layers/relayer.js"
import { vaultDomain, vaultTypes } from "../../schema/eip712.js"
import { Unavailable } from "../../schema/errors.js"
import { computeId, ownerCommitment, shieldPayload } from "../../schema/ids.js"
import { type Address, type Bytes32, type Signature, ZeroAddress } from "../../schema/primitives.js"
import type { Claim, ClaimRequest, ConsolidateStep, RegisterOwner } from "../../schema/relayer.js"
import type { ChainClientShape } from "../../src/chain/ChainClient.js"
import { mockChainClient } from "../../src/chain/MockChainClient.js"
import { RelayerSettings } from "../../src/config/relayer.js"
import { AccountReader, type VaultAccount } from "../../src/relayer/AccountReader.js"
import { BindBudget } from "../../src/relayer/BindBudget.js"
import { Claims } from "../../src/relayer/Claims.js"
import { FeeOracle, type QuoteRequest } from "../../src/relayer/FeeOracle.js"
import { IdRateLimit } from "../../src/relayer/IdRateLimit.js"
import { NonceReservations } from "../../src/relayer/NonceReservations.js"
import { RevertCooldowns } from "../../src/relayer/RevertCooldowns.js"
import { TxPreflight } from "../../src/relayer/TxPreflight.js"
import { DenyList } from "../../src/relayer/validation/DenyList.js"
import { VaultSignatures } from "../../src/relayer/validation/VaultSignatures.js"
import { type TxRequest, TxSender, type TxSubmitError } from "../../src/txsender/TxSender.js"

/** A checksummed, branded address. */
export const addr = (hex: string): Address => getAddress(hex) as Address

export const CHAIN_ID = 31337
export const VAULT = addr("0x00000000000000000000000000000000000000e1")
export const USDT = addr("0x00000000000000000000000000000000000000a1")
export const WETH = addr("0x00000000000000000000000000000000000000a2")
export const SHIELD = addr("0x00000000000000000000000000000000000000b1")
export const DENIED = addr("0x000000000000000000000000000000000000dEaD")
export const RECIPIENT = addr("0x00000000000000000000000000000000000000f1")
export const E18 = 10n ** 18n

const key = (n: number): Hex => keccak256(toHex(`claim tests key ${n}`))
export const relayerKey = key(0)
export const relayer = privateKeyToAccount(relayerKey)
export const RELAYER = addr(relayer.address)
export const owner = privateKeyToAccount(key(1))
export const OWNER = addr(owner.address)
export const stranger = privateKeyToAccount(key(2))
/** An owner with code: an ERC-1271 wallet as far as the relayer can tell. */
export const WALLET = addr("0x00000000000000000000000000000000000000c7")

export const QUOTED_FEE = 5n * E18
export const GAS_BUDGET = 200_000n
export const GAS_ESTIMATE = 150_000n
/** `now` of the tests' clock (TestClock starts at 0) plus far enough. */
export const DEADLINE = 10_000n

export const baseEnv: Record<string, string> = {
  RPC_URL: "http://127.0.0.1:1",
  FEE_VAULT: VAULT,
  SETTLEMENT_ASSET: USDT,
  SHIELD_ADAPTER: SHIELD,
  RELAYER_PRIVATE_KEY: relayerKey,
  CHAIN_ID: String(CHAIN_ID)
}

export const settingsLayer = (env: Record<string, string> = {}) =>
  RelayerSettings.layer.pipe(
    Layer.provide(
      Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries({ ...baseEnv, ...env }))))
    ),
    Layer.orDie
  )

export const salt = keccak256(toHex("salt"))
export const registration = (who: Address = OWNER): RegisterOwner => ({
  kind: 1,
  owner: who,
  salt: salt as Bytes32,
  fallbackRecipient: ZeroAddress,
  fallbackDelay: 0n
})
export const idOf = (r: RegisterOwner): Bytes32 =>
  computeId(1, ownerCommitment(r.owner, r.salt), r.fallbackRecipient, r.fallbackDelay) as Bytes32
export const ID = idOf(registration())
export const WALLET_ID = idOf(registration(WALLET))

export const recipientData = (recipient: Address = RECIPIENT): Hex =>
  encodeAbiParameters([{ type: "address" }], [recipient])

export const domain = vaultDomain(CHAIN_ID, VAULT)

export const signClaim = (claim: Claim, signer: PrivateKeyAccount = owner): Promise<Signature> =>
  signer.signTypedData({
    domain,
    types: vaultTypes,
    primaryType: "Claim",
    message: claim
  }) as Promise<Signature>

export const signConsolidate = (
  id: Hex,
  step: Omit<ConsolidateStep, "signature">,
  nonce: bigint,
  signer: PrivateKeyAccount = owner
): Promise<Signature> =>
  signer.signTypedData({
    domain,
    types: vaultTypes,
    primaryType: "Consolidate",
    message: { id: id as Bytes32, ...step, nonce }
  }) as Promise<Signature>

export const claimOf = (fields: Partial<Claim> = {}): Claim => {
  const base = {
    beneficiaryId: ID,
    asset: USDT,
    amount: 100n * E18,
    adapter: ZeroAddress,
    dataHash: keccak256(recipientData()) as Bytes32,
    relayer: RELAYER,
    relayerFee: QUOTED_FEE,
    nonce: 0n,
    deadline: DEADLINE,
    ...fields
  }
  return base as Claim
}

/** A signed request: the claim signed by `signer` unless `signature` is given. */
export const claimRequest = async (
  fields: Partial<Claim> = {},
  options: {
    readonly adapterData?: Hex
    readonly signer?: PrivateKeyAccount
    readonly signature?: Hex
    readonly register?: ClaimRequest["register"]
    readonly consolidate?: ConsolidateStep
  } = {}
): Promise<ClaimRequest> => {
  const adapterData = (options.adapterData ?? recipientData()) as ClaimRequest["adapterData"]
  const claim = claimOf({ dataHash: keccak256(adapterData) as Bytes32, ...fields })
  const signature = (options.signature ?? (await signClaim(claim, options.signer))) as Signature
  return {
    claim,
    adapterData,
    signature,
    ...(options.register === undefined ? {} : { register: options.register }),
    ...(options.consolidate === undefined ? {} : { consolidate: options.consolidate })
  }
}

export const shieldData = (id: Hex = ID, value = 90n * E18): Hex => shieldPayload(id, USDT, value)

// ---------------------------------------------------------------------------------------------
// The world the pipeline sees

export interface World {
  /** Registered accounts by id (lowercase). */
  readonly accounts: Map<string, { account: VaultAccount; nonce: bigint; balances: Map<string, bigint> }>
  readonly submitted: Array<TxRequest>
  readonly quoted: Array<QuoteRequest>
  readonly contracts: Set<string>
  fee: bigint
  /** The fee oracle's gas price reading (wei per gas), what the fee must cover the gas limit at. */
  gasPrice: bigint
  /** What executing the transaction gives: its revert, or an outage. */
  simulate: ChainClientShape["call"]
  /** The gas estimate once it executed. */
  estimate: ChainClientShape["estimateGas"]
  submit: (r: TxRequest) => Effect.Effect<Hex, TxSubmitError>
  reads: number
}

export const TX_HASH: Hex = keccak256(toHex("tx"))

export const makeWorld = (): World => ({
  accounts: new Map(),
  submitted: [],
  quoted: [],
  contracts: new Set([WALLET.toLowerCase()]),
  fee: QUOTED_FEE,
  gasPrice: 1n,
  simulate: () => Effect.succeed("0x"),
  estimate: () => Effect.succeed(GAS_ESTIMATE),
  submit: () => Effect.succeed(TX_HASH),
  reads: 0
})

export const registerIn = (
  world: World,
  id: Hex,
  options: { owner?: Address; kind?: 1 | 2; nonce?: bigint; balances?: Record<string, bigint> } = {}
) => {
  world.accounts.set(id.toLowerCase(), {
    account: {
      kind: options.kind ?? 1,
      owner: options.owner ?? owner.address,
      fallbackRecipient: ZeroAddress,
      fallbackDelay: 0n,
      pendingOwner: ZeroAddress,
      pendingReadyAt: 0n
    },
    nonce: options.nonce ?? 0n,
    balances: new Map(Object.entries(options.balances ?? {}).map(([k, v]) => [k.toLowerCase(), v]))
  })
}

/**
 * Every service the pipeline needs, over `world`; `env` overrides settings, `oracle` replaces the
 * stub fee oracle.
 */
export const claimsLayer = (
  world: World,
  env: Record<string, string> = {},
  options: { readonly oracle?: Layer.Layer<FeeOracle> } = {}
) => {
  const settings = settingsLayer(env)
  // Estimation executes the transaction, as a node does: a reverting one fails with its revert
  // (the preflight's one call). No `eth_call` is stubbed: the claim path makes none.
  const chain = mockChainClient({
    estimateGas: (request) => Effect.flatMap(world.simulate(request), () => world.estimate(request))
  })
  const sender = Layer.succeed(TxSender, {
    address: relayer.address,
    submit: (request) => {
      world.submitted.push(request)
      return world.submit(request)
    },
    status: () => Effect.fail(new Unavailable({ message: "not in these tests" }))
  })
  const accounts = Layer.succeed(AccountReader, {
    read: (id) =>
      Effect.sync(() => {
        world.reads++
        const entry = world.accounts.get(id.toLowerCase())
        return {
          account: Option.fromNullable(entry?.account),
          nonce: entry?.nonce ?? 0n,
          bindNonce: 0n,
          balance: (asset: string) => entry?.balances.get(asset.toLowerCase()) ?? 0n
        }
      })
  })
  const stubOracle = Layer.succeed(FeeOracle, {
    quote: (request) =>
      Effect.sync(() => {
        world.quoted.push(request)
        return {
          relayerFee: world.fee,
          gasEstimate: GAS_BUDGET,
          gasPrice: 1n,
          price: { num: 1n, den: 1n },
          validUntil: 60
        }
      }),
    gasBudget: () => GAS_BUDGET,
    gasPrice: Effect.sync(() => world.gasPrice),
    isCurrent: () => false
  })
  const signatures = Layer.succeed(
    VaultSignatures,
    VaultSignatures.make({
      chainId: CHAIN_ID,
      vault: VAULT,
      hasCode: (address) => Effect.succeed(world.contracts.has(address.toLowerCase()))
    })
  )
  return Relayer.writeServices.pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        chain,
        accounts,
        options.oracle ?? stubOracle,
        signatures,
        DenyList.test([DENIED]),
        IdRateLimit.layer,
        // No database here: the reservations have tests of their own (reservations.test.ts).
        NonceReservations.test,
        RevertCooldowns.test,
        BindBudget.test,
        TxPreflight.layer.pipe(Layer.provide(Layer.mergeAll(chain, sender)))
      )
    ),
    Layer.provideMerge(sender),
    Layer.provideMerge(settings)
  )
}

export const submit = (request: ClaimRequest) => Effect.flatMap(Claims, (claims) => claims.submit(request))
