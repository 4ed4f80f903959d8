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
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import {
  type Address,
  encodeAbiParameters,
  getAddress,
  type Hex,
  hashTypedData,
  keccak256,
  toHex,
  zeroAddress
} from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll } from "vitest"
import { shieldAdapterAbi } from "../../contracts/abi.js"
import { deploySmartWallet } from "../../contracts/deploy.js"
import { Relayer } from "../../layers/relayer.js"
import { errorCatalog } from "../../schema/errors.js"
import { computeId, FULL, ownerCommitment, QUOTED, shieldPayload } from "../../schema/ids.js"
import type { Claim, ClaimRequest } from "../../schema/relayer.js"
import type { ChainClientShape } from "../../src/chain/ChainClient.js"
import { Claims } from "../../src/relayer/Claims.js"
import {
  E18,
  freshAddress,
  freshOwner,
  json,
  type KindOneOwner,
  liveChainLayers,
  nextClient,
  RelayerDevnet,
  recordingSender
} from "./support/relayerDevnet.js"

/** A claim as the tests write it: plain viem hex and addresses (the wire decodes them). */
type LooseClaim = { readonly [K in keyof Claim]: Claim[K] extends bigint ? bigint : Hex }

let net: RelayerDevnet
let usdt: Address
let weth: Address
let shieldAdapter: Address

beforeAll(async () => {
  net = await RelayerDevnet.start("claim-e2e", {
    // RelayerDevnet trusts one proxy hop and polls transactions and the indexer every 100 ms: the
    // indexer runs, so /v1/accounts can be checked after a claim.
    // One token a minute: a slow machine cannot refill an id's bucket during the test.
    RATE_LIMIT_ID_PER_MINUTE: "1"
  })
  usdt = net.settlementAsset
  weth = net.token("WETH")
  shieldAdapter = net.chain.deployment.shieldAdapter
}, 180_000)
afterAll(() => net?.dispose())

// ---------------------------------------------------------------------------------------------
// Owners and claims

interface Owner {
  readonly address: Address
  readonly salt: Hex
  readonly id: Hex
  readonly sign: (claim: LooseClaim) => Promise<Hex>
}

const eoaOwner = (): Owner & KindOneOwner => {
  const owner = freshOwner()
  return { ...owner, sign: (claim) => net.sign(owner.signer, "Claim", claim) }
}

const recipientData = (recipient: Address): Hex => encodeAbiParameters([{ type: "address" }], [recipient])

const quote = (asset: Address, adapter: Address, flags: { register?: boolean; consolidate?: boolean } = {}) =>
  net.quote({
    asset,
    adapter,
    ...(flags.register ? { register: "1" } : {}),
    ...(flags.consolidate ? { consolidate: "1" } : {})
  })

const postClaim = (body: unknown, client?: string) => net.post("/v1/claim", body, client)

const deadline = () => BigInt(Math.floor(Date.now() / 1000) + 3600)

const claimFor = (owner: Owner, fields: Partial<LooseClaim> & { adapterData: Hex }): LooseClaim => {
  const { adapterData, ...rest } = fields
  return {
    beneficiaryId: owner.id,
    asset: usdt,
    amount: 10n * E18,
    adapter: zeroAddress,
    dataHash: keccak256(adapterData),
    relayer: net.relayerAddress,
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
    await net.registerOwner(owner)
    await net.deposit(owner.id, usdt, 100n * E18)
    const fee = await quote(usdt, zeroAddress)
    expect(fee).toBeGreaterThan(0n)
    const recipient = freshAddress()
    const relayerBefore = await net.tokenBalance(usdt, net.relayerAddress)
    const { blockNumber } = await net.mined(
      await postClaim(
        await signedRequest(owner, {
          amount: 40n * E18,
          relayerFee: fee,
          adapterData: recipientData(recipient)
        })
      )
    )
    expect(blockNumber).toBeGreaterThan(0)
    expect(await net.tokenBalance(usdt, recipient)).toBe(40n * E18 - fee)
    expect(await net.tokenBalance(usdt, net.relayerAddress)).toBe(relayerBefore + fee)
    expect(await net.vaultBalance(owner.id, usdt)).toBe(60n * E18)
    // What a client does next (docs/relayer.md: wait for `block >= receipt.blockNumber`): the indexed
    // account shows the new balance and the next nonce.
    const account = await net.indexedAccount(owner.id, blockNumber)
    expect(account?.balances[getAddress(usdt)]).toBe((60n * E18).toString())
    expect(account?.nonce).toBe("1")
    expect(account?.owner).toBe(getAddress(owner.address))
  })

  it("with a kind-1 registration in the same transaction", async () => {
    const owner = eoaOwner()
    await net.deposit(owner.id, usdt, 50n * E18)
    const fee = await quote(usdt, zeroAddress, { register: true })
    const recipient = freshAddress()
    await net.mined(
      await postClaim(
        await signedRequest(
          owner,
          { amount: 50n * E18, relayerFee: fee, adapterData: recipientData(recipient) },
          { register: owner.register }
        )
      )
    )
    expect(await net.tokenBalance(usdt, recipient)).toBe(50n * E18 - fee)
    expect((await net.vaultAccount(owner.id)).owner).toBe(owner.address)
  })

  it("with a consolidation in the quoted full-balance form (Consolidate at n, Claim at n + 1)", async () => {
    const owner = eoaOwner()
    await net.registerOwner(owner)
    await net.deposit(owner.id, weth, 2n * E18)
    const fee = await quote(usdt, zeroAddress, { consolidate: true })
    // The devnet router pays 3000 USDT per WETH; 1% slippage allowed.
    const minOut = (6000n * E18 * 99n) / 100n
    const step = { assetIn: weth, amountIn: QUOTED | (2n * E18), minOut, deadline: deadline() }
    const consolidateSignature = await net.sign(owner.signer, "Consolidate", {
      id: owner.id,
      ...step,
      nonce: 0n
    })
    const recipient = freshAddress()
    await net.mined(
      await postClaim(
        await signedRequest(
          owner,
          { amount: minOut, relayerFee: fee, nonce: 1n, adapterData: recipientData(recipient) },
          { consolidate: { ...step, signature: consolidateSignature } }
        )
      )
    )
    expect(await net.tokenBalance(usdt, recipient)).toBe(minOut - fee)
    expect(await net.vaultBalance(owner.id, weth)).toBe(0n)
    expect(await net.vaultBalance(owner.id, usdt)).toBe(6000n * E18 - minOut)
  })

  it("FULL: the whole balance at execution, less the fixed fee", async () => {
    const owner = eoaOwner()
    await net.registerOwner(owner)
    await net.deposit(owner.id, usdt, 30n * E18)
    const fee = await quote(usdt, zeroAddress)
    const recipient = freshAddress()
    await net.mined(
      await postClaim(
        await signedRequest(owner, { amount: FULL, relayerFee: fee, adapterData: recipientData(recipient) })
      )
    )
    expect(await net.tokenBalance(usdt, recipient)).toBe(30n * E18 - fee)
    expect(await net.vaultBalance(owner.id, usdt)).toBe(0n)
  })

  it("through the shield adapter with the canonical payload", async () => {
    const owner = eoaOwner()
    await net.registerOwner(owner)
    await net.deposit(owner.id, usdt, 20n * E18)
    const fee = await quote(usdt, shieldAdapter)
    const before = await net.tokenBalance(usdt, shieldAdapter)
    const notesBefore = await net.publicClient().readContract({
      address: shieldAdapter,
      abi: shieldAdapterAbi,
      functionName: "noteCount"
    })
    await net.mined(
      await postClaim(
        await signedRequest(owner, {
          amount: 20n * E18,
          relayerFee: fee,
          adapter: shieldAdapter,
          adapterData: shieldPayload(owner.id, usdt, 20n * E18 - fee)
        })
      )
    )
    expect(await net.tokenBalance(usdt, shieldAdapter)).toBe(before + 20n * E18 - fee)
    expect(
      await net.publicClient().readContract({
        address: shieldAdapter,
        abi: shieldAdapterAbi,
        functionName: "noteCount"
      })
    ).toBe(notesBefore + 1n)
  })

  it("with relayer = 0x0", async () => {
    const owner = eoaOwner()
    await net.registerOwner(owner)
    await net.deposit(owner.id, usdt, 10n * E18)
    const fee = await quote(usdt, zeroAddress)
    const recipient = freshAddress()
    const relayerBefore = await net.tokenBalance(usdt, net.relayerAddress)
    await net.mined(
      await postClaim(
        await signedRequest(owner, {
          relayer: zeroAddress,
          relayerFee: fee,
          adapterData: recipientData(recipient)
        })
      )
    )
    expect(await net.tokenBalance(usdt, recipient)).toBe(10n * E18 - fee)
    expect(await net.tokenBalance(usdt, net.relayerAddress)).toBe(relayerBefore + fee)
  })

  it("for an ERC-1271 owner (a smart wallet), verified by the simulation", async () => {
    const walletOwner = privateKeyToAccount(generatePrivateKey())
    const wallet = await deploySmartWallet(net.rpcUrl, walletOwner.address)
    const salt = keccak256(toHex("wallet"))
    const owner: Owner = {
      address: wallet,
      salt,
      id: computeId(1, ownerCommitment(wallet, salt), zeroAddress, 0n),
      sign: (claim) => walletOwner.sign({ hash: hashTypedData(net.typedData("Claim", claim)) })
    }
    await net.registerOwner(owner)
    await net.deposit(owner.id, usdt, 10n * E18)
    const fee = await quote(usdt, zeroAddress)
    const recipient = freshAddress()
    await net.mined(
      await postClaim(await signedRequest(owner, { relayerFee: fee, adapterData: recipientData(recipient) }))
    )
    expect(await net.tokenBalance(usdt, recipient)).toBe(10n * E18 - fee)

    // A signature the wallet does not accept fails the simulation, not the relayer's own check.
    const nonce = await net.relayerNonce()
    const stranger = privateKeyToAccount(generatePrivateKey())
    const forged = {
      ...owner,
      sign: (claim: LooseClaim) => stranger.sign({ hash: hashTypedData(net.typedData("Claim", claim)) })
    }
    const res = await postClaim(
      await signedRequest(forged, { relayerFee: fee, nonce: 1n, adapterData: recipientData(recipient) })
    )
    expect(res.status).toBe(422)
    expect(await res.json()).toMatchObject({
      code: "simulation_failed",
      error: expect.stringContaining("InvalidSignature")
    })
    expect(await net.relayerNonce()).toBe(nonce)
  })
})

describe("refusals send nothing", () => {
  let owner: Owner
  let fee = 0n
  beforeAll(async () => {
    owner = eoaOwner()
    await net.registerOwner(owner)
    await net.deposit(owner.id, usdt, 10n * E18)
    fee = await quote(usdt, zeroAddress)
  }, 60_000)

  const expectRefused = async (body: unknown, status: number, code: string) => {
    const nonce = await net.relayerNonce()
    const res = await postClaim(body)
    const answer = (await res.json()) as { code: string; error: string }
    expect({ status: res.status, code: answer.code }).toEqual({ status, code })
    expect(await net.relayerNonce()).toBe(nonce)
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
    await net.registerOwner(owner)
    await net.deposit(owner.id, usdt, 100n * E18)
    const fee = await quote(usdt, zeroAddress)
    for (let nonce = 0n; nonce < 6n; nonce++)
      await net.mined(
        await postClaim(
          await signedRequest(owner, { relayerFee: fee, nonce, adapterData: recipientData(freshAddress()) })
        )
      )
    const before = await net.relayerNonce()
    const res = await postClaim(
      await signedRequest(owner, { relayerFee: fee, nonce: 6n, adapterData: recipientData(freshAddress()) })
    )
    expect(res.status).toBe(429)
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(30)
    expect(Number(res.headers.get("retry-after"))).toBeLessThanOrEqual(60)
    expect(await res.json()).toMatchObject({ code: "rate_limited" })
    expect(await net.relayerNonce()).toBe(before)
  })

  it("per IP: the 31st POST within a minute from one client is 429 with Retry-After", async () => {
    const client = nextClient()
    const before = await net.relayerNonce()
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
    expect(await net.relayerNonce()).toBe(before)
  })
})

// ---------------------------------------------------------------------------------------------
// The pipeline on the live chain with a recording sender: the gas cap against a real estimate.

describe("gas cap on the live chain", () => {
  const sender = recordingSender()
  const { submitted } = sender
  // What the pipeline's own eth_estimateGas answered: a second estimate, even of the same state,
  // may differ, because the node's search stops within a tolerance of bounds that move with the
  // sender's balance and the base fee.
  const estimates: Array<bigint> = []
  const recordEstimates = (chain: ChainClientShape): ChainClientShape => ({
    ...chain,
    estimateGas: (req) => Effect.tap(chain.estimateGas(req), (gas) => Effect.sync(() => estimates.push(gas)))
  })
  // A fee oracle that quotes 0: the claims here pay no fee.
  const pipeline = (overrides: Record<string, string>) =>
    Relayer.writeServices.pipe(
      Layer.provide(liveChainLayers(net.env, overrides, sender, 0n, recordEstimates))
    )

  it.live(
    "an estimate above budget x GAS_CAP_BPS is gas_cap_exceeded; within it, sent with estimate x 1.2",
    () =>
      Effect.gen(function* () {
        const owner = eoaOwner()
        yield* Effect.promise(async () => {
          await net.registerOwner(owner)
          await net.deposit(owner.id, usdt, 10n * E18)
        })
        const request = yield* Effect.promise(() =>
          signedRequest(owner, { amount: 5n * E18, adapterData: recipientData(freshAddress()) })
        )
        const submit = Effect.flatMap(Claims, (claims) => claims.submit(request as ClaimRequest))
        // A direct claim needs more than 60k gas, so a 1x cap on a 60k budget refuses it.
        const error = yield* Effect.flip(submit.pipe(Effect.provide(pipeline({ GAS_CAP_BPS: "10000" }))))
        expect(errorCatalog[error._tag as keyof typeof errorCatalog].code).toBe("gas_cap_exceeded")
        expect(submitted).toHaveLength(0)
        expect(estimates).toHaveLength(1)
        expect(estimates[0]).toBeGreaterThan(60_000n)
        // The default 2x cap lets it through; the recording sender gets the 1.2x gas limit of the
        // estimate the pipeline got.
        estimates.length = 0
        yield* submit.pipe(Effect.provide(pipeline({})))
        expect(submitted).toHaveLength(1)
        expect(estimates).toHaveLength(1)
        const estimate = estimates[0]!
        expect(estimate).toBeLessThanOrEqual(120_000n)
        expect(submitted[0]!.gas).toBe((estimate * 12_000n + 9_999n) / 10_000n)
      })
  )
})
