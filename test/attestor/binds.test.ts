/**
 * POST /v1/bind through the attestor's own server wiring over stubbed indexes (a hint index and an
 * account projection held in this file), a mocked chain and a real (embedded) database: one
 * BindOwner signature per escrow without a pending bind and not owned by the session's key, over
 * the vault domain at the indexed bind nonce, recorded as an attestation; the deadline window's
 * edges and the default grid; `ids`; visibility refusals; contests (the other keys ruled out for
 * good on every escrow of the user, whatever the index shows later, the user's older sessions
 * ended); every refusal with its status and code; the metrics; nothing of a bind in the logs. The
 * signature's acceptance by the vault runs on the devnet (test/e2e/attestor-bind.test.ts).
 */
import {
  ConfigProvider,
  Deferred,
  Effect,
  Either,
  FiberId,
  Layer,
  Logger,
  LogLevel,
  ManagedRuntime,
  Option,
  Schema
} from "effect"
import {
  type Address,
  getAddress,
  type Hex,
  keccak256,
  numberToHex,
  recoverTypedDataAddress,
  zeroAddress
} from "viem"
import { privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { Attestor } from "../../layers/attestor.js"
import { BindResponse, Session, type Visibility } from "../../schema/attestor.js"
import { vaultDomain, vaultTypes } from "../../schema/eip712.js"
import { computeId, handleCommitment, userIdHash } from "../../schema/ids.js"
import { AttestationStore, makeAttestationStore } from "../../src/attestor/binds/AttestationStore.js"
import {
  BOTH_VISIBILITIES,
  contestedPendingOwner,
  deadlineAccepted,
  defaultDeadline,
  planBinds
} from "../../src/attestor/binds/bindRules.js"
import type { IndexedEscrow } from "../../src/attestor/escrows/userEscrows.js"
import { HintIndex, type HintIndexStatus } from "../../src/attestor/hints/HintIndex.js"
import { OAuthStates } from "../../src/attestor/logins/oauth/OAuthStates.js"
import { SessionStore } from "../../src/attestor/logins/SessionStore.js"
import { PaymentStore } from "../../src/attestor/lookups/payments/PaymentStore.js"
import { PublicCommitments } from "../../src/attestor/publicHandles/PublicCommitments.js"
import { VetoWatcher } from "../../src/attestor/veto/VetoWatcher.js"
import { verdictOf } from "../../src/attestor/veto/vetoVerdicts.js"
import { ChainUnavailable } from "../../src/chain/errors.js"
import { mockChainClient } from "../../src/chain/MockChainClient.js"
import { AttestorSettings } from "../../src/config/attestor.js"
import { serverUrl } from "../../src/http/server.js"
import { type AccountsSnapshot, Indexer, type IndexerStatus } from "../../src/indexer/Indexer.js"
import { type AccountState, emptyAccount } from "../../src/store/projections/accounts.js"
import type { Escrow as HintEscrow } from "../../src/store/projections/hints.js"
import { storageLayer } from "../../src/store/sql.js"

const VAULT: Address = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
const SIGNING_KEY: Hex = `0x${"11".repeat(32)}`
const ATTESTOR = privateKeyToAccount(SIGNING_KEY).address
const BIND_DEADLINE_SECONDS = 3600

const env = {
  RPC_URL: "http://127.0.0.1:1",
  FEE_VAULT: VAULT,
  SETTLEMENT_ASSET: "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512",
  CHAIN_ID: "31337",
  ATTESTOR_PRIVATE_KEY: SIGNING_KEY,
  HINT_PRIVATE_KEY: `0x${"22".repeat(32)}`,
  PEPPER: `0x${"33".repeat(32)}`,
  METRICS_TOKEN: "metrics-secret",
  HOST: "127.0.0.1",
  PORT: "0",
  RATE_LIMIT_BURST: "10000",
  RATE_LIMIT_PER_MINUTE: "10000",
  BIND_DEADLINE_SECONDS: String(BIND_DEADLINE_SECONDS)
}

// ---------------------------------------------------------------------------------------------
// Indexes held here
// ---------------------------------------------------------------------------------------------

const state = {
  ready: true,
  indexer: "following" as IndexerStatus["state"],
  hints: "ready" as HintIndexStatus["state"],
  chainUp: true,
  escrows: [] as Array<HintEscrow>,
  accounts: new Map<Hex, AccountState>()
}

const BLOCK = 100
const BLOCK_HASH = keccak256(numberToHex(BLOCK))

const stubIndexer = Layer.succeed(Indexer, {
  enabled: true,
  status: Effect.sync(() => ({ state: state.indexer, block: BLOCK, head: BLOCK, leader: true })),
  read: (f) =>
    Effect.sync(() =>
      f(
        state.ready
          ? ({
              chainId: 31337,
              vault: VAULT,
              block: BLOCK,
              hash: BLOCK_HASH,
              version: 1,
              accounts: state.accounts,
              projection: undefined as never
            } satisfies AccountsSnapshot)
          : undefined
      )
    )
})

const stubHints = Layer.succeed(HintIndex, {
  status: Effect.sync(() => ({ state: state.hints, block: BLOCK, hash: BLOCK_HASH })),
  read: (f) => Effect.sync(() => f(undefined)),
  escrowsOf: (platformId, userId) =>
    Effect.sync(() =>
      state.ready
        ? Option.some({
            block: BLOCK,
            hash: BLOCK_HASH,
            escrows: state.escrows.filter((e) => e.hint.platformId === platformId && e.hint.userId === userId)
          })
        : Option.none()
    )
})

const chain = mockChainClient({
  blockNumber: Effect.suspend(() =>
    state.chainUp
      ? Effect.succeed(BigInt(BLOCK))
      : Effect.fail(
          new ChainUnavailable({ operation: "eth_blockNumber", reason: "down", attempts: 1, cause: null })
        )
  )
})

const logLines: Array<string> = []
const capture = Logger.replace(
  Logger.defaultLogger,
  Logger.map(Logger.logfmtLogger, (line) => {
    logLines.push(line)
  })
)

/**
 * While set, a bind's record first tells `reached` and waits for `go`: a test holds a request
 * after its checks, just before its signatures are recorded, to run something in between.
 */
let heldRecord:
  | { readonly reached: Deferred.Deferred<void>; readonly go: Deferred.Deferred<void> }
  | undefined
const holdableAttestationStore = Layer.effect(
  AttestationStore,
  Effect.map(makeAttestationStore, (store) => ({
    ...store,
    record: (attestations, issuedAt, sessionValid) =>
      Effect.suspend(() => {
        const held = heldRecord
        const wait =
          held === undefined
            ? Effect.void
            : Effect.zipRight(Deferred.succeed(held.reached, undefined), Deferred.await(held.go))
        return Effect.zipRight(wait, store.record(attestations, issuedAt, sessionValid))
      })
  }))
)

const runtime = ManagedRuntime.make(
  Attestor.server.pipe(
    Layer.provideMerge(Layer.mergeAll(stubIndexer, stubHints, VetoWatcher.disabled)),
    Layer.provideMerge(
      Layer.mergeAll(
        SessionStore.layer({ ttlSeconds: 900 }),
        OAuthStates.layer({
          ttlSeconds: 600,
          maxPerClient: 10,
          maxTotal: 100_000,
          clientDigestKey: new Uint8Array(32)
        }),
        PublicCommitments.layer,
        PaymentStore.layer,
        holdableAttestationStore
      ).pipe(
        Layer.provideMerge(
          storageLayer({ databaseUrl: Option.none(), dataDir: "memory://", applicationName: "test" })
        )
      )
    ),
    Layer.provide(chain),
    Layer.provide(AttestorSettings.layer),
    Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))),
    Layer.provide(capture),
    Layer.provide(Logger.minimumLogLevel(LogLevel.Info))
  )
)

let base = ""
beforeAll(async () => {
  base = await runtime.runPromise(serverUrl)
})
afterAll(async () => {
  await runtime.dispose()
})

// ---------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------

let counter = 0
const fresh = () => ++counter
const address = (n: number) => getAddress(numberToHex(n, { size: 20 }))
const newKey = () => address(0x5e000 + fresh())

/** A hint-index escrow of messenger user `userId`, no fallback. */
const hintEscrow = (userId: string): HintEscrow => {
  const salt = keccak256(numberToHex(fresh()))
  const nonce = keccak256(numberToHex(1_000_000 + counter))
  const commitment = handleCommitment(2, userIdHash(userId), salt, nonce)
  return {
    beneficiaryId: computeId(2, commitment, zeroAddress, 0n),
    hint: {
      platformId: 2,
      userId,
      nonce,
      attestorSalt: salt,
      handleCommitment: commitment,
      fallback: undefined
    },
    launches: [
      {
        blockNumber: 10,
        blockHash: keccak256(numberToHex(10)),
        logIndex: 0,
        txHash: keccak256(numberToHex(11)),
        token: address(0x70)
      }
    ]
  }
}

const registeredAccount = (escrow: HintEscrow, changes: Partial<AccountState> = {}): AccountState => ({
  ...emptyAccount(escrow.beneficiaryId),
  registration: {
    kind: 2,
    commitment: escrow.hint.handleCommitment,
    fallbackRecipient: zeroAddress,
    fallbackDelay: 0n,
    blockNumber: 12
  },
  ...changes
})

/** A new user with `n` unregistered escrows in the hint index. */
const newUser = (n: number) => {
  const userId = String(8_000_000 + fresh())
  const escrows = Array.from({ length: n }, () => hintEscrow(userId))
  state.escrows.push(...escrows)
  return { userId, escrows }
}

const login = (userId: string, stealthOwner: Address, ids: ReadonlyArray<Hex> = []) =>
  runtime
    .runPromise(
      Effect.flatMap(SessionStore, (store) =>
        store.create(Schema.decodeUnknownSync(Session)({ platform: "messenger", userId, stealthOwner, ids }))
      )
    )
    .then((created) => created.token as string)

const attestationsOf = (id: Hex) =>
  runtime.runPromise(Effect.flatMap(AttestationStore, (store) => store.ofId(id)))

const contestedOf = (id: Hex) =>
  runtime.runPromise(Effect.flatMap(AttestationStore, (store) => store.contestedOf(id)))

const post = (body: unknown) =>
  fetch(`${base}/v1/bind`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body)
  })

interface WireBind {
  beneficiaryId: Hex
  newOwner: Address
  bindNonce: string
  deadline: string
  signature: Hex
  attestor: Address
  register: unknown
}

const bind = async (body: Record<string, unknown>): Promise<Array<WireBind>> => {
  const res = await post(body)
  const json = (await res.json()) as { binds: Array<WireBind> }
  expect({ status: res.status, json }).toMatchObject({ status: 200 })
  expect(() => Schema.decodeUnknownSync(BindResponse)(json)).not.toThrow()
  return json.binds
}

const expectRefusal = async (res: Response, status: number, code: string) => {
  expect({ status: res.status, body: await res.json() }).toMatchObject({ status, body: { code } })
}

const nowSeconds = () => Math.floor(Date.now() / 1000)

const signerOf = (b: WireBind) =>
  recoverTypedDataAddress({
    domain: vaultDomain(31337, VAULT),
    types: { BindOwner: vaultTypes.BindOwner },
    primaryType: "BindOwner",
    message: {
      id: b.beneficiaryId,
      newOwner: b.newOwner,
      bindNonce: BigInt(b.bindNonce),
      deadline: BigInt(b.deadline)
    },
    signature: b.signature
  })

const metric = async (name: string, outcome?: string) => {
  const text = await (
    await fetch(`${base}/v1/metrics`, { headers: { authorization: "Bearer metrics-secret" } })
  ).text()
  const pattern =
    outcome === undefined
      ? new RegExp(`^${name}(?:\\{[^}]*\\})? (\\d+)$`, "m")
      : new RegExp(`^${name}\\{[^}]*outcome="${outcome}"[^}]*\\} (\\d+)$`, "m")
  const match = pattern.exec(text)
  return match?.[1] === undefined ? 0 : Number(match[1])
}

beforeEach(() => {
  state.ready = true
  state.indexer = "following"
  state.hints = "ready"
  state.chainUp = true
})

// ---------------------------------------------------------------------------------------------
// Pure rules
// ---------------------------------------------------------------------------------------------

describe("deadline rules", () => {
  const now = 1_700_000_123
  it("accepts [now + 300, now + bindDeadlineSeconds + 300], both ends included", () => {
    expect(deadlineAccepted(BigInt(now + 299), now, 3600)).toBe(false)
    expect(deadlineAccepted(BigInt(now + 300), now, 3600)).toBe(true)
    expect(deadlineAccepted(BigInt(now + 3900), now, 3600)).toBe(true)
    expect(deadlineAccepted(BigInt(now + 3901), now, 3600)).toBe(false)
  })
  it("defaults to now + bindDeadlineSeconds rounded down to a 600 s grid", () => {
    expect(defaultDeadline(now, 3600)).toBe(1_700_003_400n)
    expect(defaultDeadline(1_700_002_800 - 3600, 3600)).toBe(1_700_002_800n)
    expect(defaultDeadline(1_700_002_799 - 3600, 3600)).toBe(1_700_002_200n)
    expect(defaultDeadline(now, 3600) % 600n).toBe(0n)
  })
})

describe("planBinds and contestedPendingOwner", () => {
  const key = address(0xabc)
  const indexed = (account?: Partial<AccountState>): IndexedEscrow => {
    const escrow = hintEscrow("1")
    return { escrow, account: account === undefined ? undefined : registeredAccount(escrow, account) }
  }
  it("skips pending binds and escrows owned by the key; takes the indexed bind nonce", () => {
    const free = indexed({ bindNonce: 3n })
    const plan = planBinds(
      [
        indexed(undefined),
        free,
        indexed({ pendingOwner: address(1) }),
        indexed({ owner: key }),
        indexed({ owner: address(2) })
      ],
      key,
      undefined
    )
    expect(Either.getOrThrow(plan).map((c) => c.bindNonce)).toEqual([0n, 3n, 0n])
  })
  it("refuses a request that would sign both kinds; the filter picks one", () => {
    const pub = indexed(undefined)
    const priv = indexed(undefined)
    const visibilityOf = (e: IndexedEscrow): Visibility => (e === pub ? "public" : "private")
    expect(planBinds([pub, priv], key, undefined, visibilityOf)).toEqual(Either.left(BOTH_VISIBILITIES))
    expect(
      Either.getOrThrow(planBinds([pub, priv], key, "public", visibilityOf)).map((c) => c.indexed)
    ).toEqual([pub])
    expect(
      Either.getOrThrow(planBinds([pub, priv], key, "private", visibilityOf)).map((c) => c.indexed)
    ).toEqual([priv])
  })
  it("a contest rules out the pending owner only when it is another key", () => {
    expect(contestedPendingOwner(indexed({ pendingOwner: address(9) }), key)).toBe(address(9))
    expect(contestedPendingOwner(indexed({ pendingOwner: key }), key)).toBeUndefined()
    expect(
      contestedPendingOwner(indexed({ pendingOwner: key.toLowerCase() as Address }), key)
    ).toBeUndefined()
    expect(contestedPendingOwner(indexed({}), key)).toBeUndefined()
    expect(contestedPendingOwner(indexed(undefined), key)).toBeUndefined()
  })
})

// ---------------------------------------------------------------------------------------------
// The route
// ---------------------------------------------------------------------------------------------

describe("POST /v1/bind", () => {
  it("signs BindOwner per escrow over the vault domain, with the registration payload, and records it", async () => {
    const { userId, escrows } = newUser(2)
    const [unregistered, registered] = escrows as [HintEscrow, HintEscrow]
    state.accounts.set(registered.beneficiaryId, registeredAccount(registered, { bindNonce: 2n }))
    const key = newKey()
    const session = await login(userId, key)
    const signaturesBefore = await metric("attestor_bind_signatures_total")
    const okBefore = await metric("attestor_binds_total", "ok")
    const binds = await bind({ session })
    const deadline = defaultDeadline(nowSeconds(), BIND_DEADLINE_SECONDS).toString()
    expect(binds).toEqual([
      {
        beneficiaryId: unregistered.beneficiaryId,
        newOwner: key,
        bindNonce: "0",
        deadline,
        signature: expect.stringMatching(/^0x[0-9a-f]{130}$/),
        attestor: ATTESTOR,
        register: {
          kind: 2,
          handleCommitment: unregistered.hint.handleCommitment,
          fallbackRecipient: zeroAddress,
          fallbackDelay: "0"
        }
      },
      {
        beneficiaryId: registered.beneficiaryId,
        newOwner: key,
        bindNonce: "2",
        deadline,
        signature: expect.stringMatching(/^0x[0-9a-f]{130}$/),
        attestor: ATTESTOR,
        register: null
      }
    ])
    for (const b of binds) expect(await signerOf(b)).toBe(ATTESTOR)
    expect(await attestationsOf(registered.beneficiaryId)).toEqual([
      {
        id: registered.beneficiaryId,
        newOwner: key.toLowerCase(),
        bindNonce: 2n,
        deadline: BigInt(deadline),
        visibility: "private",
        revoked: false,
        issuedAt: expect.any(Number)
      }
    ])
    expect(await metric("attestor_bind_signatures_total")).toBe(signaturesBefore + 2)
    expect(await metric("attestor_binds_total", "ok")).toBe(okBefore + 1)
    // The same request again signs the same messages and records nothing new.
    expect((await bind({ session })).map((b) => b.signature)).toEqual(binds.map((b) => b.signature))
    expect(await attestationsOf(registered.beneficiaryId)).toHaveLength(1)
  })

  it("skips escrows with a pending bind and escrows already owned by the session's key", async () => {
    const { userId, escrows } = newUser(4)
    const [pending, pendingMine, owned, free] = escrows as [HintEscrow, HintEscrow, HintEscrow, HintEscrow]
    const key = newKey()
    state.accounts.set(
      pending.beneficiaryId,
      registeredAccount(pending, { pendingOwner: newKey(), pendingReadyAt: 1n })
    )
    state.accounts.set(
      pendingMine.beneficiaryId,
      registeredAccount(pendingMine, { pendingOwner: key, pendingReadyAt: 1n })
    )
    state.accounts.set(owned.beneficiaryId, registeredAccount(owned, { owner: key }))
    state.accounts.set(free.beneficiaryId, registeredAccount(free, { owner: newKey(), bindNonce: 1n }))
    const binds = await bind({ session: await login(userId, key) })
    expect(binds.map((b) => [b.beneficiaryId, b.bindNonce])).toEqual([[free.beneficiaryId, "1"]])
    expect(await attestationsOf(pending.beneficiaryId)).toEqual([])
  })

  it("ids restricts the escrows; an id that is not the session's is left out", async () => {
    const { userId, escrows } = newUser(3)
    const [a, b, c] = escrows as [HintEscrow, HintEscrow, HintEscrow]
    const foreign = newUser(1).escrows[0] as HintEscrow
    const session = await login(userId, newKey())
    expect(
      (await bind({ session, ids: [c.beneficiaryId, a.beneficiaryId] })).map((x) => x.beneficiaryId)
    ).toEqual([a.beneficiaryId, c.beneficiaryId])
    expect(await bind({ session, ids: [foreign.beneficiaryId] })).toEqual([])
    expect(await attestationsOf(foreign.beneficiaryId)).toEqual([])
    // A session made for one id signs that one only.
    const narrow = await login(userId, newKey(), [b.beneficiaryId])
    expect((await bind({ session: narrow })).map((x) => x.beneficiaryId)).toEqual([b.beneficiaryId])
    expect(await bind({ session: narrow, ids: [a.beneficiaryId] })).toEqual([])
  })

  it("deadline: the window's edges are accepted, outside is 400 bad_request", async () => {
    const { userId } = newUser(1)
    const session = await login(userId, newKey())
    // 2 s of slack either way for the time between this clock and the server's.
    for (const offset of [302, BIND_DEADLINE_SECONDS + 298]) {
      const deadline = String(nowSeconds() + offset)
      const binds = await bind({ session, deadline })
      expect(binds.map((b) => b.deadline)).toEqual([deadline])
    }
    for (const offset of [298, BIND_DEADLINE_SECONDS + 302, -10])
      await expectRefusal(
        await post({ session, deadline: String(nowSeconds() + offset) }),
        400,
        "bad_request"
      )
    await expectRefusal(await post({ session, deadline: "0" }), 400, "bad_request")
  })

  it("visibility: a filter for the other kind signs nothing; a key used for public is refused for private", async () => {
    const { userId, escrows } = newUser(1)
    const key = newKey()
    const session = await login(userId, key)
    expect(await bind({ session, visibility: "public" })).toEqual([])
    expect(await bind({ session, visibility: "private" })).toHaveLength(1)
    // Another key, which this attestor once attested for a public escrow.
    const used = newKey()
    await runtime.runPromise(
      Effect.flatMap(AttestationStore, (store) =>
        store.record(
          [
            {
              id: keccak256(numberToHex(fresh())),
              newOwner: used,
              bindNonce: 0n,
              deadline: 1n,
              visibility: "public"
            }
          ],
          1
        )
      )
    )
    const res = await post({ session: await login(userId, used) })
    expect(res.status).toBe(400)
    expect(await res.json()).toEqual({
      code: "bad_request",
      error: "this stealth owner was already attested for public escrows: use a fresh key for private ones"
    })
    // The refused request recorded nothing: the escrow has the first key's attestation only.
    expect(await attestationsOf((escrows[0] as HintEscrow).beneficiaryId)).toHaveLength(1)
  })

  it("contest: another key's pending bind is ruled out with every other attested key, the user's other sessions end, nothing is signed", async () => {
    const { userId, escrows } = newUser(1)
    const escrow = escrows[0] as HintEscrow
    const intruder = newKey()
    const mine = newKey()
    const stranger = newKey()
    // The intruder got an attestation first (before any bind was proposed) ...
    const intruderSession = await login(userId, intruder)
    expect(await bind({ session: intruderSession })).toHaveLength(1)
    expect(await bind({ session: await login(userId, mine) })).toHaveLength(1)
    // ... and proposed it.
    state.accounts.set(
      escrow.beneficiaryId,
      registeredAccount(escrow, { pendingOwner: intruder, pendingReadyAt: 1n })
    )
    const session = await login(userId, mine)
    // Another user's session is not this user's to end.
    const strangerSession = await login(newUser(1).userId, stranger)
    expect(await bind({ session })).toEqual([])
    expect(await bind({ session, contest: true, ids: [escrow.beneficiaryId] })).toEqual([])
    const records = await attestationsOf(escrow.beneficiaryId)
    expect(records.map((r) => [r.newOwner, r.revoked])).toEqual([
      [intruder.toLowerCase(), true],
      [mine.toLowerCase(), false]
    ])
    expect(await contestedOf(escrow.beneficiaryId)).toEqual([intruder.toLowerCase()])
    expect(logLines.some((line) => line.includes("bind contested"))).toBe(true)
    // The intruder's session has ended; the contester's and the stranger's have not.
    await expectRefusal(await post({ session: intruderSession }), 401, "invalid_session")
    expect(await bind({ session, contest: true, ids: [escrow.beneficiaryId] })).toEqual([])
    expect(await bind({ session: strangerSession })).toHaveLength(1)

    // The veto clears the pending bind (or this replica's index never saw it): a new session of
    // the intruder's key gets nothing for the escrow, at any deadline; the user's key and a
    // fresh one do.
    state.accounts.set(escrow.beneficiaryId, registeredAccount(escrow, { bindNonce: 1n }))
    const again = await login(userId, intruder)
    expect(await bind({ session: again })).toEqual([])
    expect(await bind({ session: again, deadline: String(nowSeconds() + 1_000) })).toEqual([])
    expect(await bind({ session: again, ids: [escrow.beneficiaryId] })).toEqual([])
    expect((await attestationsOf(escrow.beneficiaryId)).filter((r) => !r.revoked)).toEqual([
      expect.objectContaining({ newOwner: mine.toLowerCase() })
    ])
    expect((await bind({ session })).map((b) => [b.beneficiaryId, b.newOwner, b.bindNonce])).toEqual([
      [escrow.beneficiaryId, mine, "1"]
    ])
    const freshKey = newKey()
    expect((await bind({ session: await login(userId, freshKey) })).map((b) => b.newOwner)).toEqual([
      freshKey
    ])
  })

  it("a contest is one decision: a bind of an older session held just before its record while the user contests gets no signature, for a key the contest never saw", async () => {
    const { userId, escrows } = newUser(1)
    const escrow = escrows[0] as HintEscrow
    // A session made before the contest, holding a key never attested and never proposed.
    const older = await login(userId, newKey())
    const session = await login(userId, newKey())
    const held = {
      reached: Deferred.unsafeMake<void>(FiberId.none),
      go: Deferred.unsafeMake<void>(FiberId.none)
    }
    heldRecord = held
    const pending = post({ session: older })
    try {
      await runtime.runPromise(Deferred.await(held.reached))
    } finally {
      heldRecord = undefined
    }
    expect(await bind({ session, contest: true, ids: [escrow.beneficiaryId] })).toEqual([])
    await runtime.runPromise(Deferred.succeed(held.go, undefined))
    await expectRefusal(await pending, 401, "invalid_session")
    expect(await attestationsOf(escrow.beneficiaryId)).toEqual([])
  })

  it("a contest of one escrow rules the attacker's key out on every escrow of the user: it gets no new signature for either, and its held signature for the other is judged unattested", async () => {
    const { userId, escrows } = newUser(2)
    const [proposed, other] = escrows as [HintEscrow, HintEscrow]
    const attacker = newKey()
    const mine = newKey()
    // A session as the user for the attacker's key: signed for both escrows (no ids).
    const attackerSession = await login(userId, attacker)
    const held = await bind({ session: attackerSession })
    expect(held.map((b) => b.beneficiaryId).sort()).toEqual(
      [proposed.beneficiaryId, other.beneficiaryId].sort()
    )
    state.accounts.set(
      proposed.beneficiaryId,
      registeredAccount(proposed, { pendingOwner: attacker, pendingReadyAt: 1n, bindNonce: 1n })
    )
    // The user contests the proposed escrow only.
    const session = await login(userId, mine)
    expect(await bind({ session, contest: true, ids: [proposed.beneficiaryId] })).toEqual([])
    for (const id of [proposed.beneficiaryId, other.beneficiaryId]) {
      expect(await contestedOf(id)).toEqual([attacker.toLowerCase()])
      expect((await attestationsOf(id)).map((r) => [r.newOwner, r.revoked])).toEqual([
        [attacker.toLowerCase(), true]
      ])
    }
    // The attacker then proposes the other escrow with the signature it holds: the veto
    // watcher's rule judges it unattested (and vetoes it with AUTO_VETO).
    const signedOther = held.find((b) => b.beneficiaryId === other.beneficiaryId) as WireBind
    const proposal = { id: other.beneficiaryId, newOwner: attacker, bindNonce: BigInt(signedOther.bindNonce) }
    expect(
      verdictOf(
        proposal,
        true,
        false,
        await attestationsOf(other.beneficiaryId),
        await contestedOf(other.beneficiaryId),
        nowSeconds() + 60
      )
    ).toBe("unattested")
    // No new signature for the key on either escrow, from a new session; the user's key binds
    // the escrow without a pending bind.
    const again = await login(userId, attacker)
    expect(await bind({ session: again })).toEqual([])
    expect(await bind({ session: again, ids: [other.beneficiaryId] })).toEqual([])
    expect((await bind({ session })).map((b) => [b.beneficiaryId, b.newOwner])).toEqual([
      [other.beneficiaryId, mine]
    ])
  })

  it("contest with no pending bind, or one for the session's own key, rules out the other attested keys; an id that is not the session's changes nothing", async () => {
    const { userId, escrows } = newUser(2)
    const [quiet, own] = escrows as [HintEscrow, HintEscrow]
    const other = newKey()
    const key = newKey()
    const otherSession = await login(userId, other)
    expect(await bind({ session: otherSession })).toHaveLength(2)
    state.accounts.set(own.beneficiaryId, registeredAccount(own, { pendingOwner: key, pendingReadyAt: 1n }))
    // A user with the escrow of another id: contesting it from here does nothing.
    const foreign = newUser(1)
    const foreignId = (foreign.escrows[0] as HintEscrow).beneficiaryId
    const foreignOwner = newKey()
    expect(await bind({ session: await login(foreign.userId, foreignOwner) })).toHaveLength(1)
    const session = await login(userId, key)
    expect(await bind({ session, contest: true, ids: [foreignId] })).toEqual([])
    expect(await contestedOf(foreignId)).toEqual([])
    expect((await attestationsOf(foreignId)).map((r) => r.revoked)).toEqual([false])
    expect(await bind({ session: otherSession, ids: [quiet.beneficiaryId] })).toHaveLength(1)

    expect(await bind({ session, contest: true, ids: [quiet.beneficiaryId] })).toEqual([])
    expect(await bind({ session, contest: true, ids: [own.beneficiaryId] })).toEqual([])
    for (const id of [quiet.beneficiaryId, own.beneficiaryId]) {
      expect((await attestationsOf(id)).map((r) => r.revoked)).toEqual([true])
      expect(await contestedOf(id)).toEqual([other.toLowerCase()])
    }
    await expectRefusal(await post({ session: otherSession }), 401, "invalid_session")
    // The contester's key still binds the escrow without a pending bind.
    expect((await bind({ session })).map((b) => b.beneficiaryId)).toEqual([quiet.beneficiaryId])
  })

  it("contest without exactly one id is 400 bad_request", async () => {
    const { userId, escrows } = newUser(2)
    const session = await login(userId, newKey())
    const ids = escrows.map((e) => e.beneficiaryId)
    for (const body of [
      { session, contest: true },
      { session, contest: true, ids }
    ])
      await expectRefusal(await post(body), 400, "bad_request")
  })

  it("unknown sessions are 401 invalid_session; malformed bodies 400 bad_request", async () => {
    const before = await metric("attestor_binds_total", "invalid_session")
    await expectRefusal(await post({ session: "unknown-session-token-0000" }), 401, "invalid_session")
    expect(await metric("attestor_binds_total", "invalid_session")).toBe(before + 1)
    const session = await login(newUser(1).userId, newKey())
    for (const body of [
      {},
      { session: "short" },
      { session, ids: [] },
      { session, ids: ["0x12"] },
      { session, deadline: "soon" },
      { session, visibility: "secret" },
      { session, contest: "yes" },
      "not json"
    ])
      await expectRefusal(await post(body), 400, "bad_request")
  })

  it("503 unavailable before the indexes are ready, and when stale with the chain down", async () => {
    const session = await login(newUser(1).userId, newKey())
    state.ready = false
    await expectRefusal(await post({ session }), 503, "unavailable")
    state.ready = true
    state.indexer = "retrying"
    state.chainUp = false
    await expectRefusal(await post({ session }), 503, "unavailable")
    state.chainUp = true
    expect(await bind({ session })).toHaveLength(1)
    state.indexer = "following"
    state.hints = "retrying"
    state.chainUp = false
    await expectRefusal(await post({ session }), 503, "unavailable")
  })

  it("puts nothing of a bind in the logs", () => {
    const secrets = state.escrows.flatMap((e) => [
      e.beneficiaryId,
      e.beneficiaryId.slice(2, 20),
      e.hint.userId
    ])
    for (const line of logLines) for (const secret of secrets) expect(line).not.toContain(secret)
  })
})
