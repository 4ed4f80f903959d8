// Shared setup for the contract tests: one anvil per test file, the devnet deployment, signing helpers
// built on the protocol's EIP-712 definitions, and a snapshot restored before every test.
import {
  type Abi,
  type Account,
  type Address,
  BaseError,
  type Chain,
  type ContractEventName,
  type ContractFunctionArgs,
  type ContractFunctionName,
  ContractFunctionRevertedError,
  createPublicClient,
  createTestClient,
  createWalletClient,
  defineChain,
  encodeAbiParameters,
  encodeFunctionData,
  type Hex,
  hashTypedData,
  http,
  keccak256,
  type Log,
  parseEventLogs,
  type TransactionReceipt,
  type TypedDataDefinition,
  type WriteContractParameters
} from "viem"
import type { HDAccount } from "viem/accounts"
import { afterAll, beforeAll, beforeEach, expect } from "vitest"
import { feeVaultAbi, shieldAdapterAbi, testTokenAbi } from "../../contracts/abi.js"
import { type DevnetDeployment, deployDevnet, devnetAccount } from "../../contracts/deploy.js"
import { vaultDomain, vaultTypes } from "../../schema/eip712.js"
import { ownerCommitment, ZERO_ADDRESS } from "../../schema/ids.js"
import { type AnvilInstance, spawnAnvil } from "../../src/chain/anvil.js"

export { ZERO_ADDRESS }

/** Far enough ahead that no test's clock changes reach it. */
export const FAR_DEADLINE = 4_000_000_000n
export const EMPTY_HASH: Hex = keccak256("0x")
export const units = (whole: bigint, decimals = 18): bigint => whole * 10n ** BigInt(decimals)

export type VaultMessage<P extends keyof typeof vaultTypes> = TypedDataDefinition<
  typeof vaultTypes,
  P
>["message"]

export type ClaimMessage = VaultMessage<"Claim">

type WriteRequest<
  abi extends Abi | readonly unknown[],
  functionName extends ContractFunctionName<abi, "nonpayable" | "payable">,
  args extends ContractFunctionArgs<abi, "nonpayable" | "payable", functionName>
> = WriteContractParameters<abi, functionName, args, Chain, undefined> & { readonly account: Account }

export interface Ctx {
  readonly anvil: AnvilInstance
  readonly deployment: DevnetDeployment
  readonly chainId: number
  readonly vault: Address
  readonly usdt: Address
  readonly weth: Address
  readonly usdc: Address
  readonly adapter: Address
  readonly router: Address
  readonly admin: HDAccount
  readonly relayer: HDAccount
  readonly attestor: HDAccount
  readonly publicClient: ReturnType<typeof makeClients>["publicClient"]
  readonly testClient: ReturnType<typeof makeClients>["testClient"]
  readonly walletClient: ReturnType<typeof makeClients>["walletClient"]
}

const makeClients = (rpcUrl: string, chain: Chain) => ({
  publicClient: createPublicClient({ chain, transport: http(rpcUrl), pollingInterval: 20 }),
  testClient: createTestClient({ chain, mode: "anvil", transport: http(rpcUrl), pollingInterval: 20 }),
  walletClient: createWalletClient({ chain, transport: http(rpcUrl), pollingInterval: 20 })
})

/** Mnemonic accounts by index, derived once. */
const accountCache = new Map<number, HDAccount>()
export const account = (index: number): HDAccount => {
  let found = accountCache.get(index)
  if (found === undefined) {
    found = devnetAccount(index)
    accountCache.set(index, found)
  }
  return found
}

/**
 * Starts anvil, deploys the devnet contracts and runs `prepare` once; every test then starts from the
 * state `prepare` left (anvil snapshot, restored before each test).
 */
export function useVault(prepare: (ctx: Ctx) => Promise<void> = async () => {}): Ctx {
  const holder: { ctx?: Ctx; snapshot?: Hex } = {}
  beforeAll(async () => {
    const anvil = await spawnAnvil()
    try {
      const deployment = await deployDevnet(anvil.rpcUrl)
      const chain = defineChain({
        id: deployment.chainId,
        name: "anvil",
        nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
        rpcUrls: { default: { http: [anvil.rpcUrl] } }
      })
      const clients = makeClients(anvil.rpcUrl, chain)
      holder.ctx = {
        anvil,
        deployment,
        chainId: deployment.chainId,
        vault: deployment.vault,
        usdt: deployment.settlementAsset,
        weth: deployment.tokens.WETH!,
        usdc: deployment.tokens.USDC!,
        adapter: deployment.shieldAdapter,
        router: deployment.swapRouter,
        admin: account(0),
        relayer: account(1),
        attestor: account(2),
        ...clients
      }
      await prepare(holder.ctx)
      holder.snapshot = await clients.testClient.snapshot()
    } catch (error) {
      await anvil.stop()
      throw error
    }
  })
  beforeEach(async () => {
    const { testClient } = holder.ctx!
    // Anvil drops a snapshot when reverting to it, so take a fresh one each time.
    await testClient.revert({ id: holder.snapshot! })
    holder.snapshot = await testClient.snapshot()
  })
  afterAll(async () => {
    await holder.ctx?.anvil.stop()
  })
  // Tests read the context lazily, after beforeAll has filled it.
  return new Proxy({} as Ctx, {
    get: (_, key) => {
      if (holder.ctx === undefined) throw new Error("vault fixture used before beforeAll ran")
      return holder.ctx[key as keyof Ctx]
    }
  })
}

/** Sends a contract call from `request.account` and waits for a successful receipt. */
export async function send<
  const abi extends Abi | readonly unknown[],
  functionName extends ContractFunctionName<abi, "nonpayable" | "payable">,
  args extends ContractFunctionArgs<abi, "nonpayable" | "payable", functionName>
>(ctx: Ctx, request: WriteRequest<abi, functionName, args>): Promise<TransactionReceipt> {
  // An estimate is exact for the block it was made in; the mined block can differ (a timestamp that
  // turns a same-value store into a real one), so send with headroom as a relayer would.
  const estimate = await ctx.publicClient.estimateContractGas(request as never)
  const hash = await ctx.walletClient.writeContract({ ...request, gas: (estimate * 13n) / 10n } as never)
  const receipt = await ctx.publicClient.waitForTransactionReceipt({ hash })
  if (receipt.status !== "success") {
    const trace = await ctx.publicClient.request({
      method: "debug_traceTransaction" as never,
      params: [hash, { tracer: "callTracer" }] as never
    })
    const tx = await ctx.publicClient.getTransaction({ hash })
    throw new Error(
      `transaction ${hash} reverted (gas ${tx.gas}, used ${receipt.gasUsed}): ${JSON.stringify(trace).slice(0, 3000)}`
    )
  }
  return receipt
}

/** Sends a vault call. */
export const vaultSend = <
  functionName extends ContractFunctionName<typeof feeVaultAbi, "nonpayable">,
  args extends ContractFunctionArgs<typeof feeVaultAbi, "nonpayable", functionName>
>(
  ctx: Ctx,
  from: Account,
  functionName: functionName,
  args: args
): Promise<TransactionReceipt> =>
  send(ctx, { account: from, address: ctx.vault, abi: feeVaultAbi, functionName, args } as never)

/** Asserts that `action` reverts with the custom error `errorName` (or `Error` for reason strings). */
export async function expectRevert(action: Promise<unknown>, errorName: string): Promise<readonly unknown[]> {
  let caught: unknown
  try {
    await action
  } catch (error) {
    caught = error
  }
  if (caught === undefined) throw new Error(`expected a revert with ${errorName}, but the call succeeded`)
  if (!(caught instanceof BaseError)) throw caught
  const reverted = caught.walk((e) => e instanceof ContractFunctionRevertedError)
  if (!(reverted instanceof ContractFunctionRevertedError)) throw caught
  expect(reverted.data?.errorName ?? `<undecoded ${reverted.signature ?? "revert"}>`).toBe(errorName)
  return reverted.data?.args ?? []
}

/** Decoded vault (and shield adapter) events of a receipt, by name. */
export const events = <const name extends ContractEventName<typeof feeVaultAbi>>(
  receipt: TransactionReceipt,
  eventName: name
) => parseEventLogs({ abi: feeVaultAbi, logs: receipt.logs as Log[], eventName })

export const adapterEvents = (receipt: TransactionReceipt) =>
  parseEventLogs({ abi: shieldAdapterAbi, logs: receipt.logs as Log[], eventName: "Shielded" })

/** Signs one of the vault's EIP-712 messages with an externally owned account. */
export const signVault = <P extends keyof typeof vaultTypes>(
  ctx: Ctx,
  signer: HDAccount,
  primaryType: P,
  message: VaultMessage<P>
): Promise<Hex> =>
  signer.signTypedData({
    domain: vaultDomain(ctx.chainId, ctx.vault),
    types: vaultTypes,
    primaryType,
    message
  } as never)

/** The digest an ERC-1271 wallet is asked about, signed raw by the wallet's EOA owner. */
export const signVaultForWallet = <P extends keyof typeof vaultTypes>(
  ctx: Ctx,
  walletOwner: HDAccount,
  primaryType: P,
  message: VaultMessage<P>
): Promise<Hex> =>
  walletOwner.sign({
    hash: hashTypedData({
      domain: vaultDomain(ctx.chainId, ctx.vault),
      types: vaultTypes,
      primaryType,
      message
    } as never)
  })

export const recipientData = (recipient: Address): Hex =>
  encodeAbiParameters([{ type: "address" }], [recipient])

export const balanceOf = (ctx: Ctx, token: Address, holder: Address): Promise<bigint> =>
  ctx.publicClient.readContract({
    address: token,
    abi: testTokenAbi,
    functionName: "balanceOf",
    args: [holder]
  })

export const vaultBalance = (ctx: Ctx, id: Hex, asset: Address): Promise<bigint> =>
  ctx.publicClient.readContract({
    address: ctx.vault,
    abi: feeVaultAbi,
    functionName: "balanceOf",
    args: [id, asset]
  })

export const nonceOf = (ctx: Ctx, id: Hex): Promise<bigint> =>
  ctx.publicClient.readContract({ address: ctx.vault, abi: feeVaultAbi, functionName: "nonces", args: [id] })

export const bindNonceOf = (ctx: Ctx, id: Hex): Promise<bigint> =>
  ctx.publicClient.readContract({
    address: ctx.vault,
    abi: feeVaultAbi,
    functionName: "bindNonces",
    args: [id]
  })

export async function accountOf(ctx: Ctx, id: Hex) {
  const [
    kind,
    owner,
    fallbackRecipient,
    fallbackDelay,
    lastActivity,
    pendingOwner,
    pendingReadyAt,
    sweepClosedUntil
  ] = await ctx.publicClient.readContract({
    address: ctx.vault,
    abi: feeVaultAbi,
    functionName: "accountOf",
    args: [id]
  })
  return {
    kind,
    owner,
    fallbackRecipient,
    fallbackDelay,
    lastActivity,
    pendingOwner,
    pendingReadyAt,
    sweepClosedUntil
  }
}

export const blockTime = async (ctx: Ctx, receipt: TransactionReceipt): Promise<bigint> =>
  (await ctx.publicClient.getBlock({ blockNumber: receipt.blockNumber })).timestamp

export const latestTime = async (ctx: Ctx): Promise<bigint> => (await ctx.publicClient.getBlock()).timestamp

/** Moves the chain clock forward and mines a block at the new time. */
export async function advance(ctx: Ctx, seconds: bigint): Promise<void> {
  await ctx.testClient.increaseTime({ seconds: Number(seconds) })
  await ctx.testClient.mine({ blocks: 1 })
}

/** Mints `amount` of `token` to `from`, approves the vault and deposits it for `id`. */
export async function fund(ctx: Ctx, id: Hex, token: Address, amount: bigint, from: HDAccount = account(9)) {
  await send(ctx, {
    account: from,
    address: token,
    abi: testTokenAbi,
    functionName: "mint",
    args: [from.address, amount]
  })
  await send(ctx, {
    account: from,
    address: token,
    abi: testTokenAbi,
    functionName: "approve",
    args: [ctx.vault, amount]
  })
  return vaultSend(ctx, from, "deposit", [id, token, amount])
}

/** Registers a kind-1 account for `owner` (no fallback unless given) and returns its id. */
export async function registerOwner(
  ctx: Ctx,
  owner: Address,
  options: { salt?: Hex; fallbackRecipient?: Address; fallbackDelay?: bigint; from?: HDAccount } = {}
): Promise<Hex> {
  const salt = options.salt ?? keccak256(owner)
  const receipt = await vaultSend(ctx, options.from ?? account(9), "registerOwner", [
    owner,
    salt,
    options.fallbackRecipient ?? ZERO_ADDRESS,
    options.fallbackDelay ?? 0n
  ])
  const [registered] = events(receipt, "Registered")
  expect(registered?.args.commitment).toBe(ownerCommitment(owner, salt))
  return registered!.args.id
}

/** A claim message with sensible defaults: direct adapter, no fee, relayer = the devnet relayer. */
export const claimMessage = (ctx: Ctx, fields: Partial<ClaimMessage> & Pick<ClaimMessage, "beneficiaryId">) =>
  ({
    asset: ctx.usdt,
    amount: units(1n),
    adapter: ZERO_ADDRESS,
    dataHash: EMPTY_HASH,
    relayer: ctx.relayer.address,
    relayerFee: 0n,
    nonce: 0n,
    deadline: FAR_DEADLINE,
    ...fields
  }) satisfies ClaimMessage

export const encodeVaultCall = <
  functionName extends ContractFunctionName<typeof feeVaultAbi, "nonpayable">,
  args extends ContractFunctionArgs<typeof feeVaultAbi, "nonpayable", functionName>
>(
  functionName: functionName,
  args: args
): Hex => encodeFunctionData({ abi: feeVaultAbi, functionName, args } as never)
