/**
 * What the hot key pays for (docs/relayer.md §8 "Gas cap and fee margin", "Revert cooldowns"),
 * against a gas-burning ERC-1271 owner (contracts/mocks/GasBurningWallet.sol):
 *
 * - once its signature check burns more gas than the fee pays for, its claims are refused with
 *   402 `fee_too_low` naming the fee that would do, though they are well under the gas cap;
 * - a claim that passed simulation and reverted on chain puts the account and the wallet's code
 *   hash on a cooldown: 429 `rate_limited` with `Retry-After` for that account and for a new
 *   account registering with the same code (an established one sharing the code is served), and,
 *   on PostgreSQL, from a second relayer process sharing the database, for both keys.
 */
import { Effect } from "effect"
import {
  type Address,
  encodeAbiParameters,
  type Hex,
  hashTypedData,
  keccak256,
  parseGwei,
  toHex,
  zeroAddress
} from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { gasBurningWalletAbi } from "../../contracts/abi.js"
import { deployGasBurningWallet, devnetAccount, devnetClients } from "../../contracts/deploy.js"
import { freeLoopbackPort, relayerEnv } from "../../layers/devnet.js"
import { computeId, ownerCommitment } from "../../schema/ids.js"
import { prometheusText } from "../../src/http/metrics.js"
import { postgresSchema } from "../indexer/support/harness.js"
import { rpc } from "../relayer/txsender-support.js"
import { type ServiceProcess, startService } from "../support/process.js"
import {
  E18,
  expectRefusal,
  farDeadline,
  freshAddress,
  freshOwner,
  json,
  RelayerDevnet
} from "./support/relayerDevnet.js"

const usePostgres = process.env.DATABASE_URL !== undefined
let schema: Awaited<ReturnType<typeof postgresSchema>> | undefined
let net: RelayerDevnet
const running: Array<ServiceProcess> = []

const RELAYER_ENV = {
  INDEXER_ENABLED: "false",
  RATE_LIMIT_IP_BURST: "1000",
  RATE_LIMIT_IP_PER_MINUTE: "1000"
}

beforeAll(async () => {
  schema = usePostgres ? await postgresSchema(process.env.DATABASE_URL as string) : undefined
  const database =
    schema?.storage.kind === "postgresql"
      ? { DATABASE_URL: schema.storage.url }
      : ({} as Record<string, string>)
  net = await RelayerDevnet.start("hot-key-costs-e2e", { ...RELAYER_ENV, ...database })
}, 180_000)
afterAll(async () => {
  for (const service of running) await service.stop()
  await net?.dispose()
  await schema?.drop()
}, 60_000)

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * An account owned by a fresh GasBurningWallet (admin: mnemonic #0), funded with 100 of the
 * settlement asset; registered unless `registered` is false (its claims then carry `register`).
 */
const walletAccount = async (burnGas: bigint, registered = true) => {
  const key = privateKeyToAccount(generatePrivateKey())
  const wallet = await deployGasBurningWallet(net.rpcUrl, key.address, burnGas)
  const salt = keccak256(toHex(wallet))
  const id = computeId(1, ownerCommitment(wallet, salt), zeroAddress, 0n)
  if (registered) await net.registerOwner({ address: wallet, salt })
  await net.deposit(id, net.settlementAsset, 100n * E18)
  const register = { kind: 1, owner: wallet, salt, fallbackRecipient: zeroAddress, fallbackDelay: 0n }
  return { key, wallet, id, register: registered ? undefined : register }
}

type WalletAccount = Awaited<ReturnType<typeof walletAccount>>

/** The account the cooldown test left on a cooldown, for the second process's test. */
let cooled: WalletAccount | undefined

/** A direct claim of 10 for `account` at `nonce`, signed by the wallet's owner for the wallet. */
const claimBody = async (account: WalletAccount, nonce: bigint, relayerFee: bigint) => {
  const adapterData = encodeAbiParameters([{ type: "address" }], [freshAddress()])
  const claim = {
    beneficiaryId: account.id,
    asset: net.settlementAsset,
    amount: 10n * E18,
    adapter: zeroAddress,
    dataHash: keccak256(adapterData),
    relayer: net.relayerAddress,
    relayerFee,
    nonce,
    deadline: farDeadline()
  }
  const signature = await account.key.sign({ hash: hashTypedData(net.typedData("Claim", claim)) })
  return json({
    claim,
    adapterData,
    signature,
    ...(account.register === undefined ? {} : { register: account.register })
  })
}

/** Sends a call of the wallet's admin (#0), with a tip that puts it first in its block. */
const adminCall = async (
  wallet: Address,
  call: { functionName: "setBurnGas"; args: [bigint] } | { functionName: "setFailing"; args: [boolean] }
) => {
  const { walletClient } = await devnetClients(net.rpcUrl, devnetAccount(0))
  return walletClient.writeContract({
    address: wallet,
    abi: gasBurningWalletAbi,
    ...call,
    maxPriorityFeePerGas: parseGwei("50"),
    maxFeePerGas: parseGwei("500")
  } as never)
}

const directFee = () => net.quote({ asset: net.settlementAsset, adapter: zeroAddress })

/** What the relayer (in this process) found of the transactions it saw revert, by cause: for a failure's message. */
const revertCauses = async () =>
  (await Effect.runPromise(prometheusText))
    .split("\n")
    .filter((line) => line.startsWith("relayer_onchain_reverts_total{"))
    .join("; ")

const answerOf = async (res: Response) => ({
  status: res.status,
  retryAfter: res.headers.get("retry-after"),
  body: (await res.json()) as { txHash?: Hex; code?: string; error?: string }
})

describe("a gas-burning ERC-1271 owner", () => {
  it("is refused with fee_too_low once its gas exceeds what the fee pays, under the gas cap", async () => {
    const account = await walletAccount(0n)
    const fee = await directFee()
    // Burning nothing, the claim is well within what its fee pays for.
    await net.mined(await net.post("/v1/claim", await claimBody(account, 0n, fee)))
    // 100k more gas: the gas limit sent (estimate x 1.2) is well past the 1.3x budget the fee pays
    // for, though the estimate stays under the 2x gas cap. Quoted again just before: the base fee
    // falls as blocks are mined, and a fee quoted earlier pays for more gas now.
    await adminCall(account.wallet, { functionName: "setBurnGas", args: [100_000n] })
    const current = await directFee()
    const body = await claimBody(account, 1n, current)
    const message = await expectRefusal(net, () => net.post("/v1/claim", body), 402, "fee_too_low")
    expect(message).toMatch(/claim\.relayerFee does not pay for this transaction's gas limit of \d+/)
    const needed = BigInt(/needs at least (\d+)/.exec(message)?.[1] ?? "0")
    const gasLimit = BigInt(/gas limit of (\d+)/.exec(message)?.[1] ?? "0")
    // Under the cap: the estimate (gas limit / 1.2) is below 2x the 150k budget of a direct claim.
    expect((gasLimit * 10n) / 12n).toBeLessThan(300_000n)
    expect(needed).toBeGreaterThan(current)
    // Paying for it, with room for the gas price moving, it goes.
    await net.mined(await net.post("/v1/claim", await claimBody(account, 1n, needed * 2n)))
    expect((await net.vaultAccount(account.id)).nonce).toBe(2n)
  }, 120_000)

  it("reverting on chain after its simulation passed: the account and the wallet's code go on a cooldown", async () => {
    const account = await walletAccount(0n)
    const twin = await walletAccount(0n)
    const newcomer = await walletAccount(0n, false)
    const fee = await directFee()
    await rpc(net.rpcUrl, "evm_setAutomine", [false])
    let hash: Hex
    try {
      const accepted = await answerOf(await net.post("/v1/claim", await claimBody(account, 0n, fee)))
      expect(accepted.status, json(accepted.body)).toBe(200)
      hash = accepted.body.txHash as Hex
      // The wallet turns on its owner in the same block, ahead of the claim.
      await adminCall(account.wallet, { functionName: "setFailing", args: [true] })
    } finally {
      await rpc(net.rpcUrl, "evm_mine")
      await rpc(net.rpcUrl, "evm_setAutomine", [true])
    }
    for (let i = 0; i < 200 && (await net.txStatus(hash)).status === "pending"; i++) await sleep(50)
    expect((await net.txStatus(hash)).status).toBe("reverted")

    // Once the sender has recorded the revert, the account's next claim is refused before anything
    // is sent. The wallet still refuses its owner while the test waits for that: a claim arriving
    // before the record finds the nonce held (409) or fails its simulation (422) instead of going
    // out and taking the nonce.
    const next = await claimBody(account, 0n, fee)
    let refused = await answerOf(await net.post("/v1/claim", next))
    for (let i = 0; i < 200 && refused.status !== 429; i++) {
      // 409 while the reverted transaction still holds the nonce, 422 once it is freed: nothing sent.
      if (refused.status !== 409 && refused.status !== 422)
        expect.fail(`${refused.status} ${json(refused.body)}; reverts seen: ${await revertCauses()}`)
      await sleep(50)
      refused = await answerOf(await net.post("/v1/claim", next))
    }
    expect(
      { status: refused.status, code: refused.body.code },
      `${json(refused.body)}; reverts seen: ${await revertCauses()}`
    ).toEqual({
      status: 429,
      code: "rate_limited"
    })
    expect(refused.body.error).toMatch(/reverted on chain/)
    const retryAfter = Number(refused.retryAfter)
    expect(retryAfter).toBeGreaterThan(3_500)
    expect(retryAfter).toBeLessThanOrEqual(3_600)
    await adminCall(account.wallet, { functionName: "setFailing", args: [false] })
    // A new account registering with the same code: refused too, nothing sent.
    await expectRefusal(
      net,
      async () =>
        net.post(
          "/v1/claim",
          await claimBody(
            newcomer,
            0n,
            await net.quote({ asset: net.settlementAsset, adapter: zeroAddress, register: "1" })
          )
        ),
      429,
      "rate_limited"
    )
    // An established account owned by the same code (a proxy of the same implementation): served.
    await net.mined(await net.post("/v1/claim", await claimBody(twin, 0n, fee)))
    expect((await net.vaultAccount(twin.id)).nonce).toBe(1n)
    // An account owned by a key is served as ever.
    const plain = freshOwner()
    await net.registerOwner(plain)
    await net.deposit(plain.id, net.settlementAsset, 100n * E18)
    const adapterData = encodeAbiParameters([{ type: "address" }], [freshAddress()])
    const claim = {
      beneficiaryId: plain.id,
      asset: net.settlementAsset,
      amount: 10n * E18,
      adapter: zeroAddress,
      dataHash: keccak256(adapterData),
      relayer: net.relayerAddress,
      relayerFee: fee,
      nonce: 0n,
      deadline: farDeadline()
    }
    await net.mined(
      await net.post("/v1/claim", {
        claim,
        adapterData,
        signature: await net.sign(plain.signer, "Claim", claim)
      })
    )

    cooled = account
  }, 360_000)

  it.skipIf(!usePostgres)(
    "a second relayer process sharing the PostgreSQL database refuses the account and a new account of the code on a cooldown",
    async () => {
      const account = cooled
      if (account === undefined || schema?.storage.kind !== "postgresql")
        throw new Error("the cooldown test did not put an account on a cooldown")
      const port = await Effect.runPromise(freeLoopbackPort)
      const service = startService("relayer", {
        ...relayerEnv(net.chain, port),
        ...RELAYER_ENV,
        DATABASE_URL: schema.storage.url
      })
      running.push(service)
      const base = await service.url()
      const post = async (body: string) =>
        fetch(`${base}/v1/claim`, { method: "POST", headers: { "content-type": "application/json" }, body })
      /** This process's own quote: its gas price reading may differ from the first's. */
      const quote = async (params: Record<string, string>) => {
        const res = await fetch(`${base}/v1/quote?${new URLSearchParams(params)}`)
        const body = (await res.json()) as { relayerFee?: string }
        expect(res.status, json(body)).toBe(200)
        return BigInt(body.relayerFee ?? "0")
      }
      const direct = { asset: net.settlementAsset, adapter: zeroAddress }
      const res = await answerOf(await post(await claimBody(account, 0n, await quote(direct))))
      expect({ status: res.status, code: res.body.code }).toEqual({ status: 429, code: "rate_limited" })
      expect(res.body.error).toMatch(/for this account passed simulation and then reverted on chain/)
      expect(Number(res.retryAfter)).toBeGreaterThan(3_000)
      // A new account registering with the same owner code, on its cooldown from the first
      // process's examination: refused here too, nothing sent.
      const newcomer = await walletAccount(0n, false)
      const body = await claimBody(newcomer, 0n, await quote({ ...direct, register: "1" }))
      const message = await expectRefusal(net, () => post(body), 429, "rate_limited")
      expect(message).toMatch(/signed through this owner contract's code passed simulation and then reverted/)
      expect(await service.stop()).toBe(0)
    },
    120_000
  )
})
