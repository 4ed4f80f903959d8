/**
 * The committee devnet in-process (docs/protocol.md §9 "A committee devnet"): three members at
 * threshold 2, each its own attestor with its own keys, database and URL, all registered on the
 * vault. A creator's launch sealed to all three is found by each member after a messenger login
 * there; a member stopped and started again keeps its database. The same through the test
 * support: `VaultDevnet.start(name, { attestors, threshold })` and `AttestorClient.start(net, env,
 * { member })`.
 */
import { readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { ManagedRuntime } from "effect"
import { createPublicClient, type Hex, http } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { feeVaultAbi } from "../../contracts/abi.js"
import { launchSampleToken } from "../../contracts/deploy.js"
import { Devnet, devnetMember, type RunningDevnet, type RunningMember } from "../../layers/devnet.js"
import { computeId } from "../../schema/ids.js"
import { encodeBeneficiaryHint, sealHint } from "../../src/attestor/hints/hintEnvelopes.js"
import { AttestorClient } from "./support/attestorClient.js"
import { VaultDevnet } from "./support/relayerDevnet.js"

const runtime = ManagedRuntime.make(
  Devnet.layer({ dir: join(tmpdir(), `committee-devnet-${process.pid}`), attestors: 3, threshold: 2 })
)
let devnet: RunningDevnet
let members: ReadonlyArray<RunningMember>

beforeAll(async () => {
  devnet = await runtime.runPromise(Devnet)
  members = devnet.running ?? []
}, 300_000)

afterAll(() => runtime.dispose())

const post = (url: string, path: string, body: unknown) =>
  fetch(`${url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body)
  })

const json = async (res: Response) => ({
  status: res.status,
  body: (await res.json()) as Record<string, unknown>
})

/** Waits until the member's vault indexer and hint index both cover `block`. */
const indexed = async (url: string, block: bigint) => {
  for (let i = 0; i < 600; i++) {
    const health = (await (await fetch(`${url}/v1/health`)).json()) as {
      indexer?: { block: number }
      hints?: { block: number }
    }
    if ((health.indexer?.block ?? -1) >= block && (health.hints?.block ?? -1) >= block) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`${url} did not index block ${block}`)
}

/** A messenger login of `userId` at the member: its session. */
const login = async (url: string, userId: string): Promise<string> => {
  const stealthOwner = privateKeyToAccount(generatePrivateKey()).address
  const res = await json(
    await post(url, "/v1/oauth/messenger/verify", { auth: AttestorClient.widget(userId), stealthOwner })
  )
  expect(res).toMatchObject({ status: 200, body: { platform: "messenger", userId } })
  return res.body.session as string
}

const escrowIds = async (url: string, session: string): Promise<ReadonlyArray<Hex>> => {
  const res = await json(await post(url, "/v1/escrows", { session }))
  expect(res.status).toBe(200)
  return (res.body.escrows as ReadonlyArray<{ id: Hex }>).map((e) => e.id)
}

describe("a 3-member committee devnet at threshold 2", () => {
  it("registers every member on the vault at threshold 2", async () => {
    expect(members.map((m) => m.member)).toEqual([1, 2, 3])
    const chain = createPublicClient({ transport: http(devnet.anvil.rpcUrl) })
    const read = { address: devnet.deployment.vault, abi: feeVaultAbi } as const
    expect(await chain.readContract({ ...read, functionName: "attestorThreshold" })).toBe(2n)
    for (const member of members)
      expect(await chain.readContract({ ...read, functionName: "isAttestor", args: [member.address] })).toBe(
        true
      )
    // Three distinct signing keys, each one's address; member 1 is the single devnet's (account #2).
    expect(new Set(members.map((m) => m.address)).size).toBe(3)
    expect(members.map((m) => privateKeyToAccount(m.signingPrivateKey).address)).toEqual(
      members.map((m) => m.address)
    )
    expect(members[0]?.address).toBe("0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC")
    // Members 2 and 3 can pay for their vetoes.
    for (const member of members.slice(1))
      expect(await chain.getBalance({ address: member.address })).toBeGreaterThan(0n)
  })

  it("lists the members in order in deployment.json, the first also as attestorUrl", () => {
    const file = JSON.parse(readFileSync(devnet.deploymentFile, "utf8"))
    expect(file.attestorThreshold).toBe(2)
    expect(file.attestors).toEqual(
      members.map((m) => ({ url: m.url, address: m.address, hintPublicKey: m.hintPublicKey }))
    )
    expect(file.attestorUrl).toBe(members[0]?.url)
    expect(file.hintPublicKey).toBe(members[0]?.hintPublicKey)
  })

  it("each member serves its own /v1/info with its own address and hint key", async () => {
    for (const member of members) {
      const info = await json(await fetch(`${member.url}/v1/info`))
      expect(info).toMatchObject({
        status: 200,
        body: {
          attestor: member.address,
          hintPublicKey: member.hintPublicKey,
          vault: devnet.deployment.vault
        }
      })
    }
    expect(new Set(members.map((m) => m.hintPublicKey)).size).toBe(3)
  })

  it("a launch sealed to all three is found by each member after a login there", async () => {
    const userId = "8800001"
    // The commitment from member 1; every member opens its own envelope of the same hint.
    const commitment = await json(
      await post(members[0]!.url, "/v1/commitment", { platform: "messenger", userId })
    )
    expect(commitment.status).toBe(200)
    const { platformId, nonce, attestorSalt, handleCommitment } = commitment.body as {
      platformId: number
      nonce: Hex
      attestorSalt: Hex
      handleCommitment: Hex
    }
    const id = computeId(2, handleCommitment, "0x0000000000000000000000000000000000000000", 0n)
    const hint = { platformId, userId, nonce, attestorSalt }
    const launched = await launchSampleToken(devnet.anvil.rpcUrl, devnet.deployment, {
      beneficiaryId: id,
      beneficiaryHint: encodeBeneficiaryHint(members.map((m) => sealHint(m.hintPublicKey, hint))),
      symbol: "CMTE"
    })
    for (const member of members) {
      await indexed(member.url, launched.blockNumber)
      expect(await escrowIds(member.url, await login(member.url, userId))).toContain(id)
    }
  })

  it("a member stopped and started again answers at its URL on its own database", async () => {
    const member = members[1]!
    // A session lives in the member's database: it outlasts the restart only on the same one.
    const session = await login(member.url, "8800002")
    await runtime.runPromise(member.stop)
    const down = await fetch(`${member.url}/v1/health`).then(
      () => "answered",
      () => "refused"
    )
    expect(down).toBe("refused")
    // The others go on meanwhile.
    expect((await fetch(`${members[0]!.url}/v1/health`)).status).toBe(200)
    await runtime.runPromise(member.start)
    expect(await json(await fetch(`${member.url}/v1/info`))).toMatchObject({
      status: 200,
      body: { attestor: member.address }
    })
    // Its indexes catch up from its database before it answers escrows again.
    const chain = createPublicClient({ transport: http(devnet.anvil.rpcUrl) })
    await indexed(member.url, await chain.getBlockNumber({ cacheTime: 0 }))
    expect(await escrowIds(member.url, session)).toEqual([])
    // Sessions are each member's own: member 3's is no session at member 2.
    const elsewhere = await login(members[2]!.url, "8800002")
    expect((await post(member.url, "/v1/escrows", { session: elsewhere })).status).toBe(401)
  })
})

describe("committee members through the test support (VaultDevnet, AttestorClient)", () => {
  it("starts member k with its own keys at the URL set aside for it, again after a stop", {
    timeout: 180_000
  }, async () => {
    const net = await VaultDevnet.start("committee-support", { attestors: 2, threshold: 2 })
    try {
      const second = devnetMember(2)
      let member = await AttestorClient.start(net, {}, { member: 2 })
      expect(member.url).toBe(net.memberUrls?.[1])
      expect(await json(await fetch(`${member.url}/v1/info`))).toMatchObject({
        status: 200,
        body: { attestor: second.address, hintPublicKey: second.hintPublicKey }
      })
      // The launch helper seals to every member's key; member 2 opens its own envelope.
      const commitment = await member.commit("8800003")
      const launched = await member.launchTo(commitment, "SUPP", undefined, [
        devnetMember(1).hintPublicKey,
        second.hintPublicKey
      ])
      await member.indexed(launched.block)
      const session = await member.login("8800003", privateKeyToAccount(generatePrivateKey()).address)
      expect(await escrowIds(member.url, session)).toContain(launched.id)
      await member.stop()
      member = await AttestorClient.start(net, {}, { member: 2 })
      await member.indexed(await member.head())
      // Same URL, same database: the session from before the stop still lists the escrow.
      expect(await escrowIds(member.url, session)).toContain(launched.id)
      await member.stop()
    } finally {
      await net.dispose()
    }
  })
})
