/**
 * A contest lasts, end to end on the devnet (docs/attestor.md §4 "POST /v1/bind" contest,
 * docs/protocol.md §10 "Contests"). An attacker holds a session of the victim's messenger user for
 * the attacker's own key (what a login CSRF leaves behind), gets both of the victim's escrows
 * signed and proposes the bind of one through the relayer. The victim contests it. Then:
 *
 * 1. the attacker's session is 401 `invalid_session`; the victim's stays valid; a login payload
 *    the victim signed before the contest (one someone could have kept) makes no session;
 * 2. a new session of the attacker's key gets no signature for either escrow, from the attestor
 *    that took the contest nor, with PostgreSQL, from a second attestor on the same database whose
 *    vault index stopped before the proposal (it shows no pending bind);
 * 3. the attestor, with `AUTO_VETO`, vetoes the proposal, and then the attacker's proposal of the
 *    other escrow with the signature it kept from before the contest;
 * 4. once the vetoes have cleared the pending binds, the attacker's key still gets nothing from
 *    either attestor, while the victim binds a fresh key through the relayer, and that proposal
 *    is judged attested.
 *
 * The attestors run in this process (the devnet's settings, `AUTO_VETO` on for the first); the
 * second one (PostgreSQL only: the embedded database belongs to one process) polls its index once
 * an hour, so after its first read its index stays behind the proposal while the first one's
 * moves on.
 */
import { Effect, Schema } from "effect"
import { type Address, type Hex, parseAbiItem, zeroAddress } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { DEVNET_METRICS_TOKEN, devnetKeys } from "../../layers/devnet.js"
import { BindResponse } from "../../schema/attestor.js"
import { freshPostgresSchema } from "../support/postgresSchema.js"
import { AttestorClient } from "./support/attestorClient.js"
import { RelayerDevnet } from "./support/relayerDevnet.js"

interface WireBind {
  beneficiaryId: Hex
  newOwner: Address
  bindNonce: string
  deadline: string
  signature: Hex
  register: { kind: number; handleCommitment: Hex; fallbackRecipient: Address; fallbackDelay: string } | null
}

const VICTIM = "7730001"
const attestorAddress = privateKeyToAccount(devnetKeys.attestor).address
const newKey = () => privateKeyToAccount(generatePrivateKey()).address

const databaseUrl = process.env.DATABASE_URL
let net: RelayerDevnet
let database: { readonly url: string; readonly drop: () => Promise<void> } | undefined
/** The attestor that takes the contest (AUTO_VETO on). */
let attestor: AttestorClient
/** A replica on the same database whose vault index stopped before the proposal (PostgreSQL). */
let lagging: AttestorClient | undefined

let escrow: Hex
/** The victim's other escrow, for which the attacker keeps a signature. */
let second: Hex
let heldForSecond: WireBind
const attacker = newKey()
let attackerSession = ""
let victimSession = ""
/** A widget payload the victim signed before the contest, not redeemed then. */
let signedBeforeContest: ReturnType<typeof AttestorClient.widget>

const until = async (what: string, check: () => Promise<boolean>, timeoutMs = 60_000) => {
  const end = Date.now() + timeoutMs
  while (Date.now() < end) {
    if (await check()) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`timed out waiting for ${what}`)
}

const post = (on: AttestorClient, path: string, body: unknown) => on.post(path, body)

const bind = async (on: AttestorClient, body: Record<string, unknown>): Promise<Array<WireBind>> => {
  const res = await post(on, "/v1/bind", body)
  const json = (await res.json()) as { binds: Array<WireBind> }
  expect({ status: res.status, json }).toMatchObject({ status: 200 })
  expect(() => Schema.decodeUnknownSync(BindResponse)(json)).not.toThrow()
  return json.binds
}

const escrowsOf = async (on: AttestorClient, session: string) => {
  const res = await post(on, "/v1/escrows", { session })
  expect(res.status).toBe(200)
  return ((await res.json()) as { escrows: Array<{ id: Hex; pendingOwner: Address | null }> }).escrows
}

const expectInvalidSession = async (res: Response) => {
  expect({ status: res.status, body: await res.json() }).toMatchObject({
    status: 401,
    body: { code: "invalid_session" }
  })
}

/** The proposal of `signed` through the relayer's POST /v1/propose-bind; its block. */
const proposeThroughRelayer = async (signed: WireBind): Promise<number> => {
  const { blockNumber } = await net.mined(
    await net.post("/v1/propose-bind", {
      id: signed.beneficiaryId,
      newOwner: signed.newOwner,
      deadline: signed.deadline,
      signatures: [signed.signature],
      ...(signed.register === null ? {} : { register: signed.register })
    })
  )
  return blockNumber
}

const metric = async (name: string, label: string, value: string): Promise<number> => {
  const text = await Effect.runPromise(
    attestor.client.operator.metrics({ headers: { authorization: `Bearer ${DEVNET_METRICS_TOKEN}` } })
  )
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`) || !line.includes(`${label}="${value}"`)) continue
    return Number(line.slice(line.lastIndexOf(" ") + 1))
  }
  return 0
}

beforeAll(async () => {
  net = await RelayerDevnet.start("attestor-contest")
  database = databaseUrl === undefined ? undefined : await freshPostgresSchema(databaseUrl, "contest")
  const shared = database === undefined ? {} : { DATABASE_URL: database.url }
  attestor = await AttestorClient.start(net, { ...shared, AUTO_VETO: "true", TX_POLL_INTERVAL_MS: "500" })

  // The victim's two escrows, indexed.
  escrow = (await attestor.launchTo(await attestor.commit(VICTIM), "CNT1")).id
  second = (await attestor.launchTo(await attestor.commit(VICTIM), "CNT2")).id
  await attestor.indexed(await attestor.head())

  if (database !== undefined) {
    // The first attestor indexes (it holds the indexer's lock); this one follows the store and
    // reads it again only an hour later: its index stays where it is now, before the proposal.
    lagging = await AttestorClient.start(net, { ...shared, INDEXER_POLL_INTERVAL_MS: "3600000" })
    await lagging.indexed(await attestor.head())
  }

  // The attacker's session of the victim's user, for the attacker's key: both escrows signed; the
  // proposal of one.
  attackerSession = await attestor.login(VICTIM, attacker)
  const both = await bind(attestor, { session: attackerSession })
  expect(both.map((b) => b.beneficiaryId).sort()).toEqual([escrow, second].sort())
  const signed = both.find((b) => b.beneficiaryId === escrow) as WireBind
  heldForSecond = both.find((b) => b.beneficiaryId === second) as WireBind
  expect(signed).toMatchObject({ beneficiaryId: escrow, newOwner: attacker, bindNonce: "0" })
  expect(signed.register).not.toBeNull()
  const proposed = await proposeThroughRelayer(signed)
  expect((await net.vaultAccount(escrow)).pendingOwner).toBe(attacker)
  await attestor.indexed(proposed)
}, 300_000)

afterAll(async () => {
  await lagging?.stop()
  await attestor?.stop()
  await database?.drop()
  await net?.dispose()
})

describe("a contest lasts", () => {
  it("the victim sees the attacker's pending bind and contests it; the attacker's session ends, the victim's does not", {
    timeout: 60_000
  }, async () => {
    victimSession = await attestor.login(VICTIM, newKey())
    expect(await escrowsOf(attestor, victimSession)).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ id: escrow, pendingOwner: attacker }),
        expect.objectContaining({ id: second, pendingOwner: null })
      ])
    )
    // A login the victim signed a moment before the contest, and did not use (or someone kept).
    signedBeforeContest = AttestorClient.widget(VICTIM, undefined, Math.floor(Date.now() / 1000) - 2)
    expect(await bind(attestor, { session: victimSession, ids: [escrow], contest: true })).toEqual([])
    await expectInvalidSession(await post(attestor, "/v1/bind", { session: attackerSession }))
    await expectInvalidSession(await post(attestor, "/v1/escrows", { session: attackerSession }))
    expect(await escrowsOf(attestor, victimSession)).toHaveLength(2)
  })

  it("a login payload signed before the contest makes no session after it, whatever key it names", {
    timeout: 60_000
  }, async () => {
    const res = await post(attestor, "/v1/oauth/messenger/verify", {
      auth: signedBeforeContest,
      stealthOwner: attacker
    })
    expect({ status: res.status, body: await res.json() }).toEqual({
      status: 401,
      body: {
        code: "invalid_session",
        error: "this login was started before the account's last contest: log in again"
      }
    })
  })

  it("a new session of the attacker's key gets no signature for either escrow", {
    timeout: 60_000
  }, async () => {
    const again = await attestor.login(VICTIM, attacker)
    expect(await bind(attestor, { session: again })).toEqual([])
    expect(await bind(attestor, { session: again, ids: [escrow] })).toEqual([])
    expect(await bind(attestor, { session: again, ids: [second] })).toEqual([])
  })

  it.skipIf(databaseUrl === undefined)(
    "nor from a second attestor on the same database whose index is behind the proposal",
    {
      timeout: 60_000
    },
    async () => {
      if (lagging === undefined) throw new Error("the second attestor is not running")
      // The replica's index has not seen the proposal ...
      const onReplica = await lagging.login(VICTIM, attacker)
      expect(await escrowsOf(lagging, onReplica)).toEqual(
        expect.arrayContaining([expect.objectContaining({ id: escrow, pendingOwner: null })])
      )
      // ... and yet it signs nothing for the contested key, at no deadline: a signature at a
      // deadline of its own would be an attestation of the pending proposal the contest did not
      // revoke, and the proposal would read attested again.
      const deadline = String(Math.floor(Date.now() / 1000) + 1_000)
      expect(await bind(lagging, { session: onReplica, deadline })).toEqual([])
      expect(await bind(lagging, { session: onReplica })).toEqual([])
      expect(await bind(lagging, { session: onReplica, ids: [escrow] })).toEqual([])
    }
  )

  it("with AUTO_VETO the attestor vetoes the contested proposal", { timeout: 90_000 }, async () => {
    await until("the veto", async () => (await net.vaultAccount(escrow)).pendingOwner === zeroAddress)
    const cancelled = await net.publicClient().getLogs({
      address: net.vault,
      event: parseAbiItem("event BindCancelled(bytes32 indexed id, address indexed by, bool vetoed)"),
      args: { id: escrow },
      fromBlock: 0n
    })
    expect(cancelled.map((l) => ({ by: l.args.by, vetoed: l.args.vetoed }))).toEqual([
      { by: attestorAddress, vetoed: true }
    ])
  })

  it("the attacker's proposal of the other escrow, with the signature it kept from before the contest, is vetoed too", {
    timeout: 90_000
  }, async () => {
    await proposeThroughRelayer(heldForSecond)
    expect((await net.vaultAccount(second)).pendingOwner).toBe(attacker)
    await until("the veto", async () => (await net.vaultAccount(second)).pendingOwner === zeroAddress)
    const cancelled = await net.publicClient().getLogs({
      address: net.vault,
      event: parseAbiItem("event BindCancelled(bytes32 indexed id, address indexed by, bool vetoed)"),
      args: { id: second },
      fromBlock: 0n
    })
    expect(cancelled.map((l) => ({ by: l.args.by, vetoed: l.args.vetoed }))).toEqual([
      { by: attestorAddress, vetoed: true }
    ])
  })

  it("after the veto the attacker's key still gets nothing, from either attestor; the victim binds a fresh key", {
    timeout: 120_000
  }, async () => {
    await attestor.indexed(await attestor.head())
    const again = await attestor.login(VICTIM, attacker)
    expect(await escrowsOf(attestor, again)).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ id: escrow, pendingOwner: null }),
        expect.objectContaining({ id: second, pendingOwner: null })
      ])
    )
    expect(await bind(attestor, { session: again })).toEqual([])
    expect(await bind(attestor, { session: again, ids: [escrow] })).toEqual([])
    if (lagging !== undefined)
      expect(await bind(lagging, { session: await lagging.login(VICTIM, attacker) })).toEqual([])

    // The victim, with a fresh key: signed at the bind nonce the veto left, proposed through the
    // relayer, and judged attested.
    const fresh = newKey()
    const [signed] = (await bind(attestor, {
      session: await attestor.login(VICTIM, fresh),
      ids: [escrow]
    })) as [WireBind]
    expect(signed).toMatchObject({ beneficiaryId: escrow, newOwner: fresh, bindNonce: "1", register: null })
    const attestedBefore = await metric("attestor_bind_proposals_total", "verdict", "attested")
    await proposeThroughRelayer(signed)
    expect((await net.vaultAccount(escrow)).pendingOwner).toBe(fresh)
    await until(
      "the victim's proposal judged",
      async () =>
        (await metric("attestor_bind_proposals_total", "verdict", "attested")) === attestedBefore + 1
    )
    expect((await net.vaultAccount(escrow)).pendingOwner).toBe(fresh)
  })
})
