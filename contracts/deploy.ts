// Deploys and configures the reference contracts on a development chain (docs/protocol.md §8-9).
import {
  type Abi,
  type Account,
  type Address,
  type Chain,
  createPublicClient,
  createWalletClient,
  defineChain,
  getAddress,
  type Hex,
  http,
  type PublicClient,
  parseUnits,
  type Transport,
  type WalletClient
} from "viem"
import { mnemonicToAccount } from "viem/accounts"
import { ANVIL_MNEMONIC } from "../src/chain/anvil.js"
import { FARCASTER_ID_REGISTRY, FARCASTER_KEY_REGISTRY } from "../src/config/attestor.js"
import {
  feeVaultAbi,
  gasBurningWalletAbi,
  idRegistryStandInAbi,
  keyRegistryStandInAbi,
  mockAggregatorV3Abi,
  mockSwapRouterAbi,
  shieldAdapterAbi,
  smartWalletAbi,
  testTokenAbi
} from "./abi.js"
import { type Artifacts, loadArtifacts } from "./build.js"

/** Mnemonic account roles of the devnet (docs/protocol.md §9); #3..#9 are free for users and tests. */
export const devnetRoles = { admin: 0, relayer: 1, attestor: 2, firstFree: 3 } as const

/** Anvil's default-mnemonic account at `index`. */
export const devnetAccount = (index: number, mnemonic: string = ANVIL_MNEMONIC) =>
  mnemonicToAccount(mnemonic, { addressIndex: index })

export interface DeploymentAssetInfo {
  readonly symbol: string
  readonly decimals: number
  readonly priceFeed: Address
}

/** The deployment file of docs/protocol.md §8 plus `tokens` and `bindDelay`; ready for JSON.stringify. */
export interface DevnetDeployment {
  readonly chainId: number
  readonly vault: Address
  readonly settlementAsset: Address
  readonly shieldAdapter: Address
  readonly swapRouter: Address
  readonly startBlock: number
  readonly quotedFullBalance: true
  readonly assets: Readonly<Record<Address, DeploymentAssetInfo>>
  readonly nativePriceFeed: Address
  /** Symbol to address; every one has an open `mint(address,uint256)`. */
  readonly tokens: Readonly<Record<string, Address>>
  /** Seconds, as a decimal string like every delay in the protocol's JSON. */
  readonly bindDelay: string
}

export interface TokenSpec {
  readonly symbol: string
  readonly name: string
  readonly decimals: number
  /** USD price with 8 decimals, as Chainlink USD feeds report it. */
  readonly usdPrice: bigint
}

export interface DeployOptions {
  /** Deployer, admin and launcher. Default: mnemonic account #0. */
  readonly admin?: Account
  /** Default: mnemonic account #2. */
  readonly attestors?: readonly Address[]
  /** Default 1. */
  readonly attestorThreshold?: bigint
  /** Seconds, default 3600. */
  readonly bindDelay?: bigint
  /** Default: the admin. */
  readonly launcher?: Address
  /** The first one is the settlement asset. Default: USDT (18), WETH (18), USDC (6). */
  readonly tokens?: readonly TokenSpec[]
  /** USD price of the native coin, 8 decimals. Default 3000. */
  readonly nativeUsdPrice?: bigint
  /** Settlement asset the swap router holds to pay out, in whole units. Default 1e9. */
  readonly routerLiquidity?: bigint
  /** Precompiled artifacts; default {@link loadArtifacts}. */
  readonly artifacts?: Artifacts
}

export const defaultTokens: readonly TokenSpec[] = [
  { symbol: "USDT", name: "Tether USD (test)", decimals: 18, usdPrice: 100_000_000n },
  { symbol: "WETH", name: "Wrapped Ether (test)", decimals: 18, usdPrice: 300_000_000_000n },
  { symbol: "USDC", name: "USD Coin (test)", decimals: 6, usdPrice: 100_000_000n }
]

const PRICE_FEED_DECIMALS = 8
const RATE_SCALE = 10n ** 18n

export interface ChainTarget {
  readonly publicClient: PublicClient
  readonly walletClient: WalletClient<Transport, Chain, Account>
}

/** Clients for `rpcUrl` that send as `account`; polling is fast because the node is local. */
export async function devnetClients(rpcUrl: string, account: Account): Promise<ChainTarget> {
  const probe = createPublicClient({ transport: http(rpcUrl) })
  const chainId = await probe.getChainId()
  const chain = defineChain({
    id: chainId,
    name: `devnet-${chainId}`,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } }
  })
  const publicClient = createPublicClient({ chain, transport: http(rpcUrl), pollingInterval: 50 })
  const walletClient = createWalletClient({ account, chain, transport: http(rpcUrl), pollingInterval: 50 })
  return { publicClient, walletClient }
}

const resolveTarget = async (target: string | ChainTarget, account: Account): Promise<ChainTarget> =>
  typeof target === "string" ? devnetClients(target, account) : target

async function deploy(
  { publicClient, walletClient }: ChainTarget,
  abi: Abi,
  bytecode: Hex,
  args: readonly unknown[]
): Promise<{ address: Address; blockNumber: bigint }> {
  const hash = await walletClient.deployContract({ abi, bytecode, args })
  const receipt = await publicClient.waitForTransactionReceipt({ hash })
  if (receipt.status !== "success" || receipt.contractAddress == null) {
    throw new Error(`deployment reverted (${hash})`)
  }
  return { address: getAddress(receipt.contractAddress), blockNumber: receipt.blockNumber }
}

async function send(
  target: ChainTarget,
  request: Parameters<ChainTarget["walletClient"]["writeContract"]>[0]
) {
  const hash = await target.walletClient.writeContract(request)
  const receipt = await target.publicClient.waitForTransactionReceipt({ hash })
  if (receipt.status !== "success") throw new Error(`transaction reverted (${hash})`)
  return receipt
}

/**
 * Deploys the test tokens, their price feeds, the swap router (rates into the settlement asset,
 * funded with it), the shield adapter and the vault, and configures the vault: attestors, threshold,
 * bind delay, adapter, router and launcher.
 */
export async function deployDevnet(
  target: string | ChainTarget,
  options: DeployOptions = {}
): Promise<DevnetDeployment> {
  const admin = options.admin ?? devnetAccount(devnetRoles.admin)
  const chain = await resolveTarget(target, admin)
  const artifacts = options.artifacts ?? (await loadArtifacts())
  const tokenSpecs = options.tokens ?? defaultTokens
  const settlementSpec = tokenSpecs[0]
  if (settlementSpec === undefined) throw new Error("deployDevnet needs at least the settlement token")
  const attestors = options.attestors ?? [devnetAccount(devnetRoles.attestor).address]
  const bindDelay = options.bindDelay ?? 3600n
  const chainId = await chain.publicClient.getChainId()

  const tokens: Record<string, Address> = {}
  const assets: Record<Address, DeploymentAssetInfo> = {}
  for (const spec of tokenSpecs) {
    const token = await deploy(chain, testTokenAbi, artifacts.TestToken.bytecode, [
      spec.name,
      spec.symbol,
      spec.decimals
    ])
    const feed = await deploy(chain, mockAggregatorV3Abi, artifacts.MockAggregatorV3.bytecode, [
      PRICE_FEED_DECIMALS,
      spec.usdPrice,
      `${spec.symbol} / USD`
    ])
    tokens[spec.symbol] = token.address
    assets[token.address] = { symbol: spec.symbol, decimals: spec.decimals, priceFeed: feed.address }
  }
  const settlementAsset = tokens[settlementSpec.symbol]!
  const nativeFeed = await deploy(chain, mockAggregatorV3Abi, artifacts.MockAggregatorV3.bytecode, [
    PRICE_FEED_DECIMALS,
    options.nativeUsdPrice ?? 300_000_000_000n,
    "ETH / USD"
  ])

  const router = await deploy(chain, mockSwapRouterAbi, artifacts.MockSwapRouter.bytecode, [])
  for (const spec of tokenSpecs.slice(1)) {
    // Raw-unit rate from the two USD prices and the decimals difference.
    const rate =
      (spec.usdPrice * RATE_SCALE * 10n ** BigInt(settlementSpec.decimals)) /
      (settlementSpec.usdPrice * 10n ** BigInt(spec.decimals))
    await send(chain, {
      address: router.address,
      abi: mockSwapRouterAbi,
      functionName: "setRate",
      args: [tokens[spec.symbol]!, settlementAsset, rate]
    })
  }
  await send(chain, {
    address: settlementAsset,
    abi: testTokenAbi,
    functionName: "mint",
    args: [
      router.address,
      parseUnits(String(options.routerLiquidity ?? 1_000_000_000n), settlementSpec.decimals)
    ]
  })

  const adapter = await deploy(chain, shieldAdapterAbi, artifacts.ShieldAdapter.bytecode, [
    settlementAsset,
    admin.address
  ])
  const vault = await deploy(chain, feeVaultAbi, artifacts.FeeVault.bytecode, [
    settlementAsset,
    admin.address
  ])
  const configure = (
    functionName:
      | "setAttestor"
      | "setAttestorThreshold"
      | "setBindDelay"
      | "setShieldAdapter"
      | "setSwapRouter"
      | "setLauncher",
    args: readonly unknown[]
  ) => send(chain, { address: vault.address, abi: feeVaultAbi as Abi, functionName, args })
  for (const attestor of attestors) await configure("setAttestor", [attestor, true])
  await configure("setAttestorThreshold", [options.attestorThreshold ?? 1n])
  await configure("setBindDelay", [bindDelay])
  await configure("setShieldAdapter", [adapter.address])
  await configure("setSwapRouter", [router.address])
  await configure("setLauncher", [options.launcher ?? admin.address])

  return {
    chainId,
    vault: vault.address,
    settlementAsset,
    shieldAdapter: adapter.address,
    swapRouter: router.address,
    startBlock: Number(vault.blockNumber),
    quotedFullBalance: true,
    assets,
    nativePriceFeed: nativeFeed.address,
    tokens,
    bindDelay: bindDelay.toString()
  }
}

/** Mints `amount` whole units of every devnet token to each recipient (default accounts #3..#9). */
export async function mintSampleBalances(
  target: string | ChainTarget,
  deployment: DevnetDeployment,
  options: {
    readonly recipients?: readonly Address[]
    readonly amount?: bigint
    readonly sender?: Account
  } = {}
): Promise<void> {
  const chain = await resolveTarget(target, options.sender ?? devnetAccount(devnetRoles.admin))
  const recipients =
    options.recipients ??
    Array.from({ length: 7 }, (_, i) => devnetAccount(devnetRoles.firstFree + i).address as Address)
  for (const [address, info] of Object.entries(deployment.assets)) {
    for (const recipient of recipients) {
      await send(chain, {
        address: address as Address,
        abi: testTokenAbi,
        functionName: "mint",
        args: [recipient, parseUnits(String(options.amount ?? 1000n), info.decimals)]
      })
    }
  }
}

/**
 * Deploys a fresh 18-decimal test token and announces it through the vault's `launch`, as a token
 * launcher would, sent by the launcher (default: the admin account).
 */
export async function launchSampleToken(
  target: string | ChainTarget,
  deployment: DevnetDeployment,
  options: {
    readonly beneficiaryId: Hex
    readonly beneficiaryHint?: Hex
    readonly symbol?: string
    readonly launcher?: Account
    readonly artifacts?: Artifacts
  }
): Promise<{ token: Address; txHash: Hex; blockNumber: bigint }> {
  const chain = await resolveTarget(target, options.launcher ?? devnetAccount(devnetRoles.admin))
  const artifacts = options.artifacts ?? (await loadArtifacts())
  const symbol = options.symbol ?? "LAUNCH"
  const token = await deploy(chain, testTokenAbi, artifacts.TestToken.bytecode, [
    `${symbol} (test)`,
    symbol,
    18
  ])
  const receipt = await send(chain, {
    address: deployment.vault,
    abi: feeVaultAbi,
    functionName: "launch",
    args: [token.address, options.beneficiaryId, options.beneficiaryHint ?? "0x"]
  })
  return { token: token.address, txHash: receipt.transactionHash, blockNumber: receipt.blockNumber }
}

/** Deploys an ERC-1271 wallet owned by `owner`, for contract-owner accounts. */
export async function deploySmartWallet(
  target: string | ChainTarget,
  owner: Address,
  options: { readonly sender?: Account; readonly artifacts?: Artifacts } = {}
): Promise<Address> {
  const chain = await resolveTarget(target, options.sender ?? devnetAccount(devnetRoles.admin))
  const artifacts = options.artifacts ?? (await loadArtifacts())
  return (await deploy(chain, smartWalletAbi, artifacts.SmartWallet.bytecode, [owner])).address
}

/**
 * Deploys an ERC-1271 wallet owned by `owner` that burns `burnGas` in each signature check and
 * whose sender (its admin) can make it refuse every signature; all instances share one code hash.
 */
export async function deployGasBurningWallet(
  target: string | ChainTarget,
  owner: Address,
  burnGas: bigint,
  options: { readonly sender?: Account; readonly artifacts?: Artifacts } = {}
): Promise<Address> {
  const chain = await resolveTarget(target, options.sender ?? devnetAccount(devnetRoles.admin))
  const artifacts = options.artifacts ?? (await loadArtifacts())
  return (await deploy(chain, gasBurningWalletAbi, artifacts.GasBurningWallet.bytecode, [owner, burnGas]))
    .address
}

export { FARCASTER_ID_REGISTRY, FARCASTER_KEY_REGISTRY }

/** The fid whose custody address is mnemonic account #i on the devnet (i = 3..9). */
export const devnetFid = (index: number): bigint => 1000n + BigInt(index)

/**
 * Places stand-ins of Farcaster's IdRegistry and KeyRegistry at their canonical addresses (deployed,
 * then their runtime code copied there with anvil_setCode) and registers mnemonic accounts #3..#9 as
 * custody addresses of fids 1003..1009.
 */
export async function installFarcasterRegistries(
  target: string | ChainTarget,
  options: { readonly artifacts?: Artifacts } = {}
): Promise<void> {
  const chain = await resolveTarget(target, devnetAccount(devnetRoles.admin))
  const artifacts = options.artifacts ?? (await loadArtifacts())
  const place = async (abi: Abi, bytecode: Hex, at: Address) => {
    const { address } = await deploy(chain, abi, bytecode, [])
    const code = await chain.publicClient.getCode({ address })
    if (code === undefined) throw new Error("the registry stand-in has no code")
    await chain.publicClient.request({ method: "anvil_setCode" as never, params: [at, code] as never })
  }
  await place(idRegistryStandInAbi, artifacts.IdRegistryStandIn.bytecode, FARCASTER_ID_REGISTRY)
  await place(keyRegistryStandInAbi, artifacts.KeyRegistryStandIn.bytecode, FARCASTER_KEY_REGISTRY)
  for (let index = devnetRoles.firstFree; index <= 9; index++)
    await send(chain, {
      address: FARCASTER_ID_REGISTRY,
      abi: idRegistryStandInAbi,
      functionName: "register",
      args: [devnetAccount(index).address, devnetFid(index)]
    })
}
