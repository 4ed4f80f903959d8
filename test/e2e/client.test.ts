/**
 * The typed clients (`src/client.ts`) against a private devnet: the relayer and the attestor run in
 * this process, and everything here goes through `HttpApiClient` — requests encoded by the request
 * schemas, answers decoded by the response schemas, refusals arriving as the tagged errors of
 * `schema/errors.ts`, chosen by status and code.
 */
import { Effect, Either, Schema } from "effect"
import { type Address, zeroAddress } from "viem"
import { privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { devnetKeys } from "../../layers/devnet.js"
import { type Account, ClaimRequest, QuoteQuery, TxStatusRequest } from "../../schema/relayer.js"
import {
  BadRequest,
  callPromise,
  errorCatalog,
  NonceMismatch,
  RateLimited,
  relayerFetchClient,
  Unsupported
} from "../../src/client.js"
import { directClaimBody } from "../support/directClaim.js"
import { AttestorClient } from "./support/attestorClient.js"
import {
  devnetRelayerAddress,
  E18,
  freshAddress,
  freshOwner,
  RelayerDevnet
} from "./support/relayerDevnet.js"

/** The one client address of the rate-limit scenario; every other request has its own. */
const LIMITED_CLIENT = "10.254.0.1"
const IP_BURST = 3

let net: RelayerDevnet
let attestor: AttestorClient

beforeAll(async () => {
  net = await RelayerDevnet.start("client-e2e", {
    RATE_LIMIT_IP_BURST: String(IP_BURST),
    RATE_LIMIT_IP_PER_MINUTE: "1"
  })
  attestor = await AttestorClient.start(net)
}, 180_000)
afterAll(async () => {
  await attestor?.stop()
  await net?.dispose()
}, 60_000)

/** A claim quote's query, from its query-string form (branded values come from decoding). */
const claimQuery = (asset: Address) => Schema.decodeUnknownSync(QuoteQuery)({ asset, adapter: zeroAddress })

const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)

/** The failure of `effect`, which must fail. */
const refusal = async <A, E>(effect: Effect.Effect<A, E>): Promise<E> => {
  const result = await run(Effect.either(effect))
  if (Either.isRight(result)) throw new Error("expected a refusal")
  return result.left
}

describe("typed relayer client", () => {
  it("reads the configuration and a quote as typed values", async () => {
    const config = await run(net.client.quote.config())
    expect(config).toMatchObject({
      chainId: net.chain.deployment.chainId,
      vault: net.vault,
      relayer: devnetRelayerAddress,
      settlementAsset: net.settlementAsset
    })
    const quote = await run(
      net.client.quote.quote({
        urlParams: {
          asset: config.settlementAsset,
          adapter: config.adapters.direct,
          action: "claim",
          consolidate: false,
          register: false
        }
      })
    )
    expect(typeof quote.relayerFee).toBe("bigint")
    expect(quote.relayerFee).toBeGreaterThan(0n)
    expect(quote).toMatchObject({
      action: "claim",
      asset: net.settlementAsset,
      relayer: devnetRelayerAddress
    })
  })

  it("relays a claim, follows its status and finds it in /v1/accounts; a retry answers its hash, another claim at the spent nonce is NonceMismatch", async () => {
    const owner = freshOwner()
    await net.registerOwner(owner)
    await net.deposit(owner.id, net.settlementAsset, 100n * E18)
    const quote = await run(net.client.quote.quote({ urlParams: claimQuery(net.settlementAsset) }))
    const recipient = freshAddress()
    const body = await directClaimBody({
      signer: owner.signer,
      chainId: net.chain.deployment.chainId,
      vault: net.vault,
      id: owner.id,
      asset: net.settlementAsset,
      amount: 10n * E18,
      recipient,
      relayer: net.relayerAddress,
      relayerFee: quote.relayerFee,
      nonce: 0n,
      deadline: BigInt(Math.floor(Date.now() / 1000) + 3600)
    })
    const payload = Schema.decodeUnknownSync(ClaimRequest)(JSON.parse(body))

    const { txHash } = await run(net.client.claims.claim({ payload }))
    let status = await run(net.client.transactions.txStatus({ payload: { txHash } }))
    for (let i = 0; i < 400 && status.status === "pending"; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50))
      status = await run(net.client.transactions.txStatus({ payload: { txHash } }))
    }
    expect(status.status).toBe("success")
    const blockNumber = status.blockNumber!
    expect(await net.tokenBalance(net.settlementAsset, recipient)).toBe(10n * E18 - quote.relayerFee)

    let account: Account | undefined
    for (let i = 0; i < 400 && account === undefined; i++) {
      const listed = await run(net.client.accounts.accounts({ headers: {} }))
      if (listed.block >= blockNumber) account = listed.accounts.find((a) => a.id === owner.id)
      else await new Promise((resolve) => setTimeout(resolve, 50))
    }
    expect(account).toMatchObject({ owner: owner.address, nonce: 1n })
    expect(Object.entries(account!.balances)).toEqual([[net.settlementAsset, 90n * E18]])

    // The same signed claim again is a retry: it answers the hash it was stored under, and
    // nothing is sent (docs/relayer.md "Retries").
    const before = await net.relayerNonce()
    expect(await run(net.client.claims.claim({ payload }))).toEqual({ txHash })
    // Another claim at the spent nonce: a 409 decoded as NonceMismatch.
    const other = Schema.decodeUnknownSync(ClaimRequest)(
      JSON.parse(
        await directClaimBody({
          signer: owner.signer,
          chainId: net.chain.deployment.chainId,
          vault: net.vault,
          id: owner.id,
          asset: net.settlementAsset,
          amount: 5n * E18,
          recipient,
          relayer: net.relayerAddress,
          relayerFee: quote.relayerFee,
          nonce: 0n,
          deadline: BigInt(Math.floor(Date.now() / 1000) + 3600)
        })
      )
    )
    const replayed = await refusal(net.client.claims.claim({ payload: other }))
    expect(replayed).toBeInstanceOf(NonceMismatch)
    expect(replayed).toMatchObject({ _tag: "NonceMismatch", message: expect.any(String) })
    expect(errorCatalog[(replayed as NonceMismatch)._tag]).toEqual({ status: 409, code: "nonce_mismatch" })
    expect(await net.relayerNonce()).toBe(before)
  }, 120_000)

  it("decodes a 400 as BadRequest, through the Promise helper too", async () => {
    const unknownAsset = await refusal(net.client.quote.quote({ urlParams: claimQuery(freshAddress()) }))
    expect(unknownAsset).toBeInstanceOf(BadRequest)
    expect(
      await callPromise(net.client.quote.quote({ urlParams: claimQuery(freshAddress()) }))
    ).toMatchObject({
      ok: false,
      error: { _tag: "BadRequest" }
    })
    const txHash = Schema.decodeSync(TxStatusRequest)({ txHash: `0x${"ab".repeat(32)}` }).txHash
    expect(await callPromise(net.client.transactions.txStatus({ payload: { txHash } }))).toEqual({
      ok: true,
      value: { txHash, status: "unknown" }
    })
  })

  it("decodes a 429 as RateLimited with the Retry-After delay", async () => {
    const limited = Effect.runSync(
      relayerFetchClient(net.relayerUrl, { headers: { "x-forwarded-for": LIMITED_CLIENT } })
    )
    const errors = []
    // A quote costs a fifth of a token.
    for (let i = 0; i < 5 * IP_BURST + 5; i++) {
      const result = await callPromise(limited.quote.quote({ urlParams: claimQuery(net.settlementAsset) }))
      if (!result.ok) errors.push(result.error)
    }
    expect(errors.length).toBeGreaterThan(0)
    for (const error of errors) {
      expect(error).toBeInstanceOf(RateLimited)
      // The server rounds its delay up to whole seconds, at least one.
      expect((error as RateLimited).retryAfterSeconds).toBeGreaterThanOrEqual(1)
    }
  })
})

describe("typed attestor client", () => {
  it("reads the attestor's info and issues a commitment; a handle lookup is Unsupported", async () => {
    const info = await run(attestor.client.info.info())
    expect(info.attestor).toBe(privateKeyToAccount(devnetKeys.attestor).address)
    expect(info.chainId).toBe(net.chain.deployment.chainId)
    expect(info.platforms).toContain("messenger")

    const commitment = await run(
      attestor.client.commitments.commitment({
        payload: { platform: "messenger", userId: "4242" },
        headers: {}
      })
    )
    expect(commitment).toMatchObject({
      platform: "messenger",
      platformId: commitment.platformId,
      userId: "4242"
    })
    expect(commitment.handleCommitment).toMatch(/^0x[0-9a-f]{64}$/)
    expect(commitment.attestor).toBe(info.attestor)

    const lookup = await refusal(
      attestor.client.commitments.commitment({
        payload: { platform: "microblog", handle: "someone" },
        headers: {}
      })
    )
    expect(lookup).toBeInstanceOf(Unsupported)
  })
})
