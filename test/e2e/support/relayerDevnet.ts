/**
 * A private devnet for end-to-end tests that speak to the relayer over HTTP the way an outside
 * client does (viem, docs/protocol.md and the deployment file): `VaultDevnet` is anvil with the
 * reference contracts and the chain helpers the tests share (funding accounts, registering them,
 * reading vault state, signing messages, mining); `RelayerDevnet` adds the relayer running in this
 * process and the HTTP helpers (posting, quoting, waiting for a transaction and for
 * `/v1/accounts` to cover a block). `recordingSender` and `liveChainLayers` build a write pipeline
 * on the same chain without HTTP and without sending, for tests of its settings.
 */
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Either, Exit, Layer, Schema, Scope } from "effect"
import {
  type Address,
  type ContractFunctionArgs,
  type ContractFunctionName,
  createPublicClient,
  createTestClient,
  type Hex,
  http,
  keccak256,
  type TypedDataDefinition,
  toHex,
  zeroAddress
} from "viem"
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts"
import { expect } from "vitest"
import { feeVaultAbi, testTokenAbi } from "../../../contracts/abi.js"
import { devnetAccount, devnetClients } from "../../../contracts/deploy.js"
import {
  type DevnetChain,
  devnetChain,
  devnetKeys,
  freeLoopbackPort,
  relayerEnv,
  withSettings,
  writeDevnetFile
} from "../../../layers/devnet.js"
import { Relayer } from "../../../layers/relayer.js"
import { vaultDomain, vaultTypes } from "../../../schema/eip712.js"
import { Unavailable } from "../../../schema/errors.js"
import { computeId, ownerCommitment } from "../../../schema/ids.js"
import { Account, QuoteQuery, TxStatusRequest } from "../../../schema/relayer.js"
import { ChainClient, type ChainClientShape, makeChainClient } from "../../../src/chain/ChainClient.js"
import { ChainId } from "../../../src/chain/chainId.js"
import { type RelayerClient, relayerFetchClient } from "../../../src/client.js"
import { RelayerSettings } from "../../../src/config/relayer.js"
import { AccountReader } from "../../../src/relayer/AccountReader.js"
import { BindBudget } from "../../../src/relayer/BindBudget.js"
import { FeeOracle } from "../../../src/relayer/FeeOracle.js"
import { IdRateLimit } from "../../../src/relayer/IdRateLimit.js"
import { NonceReservations } from "../../../src/relayer/NonceReservations.js"
import { RevertCooldowns } from "../../../src/relayer/RevertCooldowns.js"
import { TxPreflight } from "../../../src/relayer/TxPreflight.js"
import { DenyList } from "../../../src/relayer/validation/DenyList.js"
import { VaultSignatures } from "../../../src/relayer/validation/VaultSignatures.js"
import { type TxRequest, TxSender } from "../../../src/txsender/TxSender.js"

export const E18 = 10n ** 18n

export type VaultPrimaryType = keyof typeof vaultTypes
type VaultMessage<P extends VaultPrimaryType> = TypedDataDefinition<typeof vaultTypes, P>["message"]

/** JSON with bigints as decimal strings, as the wire carries them. */
export const json = (value: unknown) =>
  JSON.stringify(value, (_, v) => (typeof v === "bigint" ? v.toString() : v))

export interface KindOneOwner {
  readonly signer: PrivateKeyAccount
  readonly address: Address
  readonly salt: Hex
  readonly id: Hex
  /** The kind-1 registration payload of this account (no fallback). */
  readonly register: {
    readonly kind: 1
    readonly owner: Address
    readonly salt: Hex
    readonly fallbackRecipient: Address
    readonly fallbackDelay: bigint
  }
}

/** A fresh key and the kind-1 account it would own. */
export const freshOwner = (): KindOneOwner => {
  const signer = privateKeyToAccount(generatePrivateKey())
  const salt = keccak256(toHex(signer.address))
  return {
    signer,
    address: signer.address,
    salt,
    id: computeId(1, ownerCommitment(signer.address, salt), zeroAddress, 0n),
    register: { kind: 1, owner: signer.address, salt, fallbackRecipient: zeroAddress, fallbackDelay: 0n }
  }
}

export const freshAddress = () => privateKeyToAccount(generatePrivateKey()).address

/** A deadline far enough ahead to survive the tests' time travel. */
export const farDeadline = () => BigInt(Math.floor(Date.now() / 1000) + 30 * 86_400)

export interface IndexedAccount {
  readonly id: Hex
  readonly kind: number
  readonly owner: Address
  readonly pendingOwner: Address | null
  readonly pendingReadyAt: string | null
  readonly balances: Record<string, string>
  readonly shieldTemplates: number
  readonly nonce: string
  readonly bindNonce: string
}

let clients = 0
/** A client address of its own for each request, so the per-IP buckets stay apart (TRUST_PROXY=1). */
export const nextClient = () => {
  clients++
  return `10.${(clients >> 16) & 255}.${(clients >> 8) & 255}.${clients & 255}`
}

/** The devnet's hot key: the address the relayer sends from. */
export const devnetRelayerAddress: Address = privateKeyToAccount(devnetKeys.relayer).address

type VaultWriteName = ContractFunctionName<typeof feeVaultAbi, "nonpayable" | "payable">

/** Runs `effect` in a scope of its own that outlives it (closed at once if `effect` fails). */
const inNewScope = async <A, E>(
  effect: Effect.Effect<A, E, Scope.Scope>
): Promise<readonly [A, Scope.CloseableScope]> => {
  const scope = await Effect.runPromise(Scope.make())
  const value = await Effect.runPromise(
    effect.pipe(
      Scope.extend(scope),
      Effect.onError((cause) => Scope.close(scope, Exit.failCause(cause)))
    )
  )
  return [value, scope] as const
}

/** A committee of attestors on the vault (docs/protocol.md §9 "A committee devnet"). */
export interface CommitteeOptions {
  /** Members, 1 to 5. */
  readonly attestors?: number
  /** Signatures a bind needs, 1 to `attestors`. */
  readonly threshold?: number
}

/** Anvil with the reference contracts, and the chain helpers; no relayer. */
export class VaultDevnet {
  readonly rpcUrl: string
  readonly vault: Address
  readonly settlementAsset: Address
  readonly relayerAddress: Address = devnetRelayerAddress

  protected constructor(
    readonly chain: DevnetChain,
    private readonly scope: Scope.CloseableScope,
    /**
     * Each member's URL, member 1 first, when the chain was started with a committee: kept for
     * the member's restarts (`AttestorClient.start(net, env, { member })`).
     */
    readonly memberUrls?: ReadonlyArray<string>
  ) {
    this.rpcUrl = chain.anvil.rpcUrl
    this.vault = chain.deployment.vault
    this.settlementAsset = chain.deployment.settlementAsset
  }

  /**
   * The chain alone, for tests that run the relayer themselves (as a process, say); with
   * `committee`, its members registered on the vault at its threshold, and a free port set aside
   * for each (start them with `AttestorClient.start(net, env, { member })`).
   */
  static async start(name: string, committee?: CommitteeOptions): Promise<VaultDevnet> {
    const dir = join(tmpdir(), `${name}-${process.pid}`)
    if (committee === undefined) {
      const [chain, scope] = await inNewScope(devnetChain({ dir }))
      return new VaultDevnet(chain, scope)
    }
    const [{ chain, memberUrls }, scope] = await inNewScope(
      Effect.gen(function* () {
        const chain = yield* devnetChain({ dir, ...committee })
        const memberUrls: Array<string> = []
        for (const _ of chain.members) memberUrls.push(`http://127.0.0.1:${yield* freeLoopbackPort}`)
        yield* writeDevnetFile(chain, {
          relayerUrl: "http://127.0.0.1:1",
          attestorUrl: memberUrls[0]!,
          attestorUrls: memberUrls
        })
        return { chain, memberUrls }
      })
    )
    return new VaultDevnet(chain, scope, memberUrls)
  }

  dispose(): Promise<void> {
    return Effect.runPromise(Scope.close(this.scope, Exit.void))
  }

  token(symbol: string): Address {
    const address = this.chain.deployment.tokens[symbol]
    if (address === undefined) throw new Error(`the devnet has no ${symbol}`)
    return address
  }

  readonly publicClient = () => createPublicClient({ transport: http(this.rpcUrl) })

  /** Sends a contract write from mnemonic account `from` and waits for its success. */
  async send(from: number, request: Record<string, unknown>): Promise<void> {
    const { publicClient, walletClient } = await devnetClients(this.rpcUrl, devnetAccount(from))
    const hash = await walletClient.writeContract(request as never)
    const receipt = await publicClient.waitForTransactionReceipt({ hash })
    if (receipt.status !== "success") throw new Error(`setup transaction reverted: ${hash}`)
  }

  /** `send` of a vault function, its arguments checked against the ABI. */
  vaultWrite<F extends VaultWriteName>(
    from: number,
    functionName: F,
    args: ContractFunctionArgs<typeof feeVaultAbi, "nonpayable" | "payable", F>
  ): Promise<void> {
    return this.send(from, { address: this.vault, abi: feeVaultAbi, functionName, args })
  }

  /** Registers `owner` as a kind-1 account without fallback, straight on the vault (from #8 unless told). */
  registerOwner(owner: { readonly address: Address; readonly salt: Hex }, from = 8): Promise<void> {
    return this.vaultWrite(from, "registerOwner", [owner.address, owner.salt, zeroAddress, 0n])
  }

  /** Mints to the depositor (#9), approves and deposits `amount` of `token` for `id`. */
  async deposit(id: Hex, token: Address, amount: bigint): Promise<void> {
    const depositor = devnetAccount(9).address
    await this.send(9, { address: token, abi: testTokenAbi, functionName: "mint", args: [depositor, amount] })
    await this.send(9, {
      address: token,
      abi: testTokenAbi,
      functionName: "approve",
      args: [this.vault, amount]
    })
    await this.vaultWrite(9, "deposit", [id, token, amount])
  }

  tokenBalance(token: Address, holder: Address): Promise<bigint> {
    return this.publicClient().readContract({
      address: token,
      abi: testTokenAbi,
      functionName: "balanceOf",
      args: [holder]
    })
  }

  vaultBalance(id: Hex, asset: Address): Promise<bigint> {
    return this.publicClient().readContract({
      address: this.vault,
      abi: feeVaultAbi,
      functionName: "balanceOf",
      args: [id, asset]
    })
  }

  async vaultAccount(id: Hex) {
    const client = this.publicClient()
    const [kind, owner, , , , pendingOwner, pendingReadyAt] = await client.readContract({
      address: this.vault,
      abi: feeVaultAbi,
      functionName: "accountOf",
      args: [id]
    })
    return {
      kind,
      owner,
      pendingOwner,
      pendingReadyAt,
      nonce: await client.readContract({
        address: this.vault,
        abi: feeVaultAbi,
        functionName: "nonces",
        args: [id]
      }),
      bindNonce: await client.readContract({
        address: this.vault,
        abi: feeVaultAbi,
        functionName: "bindNonces",
        args: [id]
      }),
      shieldTemplates: await client.readContract({
        address: this.vault,
        abi: feeVaultAbi,
        functionName: "shieldTemplateCount",
        args: [id]
      })
    }
  }

  /** The hot key's next nonce, pending transactions included: unchanged means nothing was sent. */
  relayerNonce(): Promise<number> {
    return this.publicClient().getTransactionCount({ address: this.relayerAddress, blockTag: "pending" })
  }

  /** Moves the chain's clock forward and mines a block. */
  async timeTravel(seconds: number): Promise<void> {
    const test = createTestClient({ mode: "anvil", transport: http(this.rpcUrl) })
    await test.increaseTime({ seconds })
    await test.mine({ blocks: 1 })
  }

  /** The EIP-712 definition of `message` over the vault's domain (to sign, or to hash). */
  typedData<P extends VaultPrimaryType>(primaryType: P, message: VaultMessage<P>) {
    return {
      domain: vaultDomain(this.chain.deployment.chainId, this.vault),
      types: vaultTypes,
      primaryType,
      message
    } as TypedDataDefinition<typeof vaultTypes, P>
  }

  /** EIP-712 over the vault's domain. */
  sign<P extends VaultPrimaryType>(
    signer: PrivateKeyAccount,
    primaryType: P,
    message: VaultMessage<P>
  ): Promise<Hex> {
    return signer.signTypedData(this.typedData(primaryType, message) as never)
  }
}

/** The chain and the relayer running in this process, with the HTTP helpers. */
export class RelayerDevnet extends VaultDevnet {
  /** The typed client of this relayer; each request presents a client address of its own. */
  readonly client: RelayerClient

  private constructor(
    chain: DevnetChain,
    readonly relayerUrl: string,
    /** The relayer's settings, for tests that build parts of it against the same chain. */
    readonly env: Record<string, string>,
    scope: Scope.CloseableScope
  ) {
    super(chain, scope)
    this.client = Effect.runSync(
      relayerFetchClient(relayerUrl, { headers: () => ({ "x-forwarded-for": nextClient() }) })
    )
  }

  /** Anvil with the reference contracts and the relayer (indexer on), `env` on top of the devnet's. */
  static override async start(name: string, env: Record<string, string> = {}): Promise<RelayerDevnet> {
    const [{ chain, relayerUrl, settings }, scope] = await inNewScope(
      Effect.gen(function* () {
        const chain = yield* devnetChain({ dir: join(tmpdir(), `${name}-${process.pid}`) })
        const port = yield* freeLoopbackPort
        const relayerUrl = `http://127.0.0.1:${port}`
        yield* writeDevnetFile(chain, { relayerUrl, attestorUrl: "http://127.0.0.1:1" })
        const settings = {
          ...relayerEnv(chain, port),
          TRUST_PROXY: "1",
          TX_POLL_INTERVAL_MS: "100",
          INDEXER_POLL_INTERVAL_MS: "100",
          ...env
        }
        yield* Layer.buildWithScope(withSettings(Relayer.layer, settings), yield* Effect.scope)
        return { chain, relayerUrl, settings }
      })
    )
    return new RelayerDevnet(chain, relayerUrl, settings, scope)
  }

  post(path: string, body: unknown, client = nextClient()): Promise<Response> {
    return fetch(`${this.relayerUrl}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-forwarded-for": client },
      body: typeof body === "string" ? body : json(body)
    })
  }

  /** `relayerFee` of GET /v1/quote with these parameters (in their query-string form). */
  async quote(params: Record<string, string>): Promise<bigint> {
    const urlParams = Schema.decodeUnknownSync(QuoteQuery)(params)
    const quoted = await Effect.runPromise(Effect.either(this.client.quote.quote({ urlParams })))
    if (Either.isLeft(quoted)) throw new Error(`quote refused: ${json(quoted.left)}`)
    return quoted.right.relayerFee
  }

  /** POST /v1/tx-status; a refusal rejects with its tagged error. */
  txStatus(txHash: Hex): Promise<{ status: string; blockNumber?: number }> {
    const payload = Schema.decodeUnknownSync(TxStatusRequest)({ txHash })
    return Effect.runPromise(this.client.transactions.txStatus({ payload }))
  }

  /** The write endpoint's answer, once its transaction has been mined successfully. */
  async mined(res: Response): Promise<{ txHash: Hex; blockNumber: number }> {
    const body = (await res.json()) as { txHash?: Hex; code?: string; error?: string }
    if (res.status !== 200) throw new Error(`refused: ${res.status} ${json(body)}`)
    const txHash = body.txHash!
    for (let i = 0; i < 400; i++) {
      const status = await this.txStatus(txHash)
      if (status.status === "success") return { txHash, blockNumber: status.blockNumber! }
      if (status.status !== "pending") throw new Error(`transaction ended ${status.status}`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    throw new Error("transaction not mined in time")
  }

  /** The indexed account once `/v1/accounts` covers `block`. */
  async indexedAccount(id: Hex, block: number): Promise<IndexedAccount | undefined> {
    for (let i = 0; i < 400; i++) {
      const listed = await Effect.runPromise(Effect.option(this.client.accounts.accounts({ headers: {} })))
      if (listed._tag === "Some" && listed.value.block >= block) {
        const account = listed.value.accounts.find((a) => a.id.toLowerCase() === id.toLowerCase())
        // Back to the wire form the tests compare with (decimal strings).
        return account === undefined ? undefined : (Schema.encodeSync(Account)(account) as IndexedAccount)
      }
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    throw new Error(`/v1/accounts did not reach block ${block}`)
  }
}

/** Asserts a refusal's status and code, and that the relayer sent nothing for it. */
export const expectRefusal = async (
  net: RelayerDevnet,
  request: () => Promise<Response>,
  status: number,
  code: string
): Promise<string> => {
  const before = await net.relayerNonce()
  const res = await request()
  const body = (await res.json()) as { error?: string; code?: string }
  expect({ status: res.status, code: body.code }, json(body)).toEqual({ status, code })
  expect(typeof body.error).toBe("string")
  expect(await net.relayerNonce()).toBe(before)
  return body.error ?? ""
}

// ---------------------------------------------------------------------------------------------
// A write pipeline on the live chain, without HTTP and without sending

export interface RecordingSender {
  /** Every request handed to the sender, in order; shared by the pipelines built with it. */
  readonly submitted: Array<TxRequest>
  readonly layer: Layer.Layer<TxSender>
}

/** A `TxSender` for the devnet's hot key that sends nothing: it records each request and answers a made-up hash. */
export const recordingSender = (): RecordingSender => {
  const submitted: Array<TxRequest> = []
  const layer = Layer.succeed(TxSender, {
    address: devnetRelayerAddress,
    submit: (request) => {
      submitted.push(request)
      return Effect.succeed(keccak256(toHex(submitted.length)))
    },
    status: () => Effect.fail(new Unavailable({ message: "not here" }))
  })
  return { submitted, layer }
}

/**
 * Everything a write pipeline (`Claims.layer`, `OwnerActions.layer`) is built from, against the
 * devnet's chain: the relayer's settings `env` with `overrides` on top, the real chain client,
 * account reader, deny list, signature checks, preflight and per-id rate limit; `sender` in place
 * of the real one, no nonce reservations, revert cooldowns or bind budget, and a fee oracle that quotes
 * `relayerFee` on a 60k-gas budget and reads a gas price of 0, so that any fee pays for any gas
 * limit (the fee check has tests of its own: test/relayer/fee-cover.test.ts,
 * test/e2e/hot-key-costs.test.ts).
 */
export const liveChainLayers = (
  env: Record<string, string>,
  overrides: Record<string, string>,
  sender: RecordingSender,
  relayerFee: bigint,
  /** Lets a test watch what the pipeline asks the chain (e.g. the estimates it got). */
  observeChain: (chain: ChainClientShape) => ChainClientShape = (chain) => chain
) => {
  const settings = withSettings(RelayerSettings.layer, { ...env, ...overrides })
  const chainLayer = Layer.unwrapEffect(
    Effect.map(RelayerSettings, (s) =>
      Layer.succeed(
        ChainClient,
        observeChain(
          makeChainClient({ rpcUrl: s.rpcUrl.href, timeoutMs: s.rpcTimeoutMs, errorAbi: feeVaultAbi })
        )
      )
    )
  )
  const oracle = Layer.succeed(FeeOracle, {
    quote: () =>
      Effect.succeed({
        relayerFee,
        gasEstimate: 60_000n,
        gasPrice: 0n,
        price: { num: 1n, den: 1n },
        validUntil: 0
      }),
    gasBudget: () => 60_000n,
    gasPrice: Effect.succeed(0n),
    isCurrent: () => false
  })
  return Layer.mergeAll(
    AccountReader.layer,
    DenyList.layer,
    VaultSignatures.layer,
    TxPreflight.layer,
    IdRateLimit.layer,
    // Nothing is sent, so nothing needs holding.
    NonceReservations.test,
    // Nothing is sent, so nothing reverts.
    RevertCooldowns.test,
    // Nothing is sent, so nothing is spent (the budget has tests of its own: bind-budget.test.ts).
    BindBudget.test,
    oracle
  ).pipe(
    Layer.provideMerge(sender.layer),
    Layer.provideMerge(Layer.unwrapEffect(Effect.map(RelayerSettings, (s) => ChainId.layer(s.chainId)))),
    Layer.provideMerge(chainLayer),
    Layer.provideMerge(settings)
  )
}
