/**
 * POST /v1/claim end to end on a private devnet: the relayer runs in this process with its real
 * fee oracle, transaction sender and indexer against anvil and the reference vault; claims go in
 * over HTTP and their effects are read from the chain (and, for a direct claim, from
 * `/v1/accounts`). Every refusal is checked to have sent nothing (the hot
 * key's nonce is unchanged).
 *
 * The relayer trusts one proxy hop here, so each scenario presents its own client address in
 * `X-Forwarded-For` and the per-IP limit only bites where a test wants it to.
 */
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Context, Effect, Layer, ManagedRuntime } from "effect"
import {
  type Address,
  createPublicClient,
  encodeAbiParameters,
  getAddress,
  type Hex,
  hashTypedData,
  http,
  keccak256,
  toHex,
  zeroAddress
} from "viem"
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll } from "vitest"
import { feeVaultAbi, shieldAdapterAbi, testTokenAbi } from "../../contracts/abi.js"
import { deploySmartWallet, devnetAccount, devnetClients } from "../../contracts/deploy.js"
import {
  type DevnetChain,
  devnetChain,
  devnetKeys,
  freeLoopbackPort,
  relayerEnv,
  withSettings,
  writeDevnetFile
} from "../../layers/devnet.js"
import { RelayerLive } from "../../layers/relayer.js"
import { vaultDomain, vaultTypes } from "../../schema/eip712.js"
import { errorCatalog, Unavailable } from "../../schema/errors.js"
import { computeId, FULL, ownerCommitment, QUOTED, shieldPayload } from "../../schema/ids.js"
import type { Claim, ClaimRequest } from "../../schema/relayer.js"
import { chainClientLayer } from "../../src/chain/ChainClient.js"
import { RelayerSettings } from "../../src/config/relayer.js"
import { AccountReader } from "../../src/relayer/AccountReader.js"
import { Claims, ClaimsLive } from "../../src/relayer/claim.js"
import { FeeOracle } from "../../src/relayer/FeeOracle.js"
import { IdRateLimit } from "../../src/relayer/rateLimits.js"
import { TxPreflight } from "../../src/relayer/simulate.js"
import { type TxRequest, TxSender } from "../../src/relayer/TxSender.js"
import { DenyList } from "../../src/relayer/validation/denyList.js"
import { VaultSignatures } from "../../src/relayer/validation/signatures.js"

const E18 = 10n ** 18n

const configFrom = (map: Record<string, string>) => ConfigProvider.fromMap(new Map(Object.entries(map)))

/** A claim as the tests write it: plain viem hex and addresses (the wire decodes them). */
type LooseClaim = { readonly [K in keyof Claim]: Claim[K] extends bigint ? bigint : Hex }

class ClaimDevnet extends Context.Tag("ClaimDevnet")<
  ClaimDevnet,
  { readonly chain: DevnetChain; readonly relayerUrl: string; readonly env: Record<string, string> }
>() {}

const devnet = Layer.scoped(
  ClaimDevnet,
  Effect.gen(function* () {
    const chain = yield* devnetChain({ dir: join(tmpdir(), `claim-e2e-${process.pid}`) })
    const port = yield* freeLoopbackPort
    const relayerUrl = `http://127.0.0.1:${port}`
    yield* writeDevnetFile(chain, { relayerUrl, attestorUrl: "http://127.0.0.1:1" })
    const env = {
      ...relayerEnv(chain, port),
      // The indexer runs, so /v1/accounts can be checked after a claim; it polls often here.
      INDEXER_POLL_INTERVAL_MS: "100",
      TRUST_PROXY: "1",
      // One token a minute: a slow machine cannot refill an id's bucket during the test.
      RATE_LIMIT_ID_PER_MINUTE: "1",
      TX_POLL_INTERVAL_MS: "100"
    }
    yield* Layer.buildWithScope(withSettings(RelayerLive, env), yield* Effect.scope)
    return { chain, relayerUrl, env }
  })
)

const runtime = ManagedRuntime.make(devnet)
let chain: DevnetChain
let relayerUrl = ""
let env: Record<string, string> = {}
let rpcUrl = ""
let vault: Address
let usdt: Address
let weth: Address
let shieldAdapter: Address
const relayerAddress = privateKeyToAccount(devnetKeys.relayer).address

beforeAll(async () => {
  ;({ chain, relayerUrl, env } = await runtime.runPromise(ClaimDevnet))
  rpcUrl = chain.anvil.rpcUrl
  vault = chain.deployment.vault
  usdt = chain.deployment.settlementAsset
  weth = chain.deployment.tokens.WETH!
  shieldAdapter = chain.deployment.shieldAdapter
}, 180_000)
afterAll(() => runtime.dispose())

// ---------------------------------------------------------------------------------------------
// Chain helpers

const publicClient = () => createPublicClient({ transport: http(rpcUrl) })

const send = async (from: number, request: Record<string, unknown>) => {
  const { publicClient: reader, walletClient } = await devnetClients(rpcUrl, devnetAccount(from))
  const hash = await walletClient.writeContract(request as never)
  const receipt = await reader.waitForTransactionReceipt({ hash })
  if (receipt.status !== "success") throw new Error(`setup transaction reverted: ${hash}`)
}

const tokenBalance = (token: Address, holder: Address) =>
  publicClient().readContract({
    address: token,
    abi: testTokenAbi,
    functionName: "balanceOf",
    args: [holder]
  })

const vaultBalance = (id: Hex, asset: Address) =>
  publicClient().readContract({
    address: vault,
    abi: feeVaultAbi,
    functionName: "balanceOf",
    args: [id, asset]
  })

const relayerNonce = () =>
  publicClient().getTransactionCount({ address: relayerAddress, blockTag: "pending" })

/** Mints to the depositor (#9), approves and deposits `amount` of `token` for `id`. */
const deposit = async (id: Hex, token: Address, amount: bigint) => {
  const depositor = devnetAccount(9).address
  await send(9, { address: token, abi: testTokenAbi, functionName: "mint", args: [depositor, amount] })
  await send(9, { address: token, abi: testTokenAbi, functionName: "approve", args: [vault, amount] })
  await send(9, { address: vault, abi: feeVaultAbi, functionName: "deposit", args: [id, token, amount] })
}

interface Owner {
  readonly address: Address
  readonly salt: Hex
  readonly id: Hex
  readonly sign: (claim: LooseClaim) => Promise<Hex>
  readonly signer?: PrivateKeyAccount
}

const eoaOwner = (): Owner => {
  const signer = privateKeyToAccount(generatePrivateKey())
  const salt = keccak256(toHex(signer.address))
  return {
    address: signer.address,
    salt,
    id: computeId(1, ownerCommitment(signer.address, salt), zeroAddress, 0n),
    signer,
    sign: (claim) =>
      signer.signTypedData({
        domain: vaultDomain(chain.deployment.chainId, vault),
        types: vaultTypes,
        primaryType: "Claim",
        message: claim
      })
  }
}

const registerOnChain = (owner: Owner) =>
  send(8, {
    address: vault,
    abi: feeVaultAbi,
    functionName: "registerOwner",
    args: [owner.address, owner.salt, zeroAddress, 0n]
  })

const recipientData = (recipient: Address): Hex => encodeAbiParameters([{ type: "address" }], [recipient])
const freshAddress = () => privateKeyToAccount(generatePrivateKey()).address

// ---------------------------------------------------------------------------------------------
// HTTP helpers

let clients = 0
/** A client address of its own for each request group, so the per-IP buckets stay apart. */
const nextClient = () => {
  clients++
  return `10.${(clients >> 16) & 255}.${(clients >> 8) & 255}.${clients & 255}`
}

const json = (value: unknown) => JSON.stringify(value, (_, v) => (typeof v === "bigint" ? v.toString() : v))

const quote = async (
  asset: Address,
  adapter: Address,
  flags: { register?: boolean; consolidate?: boolean } = {}
) => {
  const query = new URLSearchParams({ asset, adapter })
  if (flags.register) query.set("register", "1")
  if (flags.consolidate) query.set("consolidate", "1")
  const res = await fetch(`${relayerUrl}/v1/quote?${query}`, { headers: { "x-forwarded-for": nextClient() } })
  expect(res.status).toBe(200)
  return BigInt(((await res.json()) as { relayerFee: string }).relayerFee)
}

const postClaim = (body: unknown, client = nextClient()) =>
  fetch(`${relayerUrl}/v1/claim`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-forwarded-for": client },
    body: typeof body === "string" ? body : json(body)
  })

const txStatus = async (txHash: Hex) => {
  const res = await fetch(`${relayerUrl}/v1/tx-status`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-forwarded-for": nextClient() },
    body: json({ txHash })
  })
  return (await res.json()) as { status: string; blockNumber?: number }
}

const mined = async (res: Response) => {
  const body = (await res.json()) as { txHash?: Hex; code?: string; error?: string }
  if (res.status !== 200) throw new Error(`claim refused: ${res.status} ${json(body)}`)
  const txHash = body.txHash!
  for (let i = 0; i < 200; i++) {
    const status = await txStatus(txHash)
    if (status.status === "success") return status
    if (status.status !== "pending") throw new Error(`transaction ended ${status.status}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error("transaction not mined in time")
}

interface ServedAccounts {
  readonly block: number
  readonly accounts: ReadonlyArray<{
    readonly id: Hex
    readonly owner: Address
    readonly balances: Readonly<Record<string, string>>
    readonly nonce: string
  }>
}

/** `/v1/accounts` once it covers `block`. */
const accountsAtLeast = async (block: number): Promise<ServedAccounts> => {
  for (let i = 0; i < 600; i++) {
    const res = await fetch(`${relayerUrl}/v1/accounts`, { headers: { "x-forwarded-for": nextClient() } })
    if (res.status === 200) {
      const body = (await res.json()) as ServedAccounts
      if (body.block >= block) return body
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`/v1/accounts did not reach block ${block}`)
}

const deadline = () => BigInt(Math.floor(Date.now() / 1000) + 3600)

const claimFor = (owner: Owner, fields: Partial<LooseClaim> & { adapterData: Hex }): LooseClaim => {
  const { adapterData, ...rest } = fields
  return {
    beneficiaryId: owner.id,
    asset: usdt,
    amount: 10n * E18,
    adapter: zeroAddress,
    dataHash: keccak256(adapterData),
    relayer: relayerAddress,
    relayerFee: 0n,
    nonce: 0n,
    deadline: deadline(),
    ...rest
  }
}

const signedRequest = async (
  owner: Owner,
  fields: Partial<LooseClaim> & { adapterData: Hex },
  extra: { readonly register?: unknown; readonly consolidate?: unknown } = {}
) => {
  const claim = claimFor(owner, fields)
  return { claim, adapterData: fields.adapterData, signature: await owner.sign(claim), ...extra }
}

// ---------------------------------------------------------------------------------------------

describe("accepted claims", () => {
  it("direct: the recipient gets amount - relayerFee, the relayer the fee, tx-status reaches success, /v1/accounts shows the new balance and nonce", async () => {
    const owner = eoaOwner()
    await registerOnChain(owner)
    await deposit(owner.id, usdt, 100n * E18)
    const fee = await quote(usdt, zeroAddress)
    expect(fee).toBeGreaterThan(0n)
    const recipient = freshAddress()
    const relayerBefore = await tokenBalance(usdt, relayerAddress)
    const status = await mined(
      await postClaim(
        await signedRequest(owner, {
          amount: 40n * E18,
          relayerFee: fee,
          adapterData: recipientData(recipient)
        })
      )
    )
    expect(status.blockNumber).toBeGreaterThan(0)
    expect(await tokenBalance(usdt, recipient)).toBe(40n * E18 - fee)
    expect(await tokenBalance(usdt, relayerAddress)).toBe(relayerBefore + fee)
    expect(await vaultBalance(owner.id, usdt)).toBe(60n * E18)
    // What a client does next (spec: wait for `block >= receipt.blockNumber`): the indexed
    // account shows the new balance and the next nonce.
    const served = await accountsAtLeast(status.blockNumber ?? 0)
    const account = served.accounts.find((a) => a.id.toLowerCase() === owner.id.toLowerCase())
    expect(account?.balances[getAddress(usdt)]).toBe((60n * E18).toString())
    expect(account?.nonce).toBe("1")
    expect(account?.owner).toBe(getAddress(owner.address))
  })

  it("with a kind-1 registration in the same transaction", async () => {
    const owner = eoaOwner()
    await deposit(owner.id, usdt, 50n * E18)
    const fee = await quote(usdt, zeroAddress, { register: true })
    const recipient = freshAddress()
    const register = {
      kind: 1 as const,
      owner: owner.address,
      salt: owner.salt,
      fallbackRecipient: zeroAddress,
      fallbackDelay: 0n
    }
    await mined(
      await postClaim(
        await signedRequest(
          owner,
          { amount: 50n * E18, relayerFee: fee, adapterData: recipientData(recipient) },
          { register }
        )
      )
    )
    expect(await tokenBalance(usdt, recipient)).toBe(50n * E18 - fee)
    const account = await publicClient().readContract({
      address: vault,
      abi: feeVaultAbi,
      functionName: "accountOf",
      args: [owner.id]
    })
    expect(account[1]).toBe(owner.address)
  })

  it("with a consolidation in the quoted full-balance form (Consolidate at n, Claim at n + 1)", async () => {
    const owner = eoaOwner()
    await registerOnChain(owner)
    await deposit(owner.id, weth, 2n * E18)
    const fee = await quote(usdt, zeroAddress, { consolidate: true })
    // The devnet router pays 3000 USDT per WETH; 1% slippage allowed.
    const minOut = (6000n * E18 * 99n) / 100n
    const step = { assetIn: weth, amountIn: QUOTED | (2n * E18), minOut, deadline: deadline() }
    const signer = owner.signer!
    const consolidateSignature = await signer.signTypedData({
      domain: vaultDomain(chain.deployment.chainId, vault),
      types: vaultTypes,
      primaryType: "Consolidate",
      message: { id: owner.id, ...step, nonce: 0n }
    })
    const recipient = freshAddress()
    await mined(
      await postClaim(
        await signedRequest(
          owner,
          { amount: minOut, relayerFee: fee, nonce: 1n, adapterData: recipientData(recipient) },
          { consolidate: { ...step, signature: consolidateSignature } }
        )
      )
    )
    expect(await tokenBalance(usdt, recipient)).toBe(minOut - fee)
    expect(await vaultBalance(owner.id, weth)).toBe(0n)
    expect(await vaultBalance(owner.id, usdt)).toBe(6000n * E18 - minOut)
  })

  it("FULL: the whole balance at execution, less the fixed fee", async () => {
    const owner = eoaOwner()
    await registerOnChain(owner)
    await deposit(owner.id, usdt, 30n * E18)
    const fee = await quote(usdt, zeroAddress)
    const recipient = freshAddress()
    await mined(
      await postClaim(
        await signedRequest(owner, { amount: FULL, relayerFee: fee, adapterData: recipientData(recipient) })
      )
    )
    expect(await tokenBalance(usdt, recipient)).toBe(30n * E18 - fee)
    expect(await vaultBalance(owner.id, usdt)).toBe(0n)
  })

  it("through the shield adapter with the canonical payload", async () => {
    const owner = eoaOwner()
    await registerOnChain(owner)
    await deposit(owner.id, usdt, 20n * E18)
    const fee = await quote(usdt, shieldAdapter)
    const before = await tokenBalance(usdt, shieldAdapter)
    const notesBefore = await publicClient().readContract({
      address: shieldAdapter,
      abi: shieldAdapterAbi,
      functionName: "noteCount"
    })
    await mined(
      await postClaim(
        await signedRequest(owner, {
          amount: 20n * E18,
          relayerFee: fee,
          adapter: shieldAdapter,
          adapterData: shieldPayload(owner.id, usdt, 20n * E18 - fee)
        })
      )
    )
    expect(await tokenBalance(usdt, shieldAdapter)).toBe(before + 20n * E18 - fee)
    expect(
      await publicClient().readContract({
        address: shieldAdapter,
        abi: shieldAdapterAbi,
        functionName: "noteCount"
      })
    ).toBe(notesBefore + 1n)
  })

  it("with relayer = 0x0", async () => {
    const owner = eoaOwner()
    await registerOnChain(owner)
    await deposit(owner.id, usdt, 10n * E18)
    const fee = await quote(usdt, zeroAddress)
    const recipient = freshAddress()
    const relayerBefore = await tokenBalance(usdt, relayerAddress)
    await mined(
      await postClaim(
        await signedRequest(owner, {
          relayer: zeroAddress,
          relayerFee: fee,
          adapterData: recipientData(recipient)
        })
      )
    )
    expect(await tokenBalance(usdt, recipient)).toBe(10n * E18 - fee)
    expect(await tokenBalance(usdt, relayerAddress)).toBe(relayerBefore + fee)
  })

  it("for an ERC-1271 owner (a smart wallet), verified by the simulation", async () => {
    const walletOwner = privateKeyToAccount(generatePrivateKey())
    const wallet = await deploySmartWallet(rpcUrl, walletOwner.address)
    const salt = keccak256(toHex("wallet"))
    const owner: Owner = {
      address: wallet,
      salt,
      id: computeId(1, ownerCommitment(wallet, salt), zeroAddress, 0n),
      sign: (claim) =>
        walletOwner.sign({
          hash: hashTypedData({
            domain: vaultDomain(chain.deployment.chainId, vault),
            types: vaultTypes,
            primaryType: "Claim",
            message: claim
          })
        })
    }
    await registerOnChain(owner)
    await deposit(owner.id, usdt, 10n * E18)
    const fee = await quote(usdt, zeroAddress)
    const recipient = freshAddress()
    await mined(
      await postClaim(await signedRequest(owner, { relayerFee: fee, adapterData: recipientData(recipient) }))
    )
    expect(await tokenBalance(usdt, recipient)).toBe(10n * E18 - fee)

    // A signature the wallet does not accept fails the simulation, not the relayer's own check.
    const nonce = await relayerNonce()
    const stranger = privateKeyToAccount(generatePrivateKey())
    const forged = {
      ...owner,
      sign: (claim: LooseClaim) =>
        stranger.sign({
          hash: hashTypedData({
            domain: vaultDomain(chain.deployment.chainId, vault),
            types: vaultTypes,
            primaryType: "Claim",
            message: claim
          })
        })
    }
    const res = await postClaim(
      await signedRequest(forged, { relayerFee: fee, nonce: 1n, adapterData: recipientData(recipient) })
    )
    expect(res.status).toBe(422)
    expect(await res.json()).toMatchObject({
      code: "simulation_failed",
      error: expect.stringContaining("InvalidSignature")
    })
    expect(await relayerNonce()).toBe(nonce)
  })
})

describe("refusals send nothing", () => {
  let owner: Owner
  let fee = 0n
  beforeAll(async () => {
    owner = eoaOwner()
    await registerOnChain(owner)
    await deposit(owner.id, usdt, 10n * E18)
    fee = await quote(usdt, zeroAddress)
  }, 60_000)

  const expectRefused = async (body: unknown, status: number, code: string) => {
    const nonce = await relayerNonce()
    const res = await postClaim(body)
    const answer = (await res.json()) as { code: string; error: string }
    expect({ status: res.status, code: answer.code }).toEqual({ status, code })
    expect(await relayerNonce()).toBe(nonce)
    return answer
  }
  const valid = (fields: Partial<LooseClaim> = {}, adapterData: Hex = recipientData(freshAddress())) =>
    signedRequest(owner, { relayerFee: fee, adapterData, ...fields })

  it("bad_request: a body off the schema", async () => {
    const body = JSON.parse(json(await valid()))
    await expectRefused({ ...body, claim: { ...body.claim, nonce: "01" } }, 400, "bad_request")
  })
  it("deadline_too_soon", async () => {
    await expectRefused(
      await valid({ deadline: BigInt(Math.floor(Date.now() / 1000) + 60) }),
      400,
      "deadline_too_soon"
    )
  })
  it("relayer_mismatch", async () => {
    await expectRefused(await valid({ relayer: freshAddress() }), 400, "relayer_mismatch")
  })
  it("invalid_amount", async () => {
    await expectRefused(await valid({ amount: fee - 1n }), 400, "invalid_amount")
  })
  it("data_hash_mismatch", async () => {
    const body = await valid()
    await expectRefused({ ...body, adapterData: recipientData(freshAddress()) }, 400, "data_hash_mismatch")
  })
  it("adapter_not_allowed", async () => {
    await expectRefused(await valid({ adapter: weth }), 400, "adapter_not_allowed")
    await expectRefused(
      await valid({ adapter: shieldAdapter, asset: weth }, shieldPayload(owner.id, usdt, 1n)),
      400,
      "adapter_not_allowed"
    )
  })
  it("recipient_denied: the devnet deny list's 0x…dEaD", async () => {
    await expectRefused(
      await valid({}, recipientData(getAddress("0x000000000000000000000000000000000000dEaD"))),
      403,
      "recipient_denied"
    )
  })
  it("invalid_signature", async () => {
    const body = await valid()
    const other = await valid({ amount: 9n * E18 })
    await expectRefused({ ...body, signature: other.signature }, 400, "invalid_signature")
  })
  it("not_found: an unregistered account without register", async () => {
    const nobody = eoaOwner()
    await expectRefused(
      await signedRequest(nobody, { relayerFee: fee, adapterData: recipientData(freshAddress()) }),
      404,
      "not_found"
    )
  })
  it("nonce_mismatch", async () => {
    await expectRefused(await valid({ nonce: 1n }), 409, "nonce_mismatch")
  })
  it("fee_too_low", async () => {
    await expectRefused(await valid({ relayerFee: fee - 1n }), 402, "fee_too_low")
  })
  it("simulation_failed with the vault's decoded error", async () => {
    const answer = await expectRefused(await valid({ amount: 11n * E18 }), 422, "simulation_failed")
    expect(answer.error).toContain("InsufficientBalance")
  })
})

describe("rate limits", () => {
  it("per id: after six relayed claims for one account the next is 429 with Retry-After", async () => {
    const owner = eoaOwner()
    await registerOnChain(owner)
    await deposit(owner.id, usdt, 100n * E18)
    const fee = await quote(usdt, zeroAddress)
    for (let nonce = 0n; nonce < 6n; nonce++)
      await mined(
        await postClaim(
          await signedRequest(owner, { relayerFee: fee, nonce, adapterData: recipientData(freshAddress()) })
        )
      )
    const before = await relayerNonce()
    const res = await postClaim(
      await signedRequest(owner, { relayerFee: fee, nonce: 6n, adapterData: recipientData(freshAddress()) })
    )
    expect(res.status).toBe(429)
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(30)
    expect(Number(res.headers.get("retry-after"))).toBeLessThanOrEqual(60)
    expect(await res.json()).toMatchObject({ code: "rate_limited" })
    expect(await relayerNonce()).toBe(before)
  })

  it("per IP: the 31st POST within a minute from one client is 429 with Retry-After", async () => {
    const client = nextClient()
    const before = await relayerNonce()
    // At 30 a minute a token comes back every 2 s, so a slow run may fit one more in.
    let sent = 0
    let res = await postClaim("{}", client)
    while (res.status === 400 && sent < 40) {
      sent++
      res = await postClaim("{}", client)
    }
    expect(sent).toBeGreaterThanOrEqual(30)
    expect(res.status).toBe(429)
    expect(["1", "2"]).toContain(res.headers.get("retry-after"))
    expect(await relayerNonce()).toBe(before)
  })
})

// ---------------------------------------------------------------------------------------------
// The pipeline on the live chain with a recording sender: the gas cap against a real estimate.

describe("gas cap on the live chain", () => {
  const submitted: Array<TxRequest> = []
  const pipeline = (overrides: Record<string, string>) => {
    const settings = RelayerSettings.layer.pipe(
      Layer.provide(Layer.setConfigProvider(configFrom({ ...env, ...overrides })))
    )
    const chainLayer = Layer.unwrapEffect(
      Effect.map(RelayerSettings, (s) =>
        chainClientLayer({ rpcUrl: s.rpcUrl.href, timeoutMs: s.rpcTimeoutMs, errorAbi: feeVaultAbi })
      )
    )
    const sender = Layer.succeed(TxSender, {
      address: relayerAddress,
      submit: (request) => {
        submitted.push(request)
        return Effect.succeed(keccak256(toHex(submitted.length)))
      },
      status: () => Effect.fail(new Unavailable({ message: "not here" }))
    })
    const oracle = Layer.succeed(FeeOracle, {
      quote: () => Effect.succeed({ relayerFee: 0n, gasEstimate: 60_000n, gasPrice: 1n, validUntil: 0 }),
      gasBudget: () => 60_000n
    })
    return ClaimsLive.pipe(
      Layer.provide(
        Layer.mergeAll(
          AccountReader.layer,
          DenyList.layer,
          VaultSignatures.layer,
          TxPreflight.layer,
          IdRateLimit.layer,
          oracle
        )
      ),
      Layer.provide(sender),
      Layer.provide(chainLayer),
      Layer.provide(settings)
    )
  }

  it.live(
    "an estimate above budget x GAS_CAP_BPS is gas_cap_exceeded; within it, sent with estimate x 1.2",
    () =>
      Effect.gen(function* () {
        const owner = eoaOwner()
        yield* Effect.promise(async () => {
          await registerOnChain(owner)
          await deposit(owner.id, usdt, 10n * E18)
        })
        const request = yield* Effect.promise(() =>
          signedRequest(owner, { amount: 5n * E18, adapterData: recipientData(freshAddress()) })
        )
        const submit = Effect.flatMap(Claims, (claims) => claims.submit(request as ClaimRequest))
        // A direct claim needs more than 60k gas, so a 1x cap on a 60k budget refuses it.
        const error = yield* Effect.flip(submit.pipe(Effect.provide(pipeline({ GAS_CAP_BPS: "10000" }))))
        expect(errorCatalog[error._tag as keyof typeof errorCatalog].code).toBe("gas_cap_exceeded")
        expect(submitted).toHaveLength(0)
        // The default 2x cap lets it through; the recording sender gets the 1.2x gas limit.
        yield* submit.pipe(Effect.provide(pipeline({})))
        expect(submitted).toHaveLength(1)
        const estimate = yield* Effect.promise(() =>
          publicClient().estimateGas({ account: relayerAddress, to: vault, data: submitted[0]!.data })
        )
        expect(submitted[0]!.gas).toBe((estimate * 12_000n + 9_999n) / 10_000n)
      })
  )
})
