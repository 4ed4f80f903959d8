/**
 * What every example shares: the devnet's deployment file, viem clients for its chain and its
 * mnemonic accounts, the typed clients of both services, and small helpers to print steps, wait
 * for transactions and turn failures into one clear line and a non-zero exit.
 */
import { readFileSync } from "node:fs"
import { resolve } from "node:path"
import { Effect, Schema } from "effect"
import {
  type Account,
  type Address,
  createPublicClient,
  createWalletClient,
  defineChain,
  type Hex,
  http,
  type TransactionReceipt
} from "viem"
import { mnemonicToAccount } from "viem/accounts"
import { TxStatusRequest } from "../../schema/relayer.js"
import {
  type AttestorClient,
  attestorFetchClient,
  type RelayerClient,
  relayerFetchClient
} from "../../src/client.js"

/** Anvil's default test mnemonic: the devnet's accounts #0..#9 (docs/protocol.md §9). */
export const DEVNET_MNEMONIC = "test test test test test test test test test test test junk"

/** `.devnet/deployment.json` as `npm run devnet` writes it (docs/protocol.md §8, §9). */
export interface DevnetFile {
  readonly chainId: number
  readonly vault: Address
  readonly settlementAsset: Address
  readonly shieldAdapter: Address
  readonly startBlock: number
  readonly assets: Record<string, { readonly symbol: string; readonly decimals: number }>
  readonly tokens: Record<string, Address>
  readonly bindDelay: string | number
  readonly rpcUrl: string
  readonly relayerUrl: string
  /** The first member of the attestor committee. */
  readonly attestorUrl: string
  readonly doublesUrl?: string
  readonly facilitatorUrl?: string
  /** The wallet page's origin (`npm run devnet`'s `DEVNET_WALLET_PORT`). */
  readonly walletUrl?: string
  /** The first member's hint key. */
  readonly hintPublicKey: Hex
  /** Signatures from different members a bind needs (docs/protocol.md §5). */
  readonly attestorThreshold: number
  /** Every member of the attestor committee, member 1 first (one on the default devnet). */
  readonly attestors: ReadonlyArray<{
    readonly url: string
    readonly address: Address
    readonly hintPublicKey: Hex
  }>
}

/** Where the deployment file is: `DEVNET_FILE`, else `.devnet/deployment.json` of the working directory. */
export const devnetFilePath = (): string => resolve(process.env.DEVNET_FILE ?? ".devnet/deployment.json")

export const loadDevnet = (): DevnetFile => {
  const path = devnetFilePath()
  let text: string
  try {
    text = readFileSync(path, "utf8")
  } catch {
    throw new Error(`cannot read ${path}: start the devnet with \`npm run devnet\` first, or set DEVNET_FILE`)
  }
  return JSON.parse(text) as DevnetFile
}

/** Mnemonic account `index` of the devnet. */
export const devnetAccount = (index: number) => mnemonicToAccount(DEVNET_MNEMONIC, { addressIndex: index })

export const devnetClients = (file: DevnetFile) => {
  const chain = defineChain({
    id: file.chainId,
    name: "devnet",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [file.rpcUrl] } }
  })
  const publicClient = createPublicClient({ chain, transport: http(file.rpcUrl) })
  const wallet = (account: Account) => createWalletClient({ account, chain, transport: http(file.rpcUrl) })
  return { chain, publicClient, wallet }
}

export type PublicClient = ReturnType<typeof devnetClients>["publicClient"]

/** The typed clients of both services (src/client.ts), over `fetch`. */
export const serviceClients = async (
  file: DevnetFile
): Promise<{ readonly relayer: RelayerClient; readonly attestor: AttestorClient }> => ({
  relayer: await Effect.runPromise(relayerFetchClient(file.relayerUrl)),
  attestor: await Effect.runPromise(attestorFetchClient(file.attestorUrl))
})

/** The typed client of every committee member, member 1 first. */
export const memberClients = (file: DevnetFile): Promise<ReadonlyArray<AttestorClient>> =>
  Promise.all(file.attestors.map((member) => Effect.runPromise(attestorFetchClient(member.url))))

/**
 * Runs one typed-client call. A refusal arrives as a tagged error (`FeeTooLow`, `NonceMismatch`,
 * …, schema/errors.ts): it becomes an exception naming the call, the tag and the service's message.
 */
export const call = async <A, E>(what: string, effect: Effect.Effect<A, E>): Promise<A> => {
  const result = await Effect.runPromise(Effect.either(effect))
  if (result._tag === "Right") return result.right
  const error = result.left as { readonly _tag?: string; readonly message?: string }
  throw new Error(`${what} was refused: ${error._tag ?? "error"}: ${error.message ?? String(error)}`)
}

/** A request body in its typed form, from its wire form (bigints as decimal strings). */
export const wire = <A, I>(schema: Schema.Schema<A, I>, value: unknown): A =>
  Schema.decodeUnknownSync(schema)(
    JSON.parse(JSON.stringify(value, (_, v) => (typeof v === "bigint" ? v.toString() : v)))
  )

let steps = 0
/** Prints a numbered step. */
export const step = (text: string): void => {
  steps++
  console.log(`\n${steps}. ${text}`)
}
/** Prints a detail of the current step. */
export const show = (label: string, value: unknown): void => {
  console.log(
    `   ${label}: ${typeof value === "bigint" ? value.toString() : typeof value === "string" ? value : JSON.stringify(value, (_, v) => (typeof v === "bigint" ? v.toString() : v))}`
  )
}

/** Waits for a transaction sent from one of the example's own accounts; it must succeed. */
export const mined = async (publicClient: PublicClient, hash: Hex): Promise<TransactionReceipt> => {
  const receipt = await publicClient.waitForTransactionReceipt({ hash })
  if (receipt.status !== "success") throw new Error(`transaction ${hash} reverted`)
  return receipt
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/**
 * Asks `ready` until it gives an answer, waiting longer each time (100 ms doubling up to 2 s), so
 * a wait of a few blocks costs the services a few requests, not one every 200 ms.
 */
const pollUntil = async <A>(
  ready: () => Promise<A | undefined>,
  timeout: string,
  withinMs = 120_000
): Promise<A> => {
  const until = Date.now() + withinMs
  for (let delay = 100; ; delay = Math.min(delay * 2, 2_000)) {
    const answer = await ready()
    if (answer !== undefined) return answer
    if (Date.now() > until) throw new Error(timeout)
    await sleep(delay)
  }
}

/**
 * Follows a relayed transaction with `POST /v1/tx-status` until it is mined: the relayer may
 * replace it with a higher gas price, and the status follows the replacement.
 */
export const relayedTx = (relayer: RelayerClient, txHash: Hex): Promise<number> =>
  pollUntil(async () => {
    const status = await call(
      "POST /v1/tx-status",
      relayer.transactions.txStatus({ payload: wire(TxStatusRequest, { txHash }) })
    )
    if (status.status === "reverted") throw new Error(`relayed transaction ${txHash} reverted`)
    return status.status === "success" ? status.blockNumber : undefined
  }, `relayed transaction ${txHash} was not mined in 2 minutes`)

/**
 * The account `id` as `GET /v1/accounts` lists it, once the relayer's index covers `block`: the
 * list is as of its `block`, so a client waits for the block its transaction was mined in.
 */
export const indexedAccount = (relayer: RelayerClient, id: Hex, block: number) =>
  pollUntil(async () => {
    const listed = await call("GET /v1/accounts", relayer.accounts.accounts({ headers: {} }))
    if (listed.block < block) return undefined
    const account = listed.accounts.find((a) => a.id === id)
    if (account === undefined)
      throw new Error(`account ${id} is not in /v1/accounts at block ${listed.block}`)
    return account
  }, `/v1/accounts did not reach block ${block} in 2 minutes`)

/** Waits until the attestor's vault indexer and hint index both cover `block` (`GET /v1/health`). */
export const attestorIndexed = (attestor: AttestorClient, block: number): Promise<void> =>
  pollUntil(async () => {
    const health = await call("GET /v1/health", attestor.operator.health())
    return (health.indexer?.block ?? -1) >= block && (health.hints?.block ?? -1) >= block ? true : undefined
  }, `the attestor did not index block ${block} in 2 minutes`).then(() => undefined)

/**
 * Now, for deadlines: the later of the chain's clock and this machine's. The chain's runs ahead of
 * the wall clock once a bind's timelock has been skipped with `evm_increaseTime`; the devnet's
 * attestor follows it (docs/protocol.md §9 "The devnet's clock").
 */
export const nowSeconds = async (publicClient: PublicClient): Promise<bigint> => {
  const block = await publicClient.getBlock({ blockTag: "latest" })
  const wall = BigInt(Math.floor(Date.now() / 1000))
  return block.timestamp > wall ? block.timestamp : wall
}

/** How far the chain's clock runs ahead of this machine's, in seconds. */
export const chainClockLead = async (publicClient: PublicClient): Promise<number> => {
  const block = await publicClient.getBlock({ blockTag: "latest" })
  return Number(block.timestamp) - Math.floor(Date.now() / 1000)
}

/** Runs an example: exit 0 on success, 1 with one line saying what failed. */
export const runExample = (name: string, main: () => Promise<void>): void => {
  console.log(`${name} against ${devnetFilePath()}`)
  main().then(
    () => {
      console.log(`\n✔ ${name}: done`)
      process.exit(0)
    },
    (error: unknown) => {
      console.error(`\n✘ ${name} failed: ${error instanceof Error ? error.message : String(error)}`)
      process.exit(1)
    }
  )
}
