/**
 * The typed client's committee helpers (docs/attestor.md "Writing a client"): one deadline every
 * member accepts, a login started at each member with its own secret, and the bind signatures
 * collected from every member, checked as the vault checks them, deduplicated and sorted by signer,
 * or a `CommitteeShort` naming each member that did not sign and why. The attestors are real HTTP
 * servers on 127.0.0.1 answering the attestor's wire with real `BindOwner` signatures.
 */
import { createHash } from "node:crypto"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { Effect, Exit, Schema } from "effect"
import { type Hex, recoverTypedDataAddress } from "viem"
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { hintPublicKeyOf } from "../../src/attestor/hints/hintEnvelopes.js"
import {
  Address,
  Bytes32,
  type Committee,
  type CommitteeMember,
  type CommitteeShort,
  CompressedPublicKey,
  collectBindSignatures,
  committeeDeadline,
  committeeOf,
  type MemberOutcome,
  type MemberSession,
  proposeBindRequestOf,
  SessionToken,
  startCommitteeLogins,
  vaultDomain,
  vaultTypes
} from "../../src/client.js"

const CHAIN = {
  chainId: 31337,
  vault: Schema.decodeSync(Address)("0x5FbDB2315678afecb367f032d93F642f64180aa3")
}
const ID = Schema.decodeSync(Bytes32)(`0x${"ab".repeat(32)}`)
const DEADLINE = 1_800_000_000n
const HINT_KEY = Schema.decodeSync(CompressedPublicKey)(hintPublicKeyOf(`0x${"11".repeat(32)}`))

const owner = privateKeyToAccount(generatePrivateKey())
const stranger = privateKeyToAccount(generatePrivateKey())
const address = (account: PrivateKeyAccount) => Schema.decodeSync(Address)(account.address)

/** How a stand-in attestor answers `POST /v1/bind`. */
type Behaviour =
  | {
      readonly kind: "sign"
      readonly key: PrivateKeyAccount
      readonly newOwner?: PrivateKeyAccount
      /** Answers with `v` 0 or 1 in place of 27 or 28: viem recovers it, the vault does not. */
      readonly yParityV?: boolean
    }
  | { readonly kind: "refuse" }

interface StandIn {
  readonly url: string
  readonly binds: Array<Record<string, unknown>>
  readonly starts: Array<Record<string, unknown>>
  readonly close: () => Promise<void>
}

const readJson = async (req: IncomingMessage): Promise<Record<string, unknown>> => {
  const chunks: Array<Buffer> = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  return JSON.parse(Buffer.concat(chunks).toString("utf8"))
}

const send = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { "content-type": "application/json" })
  res.end(JSON.stringify(body))
}

/** A `BindSignature` as the attestor answers it (docs/attestor.md §2). */
const signBind = async (key: PrivateKeyAccount, newOwner: Hex, deadline: bigint) => ({
  beneficiaryId: ID,
  newOwner,
  bindNonce: "0",
  deadline: deadline.toString(),
  signature: await key.signTypedData({
    domain: vaultDomain(CHAIN.chainId, CHAIN.vault),
    types: vaultTypes,
    primaryType: "BindOwner",
    message: { id: ID, newOwner, bindNonce: 0n, deadline }
  }),
  attestor: key.address,
  register: null
})

/** Tracing headers (`traceparent`, `b3`) the stand-ins received: a client must send none. */
const tracingHeaders: Array<string> = []

/** An attestor's wire, enough of it: `/v1/info`, `/v1/oauth/microblog/start` and `/v1/bind`. */
const standIn = async (behaviour: Behaviour, bindDeadlineSeconds = 3600): Promise<StandIn> => {
  const binds: Array<Record<string, unknown>> = []
  const starts: Array<Record<string, unknown>> = []
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    for (const name of ["traceparent", "b3"]) if (req.headers[name] !== undefined) tracingHeaders.push(name)
    if (req.method === "GET" && req.url === "/v1/info")
      return send(res, 200, {
        chainId: CHAIN.chainId,
        vault: CHAIN.vault,
        attestor: behaviour.kind === "sign" ? behaviour.key.address : stranger.address,
        hintPublicKey: HINT_KEY,
        platforms: ["microblog"],
        bindDeadlineSeconds,
        handleLookup: { mode: "off", platforms: [], price: null }
      })
    const body = await readJson(req)
    const start = req.url === "/v1/oauth/microblog/start"
    // As the attestor refuses each: a platform it is not configured for, a session it does not know.
    if (behaviour.kind === "refuse")
      return start
        ? send(res, 400, { error: "microblog logins are not configured here", code: "unsupported" })
        : send(res, 401, { error: "unknown or expired session", code: "invalid_session" })
    if (start) {
      starts.push(body)
      return send(res, 200, {
        url: `https://provider.test/authorize?n=${starts.length}`,
        state: "S".repeat(43)
      })
    }
    binds.push(body)
    const newOwner = (behaviour.newOwner ?? owner).address
    const bind = await signBind(behaviour.key, newOwner, BigInt(body.deadline as string))
    const v = Number.parseInt(bind.signature.slice(130), 16)
    const signature = behaviour.yParityV ? `${bind.signature.slice(0, 130)}0${v - 27}` : bind.signature
    return send(res, 200, { binds: [{ ...bind, signature }] })
  }
  const server = createServer((req, res) => void handle(req, res))
  const url = await listen(server)
  return { url, binds, starts, close: () => new Promise((resolve) => server.close(() => resolve())) }
}

const listen = (server: Server) =>
  new Promise<string>((resolve) =>
    server.listen(0, "127.0.0.1", () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`))
  )

/** A loopback URL with nothing listening: a port just freed. */
const downUrl = async () => {
  const server = createServer()
  const url = await listen(server)
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return url
}

const session = (n: number): MemberSession => ({
  session: Schema.decodeSync(SessionToken)(`session-token-${n}`.padEnd(43, "x")),
  loginSecret: Schema.decodeSync(Bytes32)(`0x${String(n).repeat(64).slice(0, 64)}`)
})

const byAddress = (x: PrivateKeyAccount, y: PrivateKeyAccount) =>
  BigInt(x.address) < BigInt(y.address) ? -1 : 1
// The three honest members' keys, named so the committee lists them in descending order (c, a, b):
// only a sort puts their signatures in the ascending order the vault wants.
const [b, a, c] = Array.from({ length: 3 }, () => privateKeyToAccount(generatePrivateKey())).sort(
  byAddress
) as [PrivateKeyAccount, PrivateKeyAccount, PrivateKeyAccount]
const [foreignSigner, imposter, unregistered] = Array.from({ length: 3 }, () =>
  privateKeyToAccount(generatePrivateKey())
) as [PrivateKeyAccount, PrivateKeyAccount, PrivateKeyAccount]
const registered = new Set([a, b, c, foreignSigner, imposter].map((k) => k.address))

let servers: Record<string, StandIn>
let committee: Committee
let down: string

beforeAll(async () => {
  servers = {
    a: await standIn({ kind: "sign", key: a }),
    b: await standIn({ kind: "sign", key: b }, 7200),
    c: await standIn({ kind: "sign", key: c }),
    aAgain: await standIn({ kind: "sign", key: a }),
    refusing: await standIn({ kind: "refuse" }),
    foreign: await standIn({ kind: "sign", key: foreignSigner, newOwner: stranger }),
    // Signs with another key than the one the committee lists for it.
    imposter: await standIn({ kind: "sign", key: stranger }),
    unregistered: await standIn({ kind: "sign", key: unregistered }),
    noSession: await standIn({ kind: "sign", key: c })
  }
  down = await downUrl()
  const member = (url: string, key: PrivateKeyAccount): CommitteeMember => ({
    url,
    address: address(key),
    hintPublicKey: HINT_KEY
  })
  committee = {
    threshold: 3,
    members: [
      member(servers.c!.url, c),
      member(down, b),
      member(servers.refusing!.url, b),
      member(servers.a!.url, a),
      member(servers.foreign!.url, foreignSigner),
      member(servers.imposter!.url, imposter),
      member(servers.unregistered!.url, unregistered),
      member(servers.aAgain!.url, a),
      member(servers.b!.url, b),
      member(servers.noSession!.url, c)
    ]
  }
})

afterAll(async () => {
  await Promise.all(Object.values(servers ?? {}).map((s) => s.close()))
})

const collect = (threshold: number) =>
  collectBindSignatures({
    committee: { ...committee, threshold },
    sessions: committee.members.map((_, i) => (i === 9 ? undefined : session(i + 1))),
    owner: address(owner),
    id: ID,
    bindNonce: 0n,
    deadline: DEADLINE,
    chain: CHAIN,
    isAttestor: async (signer) => registered.has(signer)
  })

const tags = (outcomes: ReadonlyArray<MemberOutcome>) => outcomes.map((o) => o._tag)

const EXPECTED_TAGS = [
  "Signed",
  "Down",
  "Refused",
  "Signed",
  "ForeignBind",
  "InvalidSignature",
  "NotAttestor",
  "Duplicate",
  "Signed",
  "NotAsked"
]

describe("collectBindSignatures", () => {
  it("merges the members' valid signatures, one per signer, sorted by signer as proposeBind wants", async () => {
    const collected = await Effect.runPromise(collect(3))
    const ascending = [b.address, a.address, c.address]
    expect(collected.signers).toEqual(ascending)
    expect(collected.signatures).toHaveLength(3)
    // Each signature is the member's own over this very bind.
    const recovered = await Promise.all(
      collected.signatures.map((signature) =>
        recoverTypedDataAddress({
          domain: vaultDomain(CHAIN.chainId, CHAIN.vault),
          types: vaultTypes,
          primaryType: "BindOwner",
          message: { id: ID, newOwner: owner.address, bindNonce: 0n, deadline: DEADLINE },
          signature
        })
      )
    )
    expect(recovered).toEqual(ascending)
    expect(tags(collected.outcomes)).toEqual(EXPECTED_TAGS)

    // Every member asked got the same deadline, the one id, and its own session and secret.
    expect(servers.a!.binds.at(-1)).toEqual({
      session: session(4).session,
      loginSecret: session(4).loginSecret,
      ids: [ID],
      deadline: DEADLINE.toString()
    })
    expect(servers.b!.binds.at(-1)?.deadline).toBe(DEADLINE.toString())
    expect(servers.noSession!.binds).toEqual([])
    // No tracing header: a browser would preflight it, and one trace id would tie the logins together.
    expect(tracingHeaders).toEqual([])

    // The relayer's body: the same signatures in the same order.
    const body = proposeBindRequestOf(collected)
    expect(body).toMatchObject({ id: ID, newOwner: owner.address, deadline: DEADLINE })
    expect(body.signatures).toEqual(collected.signatures)
    expect("register" in body).toBe(false)
  })

  it("below the threshold fails with CommitteeShort naming each member that did not sign and why", async () => {
    const exit = await Effect.runPromiseExit(collect(4))
    expect(Exit.isFailure(exit)).toBe(true)
    const error = (Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined) as
      | CommitteeShort
      | undefined
    expect(error?._tag).toBe("CommitteeShort")
    if (error === undefined) return
    expect(error.signed).toBe(3)
    expect(error.threshold).toBe(4)
    expect(tags(error.outcomes)).toEqual(EXPECTED_TAGS)
    const missing = Object.fromEntries(error.missing.map((o) => [o.member.url, o]))
    expect(missing[down]).toMatchObject({ _tag: "Down" })
    expect(missing[servers.refusing!.url]).toMatchObject({
      _tag: "Refused",
      status: 401,
      code: "invalid_session",
      reason: "unknown or expired session"
    })
    expect(missing[servers.foreign!.url]).toMatchObject({ _tag: "ForeignBind", newOwner: stranger.address })
    expect(missing[servers.imposter!.url]).toMatchObject({ _tag: "InvalidSignature" })
    expect(missing[servers.unregistered!.url]).toMatchObject({
      _tag: "NotAttestor",
      signer: unregistered.address
    })
    expect(missing[servers.aAgain!.url]).toMatchObject({ _tag: "Duplicate", signer: a.address })
    expect(missing[servers.noSession!.url]).toMatchObject({ _tag: "NotAsked" })
    expect(Object.keys(missing)).toHaveLength(7)
    // Readable by a person: the count, and every missing member with its reason.
    expect(error.message).toContain("3 of 4 attestor signatures")
    expect(error.message).toContain(`${down} (${b.address}) down`)
    expect(error.message).toContain("refused with 401 invalid_session")
    expect(error.message).toContain(`signed for another key, ${stranger.address}`)
    expect(error.message).toContain("not asked")
  })

  it("an answer at another deadline or bind nonce than asked is an invalid signature", async () => {
    const exit = await Effect.runPromiseExit(
      collectBindSignatures({
        committee: { threshold: 1, members: [committee.members[3]!] },
        sessions: [session(1)],
        owner: address(owner),
        id: ID,
        bindNonce: 1n,
        deadline: DEADLINE,
        chain: CHAIN,
        isAttestor: () => true
      })
    )
    expect(exit).toMatchObject({
      _tag: "Failure",
      cause: { error: { _tag: "CommitteeShort", outcomes: [{ _tag: "InvalidSignature" }] } }
    })
  })
})

describe("collectBindSignatures and the vault's signature form", () => {
  it("a signature with v 0 or 1 (viem recovers it, the vault does not) is an invalid signature", async () => {
    const member = privateKeyToAccount(generatePrivateKey())
    const server = await standIn({ kind: "sign", key: member, yParityV: true })
    try {
      const exit = await Effect.runPromiseExit(
        collectBindSignatures({
          committee: {
            threshold: 1,
            members: [{ url: server.url, address: address(member), hintPublicKey: HINT_KEY }]
          },
          sessions: [session(1)],
          owner: address(owner),
          id: ID,
          bindNonce: 0n,
          deadline: DEADLINE,
          chain: CHAIN,
          isAttestor: () => true
        })
      )
      expect(exit).toMatchObject({
        _tag: "Failure",
        cause: { error: { _tag: "CommitteeShort", outcomes: [{ _tag: "InvalidSignature" }] } }
      })
    } finally {
      await server.close()
    }
  })
})

describe("committeeDeadline", () => {
  const NOW = 1_800_000_123

  it("is the smallest window's default: now + the shortest bindDeadlineSeconds, down to the 600 s grid", () => {
    expect(Effect.runSync(committeeDeadline([7200, 3600, 86_400], NOW))).toBe(
      BigInt(Math.floor((NOW + 3600) / 600) * 600)
    )
  })

  it("lies in every member's window, with a minute of clock skew either side, for any settings", () => {
    for (const shortest of [120, 200, 400, 659, 660, 900, 960, 1000, 1500, 3600, 86_400])
      for (let now = NOW; now < NOW + 600; now += 37) {
        const deadline = Number(Effect.runSync(committeeDeadline([shortest, shortest * 3], now)))
        expect(deadline).toBeGreaterThanOrEqual(now + 300 + 60)
        expect(deadline).toBeLessThanOrEqual(now + shortest + 300 - 60)
        // On the grid whenever the window holds a grid point.
        const gridPoint = Math.ceil((now + 360) / 600) * 600
        if (gridPoint <= now + shortest + 240) expect(deadline % 600).toBe(0)
      }
  })

  it("fails when no deadline fits: a window narrower than the skew margin, or no member answered", () => {
    expect(Effect.runSyncExit(committeeDeadline([3600, 100], NOW))).toMatchObject({
      _tag: "Failure",
      cause: { error: { _tag: "NoCommonDeadline" } }
    })
    expect(Effect.runSyncExit(committeeDeadline([], NOW))).toMatchObject({
      _tag: "Failure",
      cause: { error: { _tag: "NoCommonDeadline" } }
    })
  })
})

describe("committeeOf", () => {
  it("reads a deployment file's attestors and threshold", async () => {
    const file = {
      attestorThreshold: 2,
      attestors: [
        { url: servers.a!.url, address: a.address.toLowerCase(), hintPublicKey: HINT_KEY },
        { url: servers.b!.url, address: b.address, hintPublicKey: HINT_KEY }
      ]
    }
    expect(await Effect.runPromise(committeeOf(file))).toEqual({
      threshold: 2,
      members: [
        { url: servers.a!.url, address: a.address, hintPublicKey: HINT_KEY },
        { url: servers.b!.url, address: b.address, hintPublicKey: HINT_KEY }
      ]
    })
  })

  it("takes an older file's one attestor at threshold 1, its address from its /v1/info", async () => {
    const committee = await Effect.runPromise(
      committeeOf({ attestorUrl: servers.c!.url, hintPublicKey: HINT_KEY })
    )
    expect(committee).toEqual({
      threshold: 1,
      members: [{ url: servers.c!.url, address: c.address, hintPublicKey: HINT_KEY }]
    })
  })

  it("refuses a threshold above the members, a member listed twice, and a file without attestors", async () => {
    const entry = { url: servers.a!.url, address: a.address, hintPublicKey: HINT_KEY }
    for (const file of [
      { attestorThreshold: 2, attestors: [entry] },
      { attestorThreshold: 1, attestors: [entry, entry] },
      { vault: CHAIN.vault },
      { attestorUrl: down, hintPublicKey: HINT_KEY }
    ])
      expect(await Effect.runPromiseExit(committeeOf(file))).toMatchObject({
        _tag: "Failure",
        cause: { error: { _tag: "CommitteeUnreadable" } }
      })
  })
})

describe("startCommitteeLogins", () => {
  it("starts the login at each member with its own secret, or says why it did not start", async () => {
    const members = [
      committee.members[3]!,
      committee.members[1]!,
      committee.members[2]!,
      committee.members[8]!
    ]
    const logins = await Effect.runPromise(
      startCommitteeLogins({
        committee: { threshold: 2, members },
        platform: "microblog",
        stealthOwner: address(owner),
        ids: [ID]
      })
    )
    expect(logins.map((l) => l.started._tag)).toEqual(["Started", "Down", "Refused", "Started"])
    expect(logins[2]!.started).toMatchObject({ status: 400, code: "unsupported" })
    expect(new Set(logins.map((l) => l.loginSecret)).size).toBe(4)
    for (const login of logins)
      expect(login.loginChallenge).toBe(
        `0x${createHash("sha256")
          .update(Buffer.from(login.loginSecret.slice(2), "hex"))
          .digest("hex")}`
      )
    // Each member saw its own challenge, never the secret.
    const [atA, , , atB] = logins
    expect(servers.a!.starts.at(-1)).toEqual({
      stealthOwner: owner.address,
      ids: [ID],
      loginChallenge: atA!.loginChallenge
    })
    expect(servers.b!.starts.at(-1)?.loginChallenge).toBe(atB!.loginChallenge)
    expect(atA!.started).toMatchObject({
      _tag: "Started",
      url: expect.stringContaining("https://provider.test/")
    })
  })
})
