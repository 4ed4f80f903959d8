/**
 * A committee end to end (docs/attestor.md "The committee", docs/protocol.md §9): three attestors at
 * threshold 2 on the devnet's vault, each with `AUTO_VETO`, the devnet's clock and the default
 * `VETO_RULE=committee`; the relayer proposing; the typed client's committee helpers merging.
 *
 * - Honest 2 of 3: a launch sealed to all three; a codehost login at members 1 and 2 only; their two
 *   signatures proposed; pending; after `bindDelay` the bind finalizes, and member 3, which was not
 *   asked, sent no veto.
 * - Too few: one signature is refused 400 `insufficient_attestations` naming the threshold, and the
 *   relayer sends nothing.
 * - A member down: the client names it and binds with the other two.
 * - A compromised majority: the keys of members 1 and 2 sign a bind to an attacker's key (their
 *   processes stopped: the attacker holds them). The user contests at member 3, which vetoes; the
 *   fallback sweep stays closed for 2 x bindDelay; with members 1 and 2 back, the user's next honest
 *   bind finalizes.
 * - One veto per proposal: a proposal every member would veto is vetoed by one; the others send
 *   nothing.
 */
import { readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Either, ManagedRuntime, Schema } from "effect"
import {
  createPublicClient,
  createTestClient,
  type Hex,
  http,
  parseAbiItem,
  type Address as ViemAddress,
  zeroAddress
} from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { launchSampleToken } from "../../contracts/deploy.js"
import { Devnet, devnetKeys, type RunningDevnet, type RunningMember } from "../../layers/devnet.js"
import { vaultDomain, vaultTypes } from "../../schema/eip712.js"
import { computeId } from "../../schema/ids.js"
import { ProposeBindRequest } from "../../schema/relayer.js"
import { vetoDelaySeconds } from "../../src/attestor/veto/vetoVerdicts.js"
import {
  Address,
  attestorFetchClient,
  Bytes32,
  CommitmentRequest,
  type Committee,
  CommitteeShort,
  collectBindSignatures,
  committeeDeadline,
  committeeInfo,
  committeeOf,
  encodeBeneficiaryHint,
  feeVaultAbi,
  type MemberSession,
  proposeBindRequestOf,
  relayerFetchClient,
  SessionResponse,
  sealHint,
  startCommitteeLogins
} from "../../src/client.js"

const TIMEOUT = 240_000
/** The step between veto slots: long enough that the first member's veto is mined before the next. */
const VETO_STAGGER_SECONDS = 6

const runtime = ManagedRuntime.make(
  Devnet.layer({
    dir: join(tmpdir(), `committee-${process.pid}`),
    attestors: 3,
    threshold: 2,
    attestorSettings: { VETO_STAGGER_SECONDS: String(VETO_STAGGER_SECONDS) }
  })
)
let devnet: RunningDevnet
let members: ReadonlyArray<RunningMember>
let committee: Committee

const chain = () => createPublicClient({ transport: http(devnet.anvil.rpcUrl) })
const vault = () => devnet.deployment.vault
const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)

beforeAll(async () => {
  devnet = await runtime.runPromise(Devnet)
  members = devnet.running ?? []
  // As a wallet reads it: from the deployment file.
  committee = await run(committeeOf(JSON.parse(readFileSync(devnet.deploymentFile, "utf8"))))
  expect(committee.threshold).toBe(2)
  expect(committee.members.map((m) => m.url)).toEqual(members.map((m) => m.url))
}, 300_000)

afterAll(() => runtime.dispose())

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const until = async (what: string, check: () => Promise<boolean>, ms = 60_000) => {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await check().catch(() => false)) return
    await sleep(200)
  }
  throw new Error(`timed out waiting for ${what}`)
}

const head = async () => chain().getBlockNumber({ cacheTime: 0 })
const chainNow = async () => Number((await chain().getBlock({ blockTag: "latest" })).timestamp)

/** Waits until every running member's indexes cover the chain's head. */
const indexed = async (which: ReadonlyArray<RunningMember> = members) => {
  const block = Number(await head())
  for (const member of which) {
    const client = await run(attestorFetchClient(member.url))
    await until(`member ${member.member} at block ${block}`, async () => {
      const health = await run(client.operator.health())
      return (
        (health.indexer?.block ?? -1) >= block &&
        (health.hints?.block ?? -1) >= block &&
        (health.vetoWatcher?.block ?? -1) >= block
      )
    })
  }
}

const account = async (id: Hex) => {
  const [, owner, , , , pendingOwner, pendingReadyAt, sweepClosedUntil] = await chain().readContract({
    address: vault(),
    abi: feeVaultAbi,
    functionName: "accountOf",
    args: [id]
  })
  return { owner, pendingOwner, pendingReadyAt, sweepClosedUntil }
}

const bindNonce = (id: Hex) =>
  chain().readContract({ address: vault(), abi: feeVaultAbi, functionName: "bindNonces", args: [id] })

const nonceOf = (address: ViemAddress) => chain().getTransactionCount({ address, blockTag: "pending" })

const vetoesOf = async (id: Hex) => {
  const logs = await chain().getLogs({
    address: vault(),
    event: parseAbiItem("event BindCancelled(bytes32 indexed id, address indexed by, bool vetoed)"),
    args: { id },
    fromBlock: 0n
  })
  return logs.filter((l) => l.args.vetoed === true).map((l) => l.args.by)
}

let users = 0
/** A codehost user, committed at member 1 and launched with its hint sealed to every member. */
const launch = async (fallback?: { recipient: ViemAddress; delay: bigint }) => {
  const userId = String(8_100_000 + ++users + (process.pid % 1000) * 100)
  const client = await run(attestorFetchClient(members[0]!.url))
  const commitment = await run(
    client.commitments.commitment({
      payload: Schema.decodeUnknownSync(CommitmentRequest)({ platform: "codehost", userId }),
      headers: {}
    })
  )
  const hint = {
    platformId: commitment.platformId,
    userId: commitment.userId,
    nonce: commitment.nonce,
    attestorSalt: commitment.attestorSalt,
    ...(fallback === undefined
      ? {}
      : { fallbackRecipient: fallback.recipient, fallbackDelay: fallback.delay.toString() })
  }
  const id = computeId(
    2,
    commitment.handleCommitment,
    fallback?.recipient ?? "0x0000000000000000000000000000000000000000",
    fallback?.delay ?? 0n
  )
  registrations.set(id, {
    kind: 2,
    handleCommitment: commitment.handleCommitment,
    fallbackRecipient: fallback?.recipient ?? "0x0000000000000000000000000000000000000000",
    fallbackDelay: (fallback?.delay ?? 0n).toString()
  })
  await launchSampleToken(devnet.anvil.rpcUrl, devnet.deployment, {
    beneficiaryId: id,
    beneficiaryHint: encodeBeneficiaryHint(members.map((m) => sealHint(m.hintPublicKey, hint))),
    symbol: `CM${users}`
  })
  return { userId, id: Schema.decodeSync(Bytes32)(id) }
}

/** The browser at the codehost stand-in as `userId`, then at the member's callback: the session. */
const loginAt = async (authorizeUrl: string, userId: string) => {
  const url = new URL(authorizeUrl)
  url.searchParams.set("devnet_user", userId)
  const consented = await fetch(url, { redirect: "manual" })
  expect(consented.status).toBe(302)
  const landed = await fetch(consented.headers.get("location") as string, { redirect: "manual" })
  expect(landed.status).toBe(200)
  return Schema.decodeUnknownSync(SessionResponse)(await landed.json()).session
}

/** Codehost logins of `userId` for `owner` at the members `at` (1-based); none elsewhere. */
const loginsAt = async (userId: string, owner: Address, at: ReadonlyArray<number>) => {
  const logins = await run(startCommitteeLogins({ committee, platform: "codehost", stealthOwner: owner }))
  const sessions: Array<MemberSession | undefined> = []
  for (const [i, login] of logins.entries()) {
    if (!at.includes(i + 1)) {
      sessions.push(undefined)
      continue
    }
    if (login.started._tag !== "Started") throw new Error(`member ${i + 1}: ${login.started._tag}`)
    sessions.push({ session: await loginAt(login.started.url, userId), loginSecret: login.loginSecret })
  }
  return { logins, sessions }
}

/** One deadline every member accepts, by the chain's clock (the members run on it). */
const deadline = async () => {
  const infos = await run(committeeInfo(committee))
  const windows = infos.flatMap((i) => (i._tag === "Answered" ? [i.info.bindDeadlineSeconds] : []))
  return run(committeeDeadline(windows, await chainNow()))
}

const collect = async (id: Bytes32, owner: Address, sessions: ReadonlyArray<MemberSession | undefined>) =>
  run(
    Effect.either(
      collectBindSignatures({
        committee,
        sessions,
        owner,
        id,
        bindNonce: await bindNonce(id),
        deadline: await deadline(),
        chain: { chainId: devnet.deployment.chainId, vault: vault() },
        isAttestor: (signer) =>
          chain().readContract({
            address: vault(),
            abi: feeVaultAbi,
            functionName: "isAttestor",
            args: [signer]
          })
      })
    )
  )

const relayer = () => run(relayerFetchClient(devnet.relayerUrl))

const mined = async (txHash: Hex) => {
  const receipt = await chain().waitForTransactionReceipt({ hash: txHash })
  expect(receipt.status).toBe("success")
}

const skipBindDelay = async () => {
  const test = createTestClient({ mode: "anvil", transport: http(devnet.anvil.rpcUrl) })
  await test.increaseTime({ seconds: Number(devnet.deployment.bindDelay) + 1 })
  await test.mine({ blocks: 1 })
}

/** What the attacker, holding members' hint keys, reads from an escrow's hint: its registration. */
const registrations = new Map<string, unknown>()
const registerOf = (id: Bytes32) => registrations.get(id)

const relayerAddress = privateKeyToAccount(devnetKeys.relayer).address

const newOwner = () => Schema.decodeSync(Address)(privateKeyToAccount(generatePrivateKey()).address)

/** A bind proposed with `signatures` and finalized after the bind delay. */
const finalize = async (id: Bytes32) => {
  const { txHash } = await run((await relayer()).binds.finalizeBind({ payload: { id } }))
  await mined(txHash)
}

/**
 * A bind of `id` to a fresh attacker key signed with the keys of members 1 and 2 (which never issued
 * it) at the current bind nonce, registered and proposed through the relayer; the attacker's key.
 */
const proposeForged = async (id: Bytes32) => {
  const attacker = newOwner()
  const nonce = await bindNonce(id)
  const forgedDeadline = BigInt((await chainNow()) + 3_000)
  const signatures = await Promise.all(
    [members[0]!, members[1]!]
      .sort((a, b) => (a.address.toLowerCase() < b.address.toLowerCase() ? -1 : 1))
      .map((m) =>
        privateKeyToAccount(m.signingPrivateKey).signTypedData({
          domain: vaultDomain(devnet.deployment.chainId, vault()),
          types: vaultTypes,
          primaryType: "BindOwner",
          message: { id, newOwner: attacker, bindNonce: nonce, deadline: forgedDeadline }
        })
      )
  )
  const { txHash } = await run(
    (await relayer()).binds.proposeBind({
      payload: Schema.decodeUnknownSync(ProposeBindRequest)({
        id,
        newOwner: attacker,
        deadline: forgedDeadline.toString(),
        signatures,
        register: registerOf(id)
      })
    })
  )
  await mined(txHash)
  return attacker
}

describe("a committee of three at threshold two", () => {
  it("honest 2 of 3: members 1 and 2 sign, the bind finalizes, member 3 sends no veto", {
    timeout: TIMEOUT
  }, async () => {
    const { userId, id } = await launch()
    await indexed()
    const owner = newOwner()
    const { sessions } = await loginsAt(userId, owner, [1, 2])
    const collected = await collect(id, owner, sessions)
    if (Either.isLeft(collected)) throw collected.left
    expect(collected.right.outcomes.map((o) => o._tag)).toEqual(["Signed", "Signed", "NotAsked"])
    expect(collected.right.signers).toEqual([members[0]!.address, members[1]!.address].sort())
    const member3Nonce = await nonceOf(members[2]!.address)
    const { txHash } = await run(
      (await relayer()).binds.proposeBind({ payload: proposeBindRequestOf(collected.right) })
    )
    await mined(txHash)
    expect((await account(id)).pendingOwner).toBe(owner)
    // Every member judges it (member 3: not asked) over a few passes and a resync.
    await indexed()
    await sleep(6_000)
    await indexed()
    expect((await account(id)).pendingOwner).toBe(owner)
    await skipBindDelay()
    await finalize(id)
    expect(await account(id)).toMatchObject({
      owner,
      pendingOwner: "0x0000000000000000000000000000000000000000"
    })
    expect(await vetoesOf(id)).toEqual([])
    expect(await nonceOf(members[2]!.address)).toBe(member3Nonce)
  })

  it("too few: one signature is refused 400 naming the threshold, and nothing is sent", {
    timeout: TIMEOUT
  }, async () => {
    const { userId, id } = await launch()
    await indexed()
    const owner = newOwner()
    const { sessions } = await loginsAt(userId, owner, [1])
    const collected = await collect(id, owner, sessions)
    // The client refuses to propose with fewer than t, naming each member that did not sign.
    expect(Either.isLeft(collected)).toBe(true)
    const short = Either.getLeft(collected).pipe((o) => (o._tag === "Some" ? o.value : undefined))
    expect(short).toBeInstanceOf(CommitteeShort)
    expect((short as CommitteeShort).missing.map((o) => [o.member.url, o._tag])).toEqual([
      [members[1]!.url, "NotAsked"],
      [members[2]!.url, "NotAsked"]
    ])
    // Sent anyway, the one signature member 1 gave is refused by the relayer, which sends nothing.
    const one = await run(
      collectBindSignatures({
        committee: { ...committee, threshold: 1 },
        sessions,
        owner,
        id,
        bindNonce: await bindNonce(id),
        deadline: await deadline(),
        chain: { chainId: devnet.deployment.chainId, vault: vault() },
        isAttestor: () => true
      })
    )
    const hotKey = await nonceOf(relayerAddress)
    const res = await fetch(`${devnet.relayerUrl}/v1/propose-bind`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(Schema.encodeSync(ProposeBindRequest)(proposeBindRequestOf(one)))
    })
    expect(res.status).toBe(400)
    const body = (await res.json()) as { code: string; error: string }
    expect(body.code).toBe("insufficient_attestations")
    expect(body.error).toContain("the vault requires 2")
    expect(await nonceOf(relayerAddress)).toBe(hotKey)
    expect((await account(id)).pendingOwner).toBe("0x0000000000000000000000000000000000000000")
  })

  it("a member down: the client names it and binds with the other two", { timeout: TIMEOUT }, async () => {
    const { userId, id } = await launch()
    await indexed()
    const owner = newOwner()
    const { sessions } = await loginsAt(userId, owner, [1, 2, 3])
    await run(members[2]!.stop)
    try {
      const collected = await collect(id, owner, sessions)
      if (Either.isLeft(collected)) throw collected.left
      expect(collected.right.outcomes.map((o) => [o.member.url, o._tag])).toEqual([
        [members[0]!.url, "Signed"],
        [members[1]!.url, "Signed"],
        [members[2]!.url, "Down"]
      ])
      // A login started while it is down names it too.
      const logins = await run(startCommitteeLogins({ committee, platform: "codehost", stealthOwner: owner }))
      expect(logins.map((l) => l.started._tag)).toEqual(["Started", "Started", "Down"])
      const { txHash } = await run(
        (await relayer()).binds.proposeBind({ payload: proposeBindRequestOf(collected.right) })
      )
      await mined(txHash)
      expect((await account(id)).pendingOwner).toBe(owner)
    } finally {
      await run(members[2]!.start)
    }
    // Back up, member 3 finds the proposal it signed nothing for, and lets it be.
    await indexed()
    await sleep(6_000)
    await indexed()
    expect((await account(id)).pendingOwner).toBe(owner)
    expect(await vetoesOf(id)).toEqual([])
  })

  it("a compromised majority: member 3 vetoes on the user's contest; the sweep stays closed; the next honest bind finalizes", {
    timeout: TIMEOUT
  }, async () => {
    const fallback = { recipient: privateKeyToAccount(generatePrivateKey()).address, delay: 60n }
    const { userId, id } = await launch(fallback)
    await indexed()
    // The attacker holds members 1 and 2: their keys sign, their honest processes are not running.
    await run(members[0]!.stop)
    await run(members[1]!.stop)
    try {
      const attacker = await proposeForged(id)
      expect((await account(id)).pendingOwner).toBe(attacker)

      // The user sees a bind to a key that is not theirs, logs in at member 3 with their own key
      // and contests; member 3 vetoes.
      const owner = newOwner()
      await indexed([members[2]!])
      const { sessions } = await loginsAt(userId, owner, [3])
      const contest = await fetch(`${members[2]!.url}/v1/bind`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ ...sessions[2], ids: [id], contest: true })
      })
      expect(contest.status).toBe(200)
      expect(await contest.json()).toEqual({ binds: [] })
      await until("member 3's veto", async () => (await account(id)).pendingOwner === zeroAddress, 90_000)
      expect(await vetoesOf(id)).toEqual([members[2]!.address])
      const vetoedAt = await chainNow()
      const { sweepClosedUntil } = await account(id)
      expect(sweepClosedUntil).toBeGreaterThanOrEqual(
        BigInt(vetoedAt) + 2n * BigInt(devnet.deployment.bindDelay) - 5n
      )
      // The fallback is due (60 s of inactivity) but the sweep stays closed.
      const test = createTestClient({ mode: "anvil", transport: http(devnet.anvil.rpcUrl) })
      await test.increaseTime({ seconds: 120 })
      await test.mine({ blocks: 1 })
      await expect(
        chain().simulateContract({
          address: vault(),
          abi: feeVaultAbi,
          functionName: "sweepToFallback",
          args: [id, devnet.deployment.settlementAsset],
          account: fallback.recipient
        })
      ).rejects.toThrow(/SweepClosed/)

      // Members 1 and 2 back in honest hands: the user's next bind, to the user's own key.
      await run(members[0]!.start)
      await run(members[1]!.start)
      await indexed()
      const next = await loginsAt(userId, owner, [1, 2, 3])
      const collected = await collect(id, owner, next.sessions)
      if (Either.isLeft(collected)) throw collected.left
      expect(collected.right.outcomes.map((o) => o._tag)).toEqual(["Signed", "Signed", "Signed"])
      const proposed = await run(
        (await relayer()).binds.proposeBind({ payload: proposeBindRequestOf(collected.right) })
      )
      await mined(proposed.txHash)
      await indexed()
      await skipBindDelay()
      await finalize(id)
      expect((await account(id)).owner).toBe(owner)
    } finally {
      await run(members[0]!.start)
      await run(members[1]!.start)
    }
  })

  it("one veto per proposal: when every member would veto, the first mined veto ends it and the others send nothing", {
    timeout: TIMEOUT
  }, async () => {
    // An escrow whose members' veto slots are two steps apart or more, so that one goes first even
    // if a member's index lags a few seconds behind another's.
    const gapOf = (id: Hex) => {
      const slots = members.map((m) => vetoDelaySeconds(id, m.address, 1)).sort((a, b) => a - b)
      return slots[1]! - slots[0]!
    }
    let launched = await launch()
    while (gapOf(launched.id) < 2) launched = await launch()
    const { userId, id } = launched
    const slots = members.map((m) => vetoDelaySeconds(id, m.address, VETO_STAGGER_SECONDS))
    const first = members[slots.indexOf(Math.min(...slots))]!
    await indexed()
    // The user asks every member for a bind to their key (and has not proposed yet): each member
    // then holds evidence against a proposal to another key at the same bind nonce.
    const owner = newOwner()
    const { sessions } = await loginsAt(userId, owner, [1, 2, 3])
    const asked = await collect(id, owner, sessions)
    expect(Either.isRight(asked)).toBe(true)
    const before = await Promise.all(members.map((m) => nonceOf(m.address)))
    // The keys of members 1 and 2 sign a bind to another key at that nonce.
    await proposeForged(id)
    await until("the veto", async () => (await account(id)).pendingOwner === zeroAddress, 90_000)
    expect(await vetoesOf(id)).toEqual([first.address])
    // Past every slot, the others have sent nothing.
    await sleep(6 * VETO_STAGGER_SECONDS * 1000)
    await indexed()
    const after = await Promise.all(members.map((m) => nonceOf(m.address)))
    expect(after.map((n, i) => n - before[i]!)).toEqual(members.map((m) => (m === first ? 1 : 0)))
    expect(await vetoesOf(id)).toEqual([first.address])
  })
})
