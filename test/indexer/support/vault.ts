/**
 * A vault on a local anvil for the indexer tests, and scripted activity on it: every vault event
 * type over more than twenty accounts. Signing and sending reuse the contract tests' helpers.
 */
import {
  type Address,
  createPublicClient,
  createTestClient,
  createWalletClient,
  defineChain,
  type Hex,
  http,
  keccak256,
  numberToHex
} from "viem"
import type { HDAccount } from "viem/accounts"
import { feeVaultAbi } from "../../../contracts/abi.js"
import { deployDevnet } from "../../../contracts/deploy.js"
import {
  computeId,
  FULL,
  ownerCommitment,
  QUOTED,
  shieldPayload,
  templatesHash
} from "../../../schema/ids.js"
import { spawnAnvil } from "../../../src/chain/anvil.js"
import {
  account,
  advance,
  type Ctx,
  claimMessage,
  encodeVaultCall,
  events,
  FAR_DEADLINE,
  fund,
  nonceOf,
  recipientData,
  signVault,
  units,
  vaultSend,
  ZERO_ADDRESS
} from "../../contracts/fixture.js"

export type { Ctx }

/** Starts anvil and deploys the devnet contracts; `ctx.anvil.stop()` ends it. */
export async function startVault(): Promise<Ctx> {
  const anvil = await spawnAnvil()
  try {
    const deployment = await deployDevnet(anvil.rpcUrl)
    const chain = defineChain({
      id: deployment.chainId,
      name: "anvil",
      nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
      rpcUrls: { default: { http: [anvil.rpcUrl] } }
    })
    const transport = http(anvil.rpcUrl)
    return {
      anvil,
      deployment,
      chainId: deployment.chainId,
      vault: deployment.vault,
      usdt: deployment.settlementAsset,
      weth: deployment.tokens.WETH as Address,
      usdc: deployment.tokens.USDC as Address,
      adapter: deployment.shieldAdapter,
      router: deployment.swapRouter,
      admin: account(0),
      relayer: account(1),
      attestor: account(2),
      publicClient: createPublicClient({ chain, transport, pollingInterval: 20 }),
      testClient: createTestClient({ chain, mode: "anvil", transport, pollingInterval: 20 }),
      walletClient: createWalletClient({ chain, transport, pollingInterval: 20 })
    }
  } catch (error) {
    await anvil.stop()
    throw error
  }
}

const funder = () => account(9)
const fallbackRecipient = () => account(6).address

export interface OwnerAccount {
  readonly id: Hex
  owner: HDAccount
}

const saltOf = (owner: Address): Hex => keccak256(owner)

export const ownerId = (owner: Address, fallback: Address = ZERO_ADDRESS, delay = 0n): Hex =>
  computeId(1, ownerCommitment(owner, saltOf(owner)), fallback, delay)

export async function registerOwnerAccount(
  ctx: Ctx,
  owner: HDAccount,
  fallback: Address = ZERO_ADDRESS,
  delay = 0n
): Promise<OwnerAccount> {
  await vaultSend(ctx, funder(), "registerOwner", [owner.address, saltOf(owner.address), fallback, delay])
  return { id: ownerId(owner.address, fallback, delay), owner }
}

export async function registerHandleAccount(
  ctx: Ctx,
  seed: number,
  fallback: Address = ZERO_ADDRESS,
  delay = 0n
) {
  const commitment = keccak256(numberToHex(seed, { size: 32 }))
  const receipt = await vaultSend(ctx, funder(), "registerHandle", [commitment, fallback, delay])
  return events(receipt, "Registered")[0]?.args.id as Hex
}

export async function claim(
  ctx: Ctx,
  a: OwnerAccount,
  fields: { asset?: Address; amount: bigint; relayerFee?: bigint; adapter?: Address; data?: Hex }
) {
  const data = fields.data ?? recipientData(account(7).address)
  const message = claimMessage(ctx, {
    beneficiaryId: a.id,
    asset: fields.asset ?? ctx.usdt,
    amount: fields.amount,
    relayerFee: fields.relayerFee ?? 0n,
    adapter: fields.adapter ?? ZERO_ADDRESS,
    dataHash: keccak256(data),
    nonce: await nonceOf(ctx, a.id)
  })
  const signature = await signVault(ctx, a.owner, "Claim", message)
  return vaultSend(ctx, ctx.relayer, "claim", [message, data, signature])
}

export async function ping(ctx: Ctx, a: OwnerAccount) {
  const nonce = await nonceOf(ctx, a.id)
  const signature = await signVault(ctx, a.owner, "Ping", { id: a.id, nonce, deadline: FAR_DEADLINE })
  return vaultSend(ctx, ctx.relayer, "ping", [a.id, FAR_DEADLINE, signature])
}

export async function consolidate(
  ctx: Ctx,
  a: OwnerAccount,
  assetIn: Address,
  amountIn: bigint,
  minOut: bigint
) {
  const nonce = await nonceOf(ctx, a.id)
  const signature = await signVault(ctx, a.owner, "Consolidate", {
    id: a.id,
    assetIn,
    amountIn,
    minOut,
    nonce,
    deadline: FAR_DEADLINE
  })
  return vaultSend(ctx, ctx.relayer, "consolidate", [
    a.id,
    assetIn,
    amountIn,
    minOut,
    FAR_DEADLINE,
    signature
  ])
}

export const template = (ctx: Ctx, id: Hex, value: bigint, tag: number) =>
  shieldPayload(id, ctx.usdt, value, numberToHex(tag + 1, { size: 32 }))

export async function registerTemplates(ctx: Ctx, a: OwnerAccount, templates: readonly Hex[]) {
  const nonce = await nonceOf(ctx, a.id)
  const signature = await signVault(ctx, a.owner, "RegisterShieldTemplates", {
    id: a.id,
    templatesHash: templatesHash(templates),
    nonce,
    deadline: FAR_DEADLINE
  })
  return vaultSend(ctx, ctx.relayer, "registerShieldTemplates", [a.id, templates, FAR_DEADLINE, signature])
}

export async function rotate(ctx: Ctx, a: OwnerAccount, to: HDAccount) {
  const nonce = await nonceOf(ctx, a.id)
  const signature = await signVault(ctx, a.owner, "RotateOwner", {
    id: a.id,
    newOwner: to.address,
    nonce,
    deadline: FAR_DEADLINE
  })
  await vaultSend(ctx, ctx.relayer, "rotateOwner", [a.id, to.address, FAR_DEADLINE, signature])
  a.owner = to
}

const bindNonceOf = (ctx: Ctx, id: Hex) =>
  ctx.publicClient.readContract({
    address: ctx.vault,
    abi: feeVaultAbi,
    functionName: "bindNonces",
    args: [id]
  })

export async function proposeBind(ctx: Ctx, id: Hex, newOwner: Address) {
  const bindNonce = await bindNonceOf(ctx, id)
  const signature = await signVault(ctx, ctx.attestor, "BindOwner", {
    id,
    newOwner,
    bindNonce,
    deadline: FAR_DEADLINE
  })
  return vaultSend(ctx, ctx.relayer, "proposeBind", [id, newOwner, FAR_DEADLINE, [signature]])
}

export async function cancelBind(ctx: Ctx, id: Hex, owner: HDAccount) {
  const bindNonce = await bindNonceOf(ctx, id)
  const signature = await signVault(ctx, owner, "CancelBind", { id, bindNonce, deadline: FAR_DEADLINE })
  return vaultSend(ctx, ctx.relayer, "cancelBind", [id, FAR_DEADLINE, signature])
}

const BIND_DELAY = 3600n

/**
 * Every vault event type over 24 accounts (16 owner accounts, 8 handle accounts), including a
 * deposit before registration, a multicall with two events, full-balance and quoted amounts,
 * template shields, rotations, every bind outcome and fallback sweeps.
 */
export async function scriptedMix(ctx: Ctx): Promise<void> {
  const owners = Array.from({ length: 16 }, (_, i) => account(20 + i))
  // A deposit for an id that registers later.
  await fund(ctx, ownerId(owners[0]!.address), ctx.usdt, units(5n))
  const accounts: OwnerAccount[] = []
  for (const [i, owner] of owners.entries()) {
    if (i === 14) continue
    const withFallback = i === 12 || i === 13
    accounts[i] = await registerOwnerAccount(
      ctx,
      owner,
      withFallback ? fallbackRecipient() : ZERO_ADDRESS,
      withFallback ? 600n : 0n
    )
  }
  const handles: Hex[] = []
  for (let i = 0; i < 8; i++)
    handles.push(
      await registerHandleAccount(
        ctx,
        1000 + i,
        i % 2 === 1 ? fallbackRecipient() : ZERO_ADDRESS,
        i % 2 === 1 ? 86_400n : 0n
      )
    )

  for (const [i, a] of accounts.entries())
    if (a !== undefined) await fund(ctx, a.id, ctx.usdt, units(BigInt(100 + i)))
  for (const i of [5, 6, 7, 12]) await fund(ctx, accounts[i]!.id, ctx.weth, units(3n))
  for (const i of [8, 13]) await fund(ctx, accounts[i]!.id, ctx.usdc, units(50n, 6))
  for (const id of handles) await fund(ctx, id, ctx.usdt, units(20n))
  await fund(ctx, handles[3]!, ctx.weth, units(1n))

  // Claims: direct with a fee, the full balance, fee only, through the shield adapter, another asset.
  await claim(ctx, accounts[1]!, { amount: units(10n), relayerFee: units(1n) })
  await claim(ctx, accounts[1]!, { amount: units(2n) })
  await claim(ctx, accounts[2]!, { amount: FULL, relayerFee: units(1n) })
  await claim(ctx, accounts[3]!, { amount: units(1n), relayerFee: units(1n), data: "0x" })
  const a4 = accounts[4]!
  await claim(ctx, a4, {
    amount: units(30n),
    relayerFee: units(2n),
    adapter: ctx.adapter,
    data: shieldPayload(a4.id, ctx.usdt, units(28n))
  })
  await claim(ctx, accounts[5]!, { asset: ctx.weth, amount: units(1n) })

  // Consolidations: exact, full balance, quoted full balance.
  await consolidate(ctx, accounts[6]!, ctx.weth, units(1n), units(1000n))
  await consolidate(ctx, accounts[7]!, ctx.weth, FULL, units(1000n))
  await consolidate(ctx, accounts[8]!, ctx.usdc, QUOTED | units(60n, 6), units(40n))

  // Templates: register, shield two, register again (clears the rest).
  const a9 = accounts[9]!
  await registerTemplates(ctx, a9, [
    template(ctx, a9.id, units(3n), 0),
    template(ctx, a9.id, units(4n), 1),
    template(ctx, a9.id, units(5n), 2)
  ])
  await vaultSend(ctx, funder(), "shieldFromTemplate", [a9.id, 0n])
  await vaultSend(ctx, funder(), "shieldFromTemplate", [a9.id, 2n])
  await registerTemplates(ctx, a9, [template(ctx, a9.id, units(6n), 3), template(ctx, a9.id, units(7n), 4)])

  // Rotation with templates (cleared on rotation), then activity from the new key.
  const a10 = accounts[10]!
  await registerTemplates(ctx, a10, [
    template(ctx, a10.id, units(1n), 0),
    template(ctx, a10.id, units(2n), 1)
  ])
  await rotate(ctx, a10, account(40))
  await ping(ctx, a10)
  await ping(ctx, accounts[11]!)
  await ping(ctx, accounts[11]!)

  // Binds: finalized then proposed again and cancelled by the new owner; vetoed; left pending.
  const boundOwner = account(41)
  await proposeBind(ctx, handles[0]!, boundOwner.address)
  await advance(ctx, BIND_DELAY)
  await vaultSend(ctx, funder(), "finalizeBind", [handles[0]!])
  const handle0: OwnerAccount = { id: handles[0]!, owner: boundOwner }
  await registerTemplates(ctx, handle0, [template(ctx, handle0.id, units(1n), 0)])
  await proposeBind(ctx, handles[0]!, account(42).address)
  await cancelBind(ctx, handles[0]!, boundOwner)
  await proposeBind(ctx, handles[1]!, account(43).address)
  await vaultSend(ctx, ctx.attestor, "vetoBind", [handles[1]!])
  await proposeBind(ctx, handles[2]!, account(44).address)

  // Registration and a ping in one multicall, for an id that received a deposit before.
  const late: OwnerAccount = { id: ownerId(owners[14]!.address), owner: owners[14]! }
  await fund(ctx, late.id, ctx.weth, units(2n))
  const pingSignature = await signVault(ctx, late.owner, "Ping", {
    id: late.id,
    nonce: 0n,
    deadline: FAR_DEADLINE
  })
  await vaultSend(ctx, ctx.relayer, "multicall", [
    [
      encodeVaultCall("registerOwner", [late.owner.address, saltOf(late.owner.address), ZERO_ADDRESS, 0n]),
      encodeVaultCall("ping", [late.id, FAR_DEADLINE, pingSignature])
    ]
  ])

  // Sweeps once the fallback delays have passed without owner activity.
  await advance(ctx, 86_400n)
  await vaultSend(ctx, funder(), "sweepToFallback", [accounts[12]!.id, ctx.usdt])
  await vaultSend(ctx, funder(), "sweepToFallback", [accounts[12]!.id, ctx.weth])
  await vaultSend(ctx, funder(), "sweepToFallback", [handles[3]!, ctx.usdt])

  // A launch names a beneficiary; the projections ignore it but the store keeps it.
  await vaultSend(ctx, ctx.admin, "launch", [ctx.usdc, handles[4]!, "0x1234"])
}

/** A few blocks of ordinary activity for `accounts` (a reorg branch): deposits, pings, claims. */
export async function branchActivity(ctx: Ctx, seed: number, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const owner = account(60 + ((seed * 7 + i) % 20))
    const id = ownerId(owner.address)
    const registered = (
      await ctx.publicClient.readContract({
        address: ctx.vault,
        abi: feeVaultAbi,
        functionName: "accountOf",
        args: [id]
      })
    )[0]
    if (registered === 0) await registerOwnerAccount(ctx, owner)
    else if ((seed + i) % 3 === 0) await ping(ctx, { id, owner })
    else await fund(ctx, id, (seed + i) % 2 === 0 ? ctx.usdt : ctx.weth, units(BigInt(1 + seed + i)))
  }
}
