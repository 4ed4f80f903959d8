/**
 * The attestor's veto watcher on the devnet, whose vault has this attestor as its only attestor
 * (threshold 1). An unattested proposal can only be made there with a `BindOwner` signature the
 * test forges with the attestor's key (a compromised or mistaken signature): `POST /v1/bind` never
 * issued it, so the attestor holds no attestation for it.
 *
 * 1. AUTO_VETO off: a forged proposal is counted (`attestor_bind_proposals_total{verdict="unattested"}`)
 *    and nothing is sent: the attestor key's nonce does not move, the bind stays pending.
 * 2. The attestor restarts on the same database with AUTO_VETO on: the still-pending proposal of
 *    step 1 is vetoed (`BindCancelled(id, attestor, true)`, pending owner back to zero); so is a
 *    fresh forged one; a proposal made with the signature `POST /v1/bind` issued is not; a contest
 *    of that one from another stealth owner revokes its attestation, and the watcher vetoes it.
 *    `/v1/health` shows the attestor key's sender then, and none with AUTO_VETO off.
 */
import { Effect } from "effect"
import { type Address, type Hex, parseAbiItem, zeroAddress } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { DEVNET_METRICS_TOKEN, devnetKeys } from "../../layers/devnet.js"
import { vaultDomain, vaultTypes } from "../../schema/eip712.js"
import { AttestorClient } from "./support/attestorClient.js"
import { VaultDevnet } from "./support/relayerDevnet.js"

/** Mnemonic account that sends the vault transactions (free for tests, docs/protocol.md §9). */
const SETUP = 3

const attestorKey = privateKeyToAccount(devnetKeys.attestor)

let net: VaultDevnet
let attestor: AttestorClient | undefined

/** The running attestor (started by the test). */
const running = (): AttestorClient => {
  if (attestor === undefined) throw new Error("no attestor is running")
  return attestor
}

const startAttestor = async (env: Record<string, string>) => {
  attestor = await AttestorClient.start(net, { TX_POLL_INTERVAL_MS: "500", ...env })
}

const stopAttestor = async () => {
  await attestor?.stop()
  attestor = undefined
}

beforeAll(async () => {
  net = await VaultDevnet.start("attestor-veto")
}, 300_000)

afterAll(async () => {
  await stopAttestor()
  await net?.dispose()
})

const post = (path: string, body: unknown) => running().post(path, body)

const until = async (what: string, check: () => Promise<boolean>, timeoutMs = 30_000) => {
  const end = Date.now() + timeoutMs
  while (Date.now() < end) {
    if (await check()) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`timed out waiting for ${what}`)
}

const head = () => running().head()

const health = () => Effect.runPromise(running().client.operator.health())

/** Waits until the indexer, the hint index and the veto watcher have all reached `block`. */
const indexed = async (block: number) =>
  until(`block ${block} indexed`, async () => {
    const h = await health()
    return (
      (h.indexer?.block ?? -1) >= block &&
      (h.hints?.block ?? -1) >= block &&
      (h.vetoWatcher?.block ?? -1) >= block
    )
  })

const metric = async (name: string, label: string, value: string): Promise<number> => {
  const text = await Effect.runPromise(
    running().client.operator.metrics({ headers: { authorization: `Bearer ${DEVNET_METRICS_TOKEN}` } })
  )
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`) || !line.includes(`${label}="${value}"`)) continue
    return Number(line.slice(line.lastIndexOf(" ") + 1))
  }
  return 0
}

const attestorNonce = () =>
  net.publicClient().getTransactionCount({ address: attestorKey.address, blockTag: "pending" })

/** A registered handle escrow of a messenger user whose hint this attestor opens. */
const escrowOf = async (userId: string, symbol: string): Promise<Hex> => {
  const commitment = await running().commit(userId)
  const { id } = await running().launchTo(commitment, symbol)
  await net.vaultWrite(SETUP, "registerHandle", [commitment.handleCommitment, zeroAddress, 0n])
  return id
}

/** `proposeBind` with a BindOwner signature made with the attestor's key outside the attestor. */
const proposeForged = async (id: Hex): Promise<Address> => {
  const newOwner = privateKeyToAccount(generatePrivateKey()).address
  const { bindNonce } = await net.vaultAccount(id)
  const block = await net.publicClient().getBlock()
  const deadline = block.timestamp + 3600n
  const signature = await attestorKey.signTypedData({
    domain: vaultDomain(net.chain.deployment.chainId, net.vault),
    types: { BindOwner: vaultTypes.BindOwner },
    primaryType: "BindOwner",
    message: { id, newOwner, bindNonce, deadline }
  })
  await net.vaultWrite(SETUP, "proposeBind", [id, newOwner, deadline, [signature]])
  expect((await net.vaultAccount(id)).pendingOwner).toBe(newOwner)
  return newOwner
}

const login = (userId: string, stealthOwner: Address): Promise<string> =>
  running().login(userId, stealthOwner)

const vetoedBy = async (id: Hex) => {
  const logs = await net.publicClient().getLogs({
    address: net.vault,
    event: parseAbiItem("event BindCancelled(bytes32 indexed id, address indexed by, bool vetoed)"),
    args: { id },
    fromBlock: 0n
  })
  return logs.map((l) => ({ by: l.args.by, vetoed: l.args.vetoed }))
}

const vetoed = (id: Hex) =>
  until("the veto", async () => (await net.vaultAccount(id)).pendingOwner === zeroAddress, 60_000)

describe("the veto watcher on the devnet", () => {
  it("AUTO_VETO off counts a forged proposal and sends nothing; on, it vetoes forged and contested proposals only", {
    timeout: 300_000
  }, async () => {
    // 1. AUTO_VETO off.
    await startAttestor({ AUTO_VETO: "false" })
    const first = await escrowOf("7720001", "VET1")
    await indexed(await head())
    const unattestedBefore = await metric("attestor_bind_proposals_total", "verdict", "unattested")
    const nonceBefore = await attestorNonce()
    const forgedOwner = await proposeForged(first)
    await until(
      "the forged proposal counted",
      async () =>
        (await metric("attestor_bind_proposals_total", "verdict", "unattested")) === unattestedBefore + 1
    )
    await indexed(await head())
    expect((await health()).vetoWatcher).toMatchObject({ state: "ready", autoVeto: false })
    // No sender without AUTO_VETO, so health shows none.
    expect((await health()).sender).toBeUndefined()
    expect(await metric("attestor_vetoes_total", "outcome", "sent")).toBe(0)
    expect(await attestorNonce()).toBe(nonceBefore)
    expect((await net.vaultAccount(first)).pendingOwner).toBe(forgedOwner)
    await stopAttestor()

    // 2. AUTO_VETO on, same database: the pending forged proposal is vetoed.
    await startAttestor({ AUTO_VETO: "true" })
    await vetoed(first)
    expect(await vetoedBy(first)).toEqual([{ by: attestorKey.address, vetoed: true }])
    // Judged once across the restart (the metrics live in this process): not counted again.
    expect(await metric("attestor_bind_proposals_total", "verdict", "unattested")).toBe(unattestedBefore + 1)
    expect(await metric("attestor_vetoes_total", "outcome", "sent")).toBe(1)

    // A fresh forged proposal is vetoed.
    const second = await escrowOf("7720002", "VET2")
    await proposeForged(second)
    await vetoed(second)
    expect(await vetoedBy(second)).toEqual([{ by: attestorKey.address, vetoed: true }])

    // A proposal with the signature POST /v1/bind issued is not vetoed.
    const user = "7720003"
    const third = await escrowOf(user, "VET3")
    await indexed(await head())
    const stealthOwner = privateKeyToAccount(generatePrivateKey()).address
    const bindRes = await post("/v1/bind", { session: await login(user, stealthOwner) })
    expect(bindRes.status).toBe(200)
    const { binds } = (await bindRes.json()) as {
      binds: Array<{ beneficiaryId: Hex; newOwner: Address; deadline: string; signature: Hex }>
    }
    expect(binds).toHaveLength(1)
    const [signed] = binds as [(typeof binds)[number]]
    const attestedBefore = await metric("attestor_bind_proposals_total", "verdict", "attested")
    await net.vaultWrite(SETUP, "proposeBind", [
      signed.beneficiaryId,
      signed.newOwner,
      BigInt(signed.deadline),
      [signed.signature]
    ])
    await until(
      "the attested proposal judged",
      async () =>
        (await metric("attestor_bind_proposals_total", "verdict", "attested")) === attestedBefore + 1
    )
    await indexed(await head())
    const sentBefore = await metric("attestor_vetoes_total", "outcome", "sent")
    // A few more passes, a resync included.
    await new Promise((resolve) => setTimeout(resolve, 6_000))
    expect((await net.vaultAccount(third)).pendingOwner).toBe(stealthOwner)
    expect(await metric("attestor_vetoes_total", "outcome", "sent")).toBe(sentBefore)
    expect(await vetoedBy(third)).toEqual([])

    // The user contests it from another stealth owner: the attestation is revoked, the watcher vetoes.
    const other = privateKeyToAccount(generatePrivateKey()).address
    const contestRes = await post("/v1/bind", {
      session: await login(user, other),
      ids: [third],
      contest: true
    })
    expect(contestRes.status).toBe(200)
    expect(await contestRes.json()).toEqual({ binds: [] })
    await vetoed(third)
    expect(await vetoedBy(third)).toEqual([{ by: attestorKey.address, vetoed: true }])
    expect((await health()).vetoWatcher).toMatchObject({ state: "ready", autoVeto: true })
    // Health shows the attestor key's sender as the relayer's shows its hot key: three vetoes sent.
    const { sender } = await health()
    expect(sender).toMatchObject({ address: attestorKey.address, pending: expect.any(Number) })
    expect(sender?.nextNonce).toBe(BigInt(await attestorNonce()))
    expect(sender?.balance).toBeGreaterThan(0n)
  })
})
