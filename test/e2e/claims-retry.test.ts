/**
 * A signed claim sent again (docs/relayer.md §4 "Retries"): a client whose answer was lost, after
 * a crash following the broadcast say, sends the identical body and gets the hash it was stored
 * under, while the transaction is pending and after it is mined; nothing is sent twice. Another
 * request at the consumed nonce is 409 `nonce_mismatch` saying the nonce is used, before the
 * registration rules that an executed registration no longer passes. On the embedded database, and
 * on PostgreSQL too when `DATABASE_URL` is set.
 */
import { type Address, type Hex, zeroAddress } from "viem"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { databaseKinds, postgresSchema, storageEnv } from "../indexer/support/harness.js"
import { rpc } from "../relayer/txsender-support.js"
import { directClaimBody } from "../support/directClaim.js"
import { E18, freshAddress, freshOwner, RelayerDevnet } from "./support/relayerDevnet.js"

let net: RelayerDevnet
const minedNonce = async () =>
  Number(await rpc<Hex>(net.rpcUrl, "eth_getTransactionCount", [net.relayerAddress, "latest"]))

interface Answer {
  readonly status: number
  readonly body: { readonly txHash?: Hex; readonly code?: string; readonly error?: string }
}

const post = async (body: string): Promise<Answer> => {
  const res = await net.post("/v1/claim", body)
  return { status: res.status, body: (await res.json()) as Answer["body"] }
}

/** An unregistered account holding 100 of the settlement asset, and a claim body of it at nonce 0. */
const unregistered = async () => {
  const owner = freshOwner()
  await net.deposit(owner.id, net.settlementAsset, 100n * E18)
  const fee = await net.quote({ asset: net.settlementAsset, adapter: zeroAddress, register: "1" })
  const body = (recipient: Address) =>
    directClaimBody({
      signer: owner.signer,
      chainId: net.chain.deployment.chainId,
      vault: net.vault,
      id: owner.id,
      asset: net.settlementAsset,
      amount: 10n * E18,
      recipient,
      relayer: net.relayerAddress,
      relayerFee: fee,
      nonce: 0n,
      deadline: BigInt(Math.floor(Date.now() / 1000) + 3600),
      register: owner.register
    })
  return { owner, body }
}

describe.each(databaseKinds())("a claim sent again (%s)", (kind) => {
  let drop = async () => {}
  beforeAll(async () => {
    const storage =
      kind === "postgresql" ? await postgresSchema(process.env.DATABASE_URL as string) : undefined
    if (storage !== undefined) drop = storage.drop
    net = await RelayerDevnet.start(`claims-retry-${kind}-e2e`, {
      INDEXER_ENABLED: "false",
      ...(storage === undefined ? {} : storageEnv(storage.storage))
    })
  }, 180_000)
  afterAll(async () => {
    await net?.dispose()
    await drop()
  }, 60_000)

  it("pending, then mined: the identical body answers the hash it was stored under, sent once", async () => {
    const { owner, body } = await unregistered()
    const recipient = freshAddress()
    const request = await body(recipient)
    const before = await minedNonce()
    await rpc(net.rpcUrl, "evm_setAutomine", [false])
    let first: Answer
    let whilePending: Answer
    try {
      first = await post(request)
      expect(first.status, JSON.stringify(first.body)).toBe(200)
      // Its client never saw that answer and sends the same request again.
      whilePending = await post(request)
    } finally {
      await rpc(net.rpcUrl, "evm_mine")
      await rpc(net.rpcUrl, "evm_setAutomine", [true])
    }
    expect(whilePending).toEqual({ status: 200, body: { txHash: first.body.txHash } })
    const hash = first.body.txHash as Hex
    for (let i = 0; i < 400 && (await net.txStatus(hash)).status === "pending"; i++)
      await new Promise((resolve) => setTimeout(resolve, 50))
    expect((await net.txStatus(hash)).status).toBe("success")
    expect((await net.vaultAccount(owner.id)).nonce).toBe(1n)

    // Executed, its registration with it: the retry is still answered with its hash, not refused
    // for carrying `register`.
    expect(await post(request)).toEqual({ status: 200, body: { txHash: hash } })
    expect(await minedNonce()).toBe(before + 1)
    expect(await net.tokenBalance(net.settlementAsset, recipient)).toBeGreaterThan(0n)
  }, 120_000)

  it("another request at the consumed nonce: 409 nonce_mismatch saying the nonce is used", async () => {
    const { owner, body } = await unregistered()
    await net.mined(await net.post("/v1/claim", await body(freshAddress())))
    const before = await minedNonce()
    // Signed at the same nonce for another recipient, with the registration the first executed.
    const other = await post(await body(freshAddress()))
    expect(other.status).toBe(409)
    expect(other.body.code).toBe("nonce_mismatch")
    expect(other.body.error).toMatch(/the nonce of this request is used/)
    expect(other.body.error).toMatch(/account's nonce is now 1/)
    expect(await minedNonce()).toBe(before)
    expect((await net.vaultAccount(owner.id)).nonce).toBe(1n)
  }, 120_000)
})
