/**
 * The committee helpers against the real devnet (one attestor, threshold 1; `Devnet.layer`): the
 * committee read from its deployment file, one deadline from the attestor's `/v1/info`, a microblog
 * login started with the helper at the stand-in provider, and `collectBindSignatures` returning the
 * attestor's signature for the sample escrow, which the relayer proposes and the vault accepts.
 */
import { readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, ManagedRuntime, Schema } from "effect"
import { createPublicClient, http } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Devnet, devnetKeys, type RunningDevnet } from "../../layers/devnet.js"
import {
  Address,
  attestorFetchClient,
  Bytes32,
  collectBindSignatures,
  committeeDeadline,
  committeeInfo,
  committeeOf,
  feeVaultAbi,
  proposeBindRequestOf,
  relayerFetchClient,
  SessionResponse,
  startCommitteeLogins
} from "../../src/client.js"

const runtime = ManagedRuntime.make(Devnet.layer({ dir: join(tmpdir(), `committee-devnet-${process.pid}`) }))
let devnet: RunningDevnet

beforeAll(async () => {
  devnet = await runtime.runPromise(Devnet)
}, 300_000)

afterAll(() => runtime.dispose())

/** Waits until the attestor's vault indexer and hint index both cover the chain's head. */
const attestorIndexed = async (url: string, head: bigint) => {
  const client = await Effect.runPromise(attestorFetchClient(url))
  for (let i = 0; i < 600; i++) {
    const health = await Effect.runPromise(client.operator.health())
    if ((health.indexer?.block ?? -1) >= Number(head) && (health.hints?.block ?? -1) >= Number(head)) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`the attestor did not index block ${head}`)
}

/** The browser at the provider, then back at the attestor's callback: the session it answers. */
const loginAt = async (authorizeUrl: string) => {
  const consented = await fetch(authorizeUrl, { redirect: "manual" })
  expect(consented.status).toBe(302)
  const landed = await fetch(consented.headers.get("location") as string, { redirect: "manual" })
  expect(landed.status).toBe(200)
  return Schema.decodeUnknownSync(SessionResponse)(await landed.json())
}

describe("committee helpers on the devnet (k = 1, t = 1)", () => {
  it("collectBindSignatures returns the attestor's signature, and the vault accepts its proposal", {
    timeout: 120_000
  }, async () => {
    const chain = createPublicClient({ transport: http(devnet.anvil.rpcUrl) })
    const vault = devnet.deployment.vault
    const committee = await Effect.runPromise(
      committeeOf(JSON.parse(readFileSync(devnet.deploymentFile, "utf8")))
    )
    const attestor = privateKeyToAccount(devnetKeys.attestor).address
    expect(committee).toMatchObject({
      threshold: 1,
      members: [{ url: devnet.attestorUrl, address: attestor }]
    })

    const infos = await Effect.runPromise(committeeInfo(committee))
    const windows = infos.flatMap((i) => (i._tag === "Answered" ? [i.info.bindDeadlineSeconds] : []))
    expect(windows).toHaveLength(1)
    const deadline = await Effect.runPromise(committeeDeadline(windows, Math.floor(Date.now() / 1000)))

    await attestorIndexed(devnet.attestorUrl, await chain.getBlockNumber({ cacheTime: 0 }))
    const owner = Schema.decodeSync(Address)(privateKeyToAccount(generatePrivateKey()).address)
    const [login] = await Effect.runPromise(
      startCommitteeLogins({ committee, platform: "microblog", stealthOwner: owner })
    )
    if (login?.started._tag !== "Started") throw new Error(`the login did not start: ${login?.started._tag}`)
    const session = await loginAt(login.started.url)
    expect(session.stealthOwner).toBe(owner)

    const id = Schema.decodeSync(Bytes32)(devnet.sampleBeneficiaryId)
    const collected = await Effect.runPromise(
      collectBindSignatures({
        committee,
        sessions: [{ session: session.session, loginSecret: login.loginSecret }],
        owner,
        id,
        bindNonce: await chain.readContract({
          address: vault,
          abi: feeVaultAbi,
          functionName: "bindNonces",
          args: [id]
        }),
        deadline,
        chain: { chainId: devnet.deployment.chainId, vault },
        isAttestor: (signer) =>
          chain.readContract({ address: vault, abi: feeVaultAbi, functionName: "isAttestor", args: [signer] })
      })
    )
    expect(collected.signers).toEqual([attestor])
    expect(collected.outcomes.map((o) => o._tag)).toEqual(["Signed"])
    // The sample escrow is not registered yet: the relayer registers it from this payload.
    expect(collected.register).not.toBeNull()

    const relayer = await Effect.runPromise(relayerFetchClient(devnet.relayerUrl))
    const { txHash } = await Effect.runPromise(
      relayer.binds.proposeBind({ payload: proposeBindRequestOf(collected) })
    )
    const receipt = await chain.waitForTransactionReceipt({ hash: txHash })
    expect(receipt.status).toBe("success")
    const [, , , , , pendingOwner] = await chain.readContract({
      address: vault,
      abi: feeVaultAbi,
      functionName: "accountOf",
      args: [id]
    })
    expect(pendingOwner).toBe(owner)
  })
})
