/**
 * A messenger recipient on the devnet, end to end over HTTP: a creator takes commitments from the
 * attestor for a messenger user id and launches tokens with hints sealed to its hint key; the
 * recipient logs in with a widget payload signed with the devnet bot token and lists the escrows
 * (`POST /v1/escrows`): unregistered, each with the kind-2 registration payload whose
 * `computeId(2, …)` is the launched beneficiary id; after `registerHandle` on the vault and the
 * index catching up, registered; a proposed bind shows its pending owner and is left alone.
 * Every refusal with its status and code: bad widget, replay, unknown and expired sessions,
 * messenger not configured, malformed bodies, and 503 once the chain is gone and the index stale.
 *
 * Three attestors run in this process on the same devnet, each on its own database: the devnet's
 * (bot token set), one with SESSION_TTL_SECONDS=1, and one without a bot token.
 */
import { join } from "node:path"
import { Effect, Exit, Layer, Logger, LogLevel, Schema, Scope } from "effect"
import { type Address, type Hex, keccak256, toHex, zeroAddress } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { devnetAccount, devnetRoles, launchSampleToken } from "../../contracts/deploy.js"
import { Attestor } from "../../layers/attestor.js"
import {
  attestorEnv,
  devnetKeys,
  freeLoopbackPort,
  withSettings,
  writeDevnetFile
} from "../../layers/devnet.js"
import { EscrowsResponse, SessionResponse } from "../../schema/attestor.js"
import { computeId } from "../../schema/ids.js"
import { AttestorClient, type Commitment } from "./support/attestorClient.js"
import { farDeadline, VaultDevnet } from "./support/relayerDevnet.js"

/** Mnemonic account that sends the vault setup transactions (free for tests, docs/protocol.md §9). */
const SETUP = 3

interface WireEscrow {
  id: Hex
  registered: boolean
  owner: Address | null
  pendingOwner: Address | null
  pendingReadyAt: string | null
  register: { kind: number; handleCommitment: Hex; fallbackRecipient: Address; fallbackDelay: string } | null
  visibility: string
}

let net: VaultDevnet
let scope: Scope.CloseableScope
/** The devnet's attestor, one with 1-second sessions, one without a messenger bot token. */
let base = ""
let shortLived = ""
let unconfigured = ""

beforeAll(async () => {
  net = await VaultDevnet.start("attestor-escrows")
  scope = await Effect.runPromise(Scope.make())
  const urls = await Effect.runPromise(
    Effect.gen(function* () {
      const ports = [yield* freeLoopbackPort, yield* freeLoopbackPort, yield* freeLoopbackPort] as const
      yield* writeDevnetFile(net.chain, {
        relayerUrl: "http://127.0.0.1:1",
        attestorUrl: `http://127.0.0.1:${ports[0]}`
      })
      const devnetEnv = attestorEnv(net.chain, ports[0])
      // Every request of this file comes from 127.0.0.1: a bucket large enough for all of them.
      const common = {
        RATE_LIMIT_BURST: "1000",
        RATE_LIMIT_PER_MINUTE: "1000",
        INDEXER_POLL_INTERVAL_MS: "200"
      }
      const { MESSENGER_BOT_TOKEN: _, ...withoutBot } = attestorEnv(net.chain, ports[2])
      const envs = [
        { ...devnetEnv, ...common },
        {
          ...attestorEnv(net.chain, ports[1]),
          ...common,
          SESSION_TTL_SECONDS: "1",
          DATA_DIR: join(net.chain.dir, "data", "attestor-short")
        },
        { ...withoutBot, ...common, DATA_DIR: join(net.chain.dir, "data", "attestor-bare") }
      ]
      for (const env of envs)
        yield* Layer.buildWithScope(
          withSettings(Attestor.layer, env).pipe(Layer.provide(Logger.minimumLogLevel(LogLevel.Error))),
          scope
        )
      return ports.map((port) => `http://127.0.0.1:${port}`)
    })
  )
  ;[base, shortLived, unconfigured] = urls as [string, string, string]
}, 300_000)

afterAll(async () => {
  if (scope !== undefined) await Effect.runPromise(Scope.close(scope, Exit.void))
  await net?.dispose()
})

const post = (url: string, path: string, body: unknown) =>
  fetch(`${url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body)
  })

const expectRefusal = async (res: Response, status: number, code: string) => {
  expect({ status: res.status, body: await res.json() }).toMatchObject({ status, body: { code } })
}

/** The devnet's attestor as a client sees it. */
const devnetAttestor = () => new AttestorClient(net, base)
const commit = (userId: string) => devnetAttestor().commit(userId)
const launchTo = (commitment: Commitment, symbol: string, fallback?: { recipient: Address; delay: bigint }) =>
  devnetAttestor().launchTo(commitment, symbol, fallback)
const indexed = (block: number) => devnetAttestor().indexed(block)
const head = () => devnetAttestor().head()
const widget = (id: number, token?: string) => AttestorClient.widget(String(id), token)

const stealthOwner = privateKeyToAccount(generatePrivateKey()).address

const login = async (userId: string, options: { id?: Hex; url?: string } = {}) => {
  const res = await post(options.url ?? base, "/v1/oauth/messenger/verify", {
    auth: widget(Number(userId)),
    stealthOwner,
    ...(options.id === undefined ? {} : { id: options.id })
  })
  expect(res.status).toBe(200)
  const body = Schema.decodeUnknownSync(SessionResponse)(await res.json())
  expect(body).toMatchObject({
    platform: "messenger",
    userId,
    stealthOwner,
    ids: options.id ? [options.id] : []
  })
  return body.session as string
}

const list = async (session: string, url = base): Promise<Array<WireEscrow>> => {
  const res = await post(url, "/v1/escrows", { session })
  expect(res.status).toBe(200)
  const body = (await res.json()) as { escrows: Array<WireEscrow> }
  expect(() => Schema.decodeUnknownSync(EscrowsResponse)(body)).not.toThrow()
  return body.escrows
}

const USER = "7700001"
const OTHER_USER = "7700002"
const fallbackRecipient = devnetAccount(devnetRoles.firstFree).address

let plain: { id: Hex; commitment: Commitment }
let withFallback: { id: Hex; commitment: Commitment }
let session = ""

describe("a messenger recipient's escrows on the devnet", () => {
  it("/v1/info lists messenger on the devnet's attestor", async () => {
    const info = await Effect.runPromise(devnetAttestor().client.info.info())
    expect(info.platforms).toEqual(["messenger"])
  })

  it("lists the user's escrows unregistered, each with the registration payload of its id", {
    timeout: 120_000
  }, async () => {
    const first = await commit(USER)
    plain = { commitment: first, id: (await launchTo(first, "MSG1")).id }
    const second = await commit(USER)
    const launched = await launchTo(second, "MSG2", { recipient: fallbackRecipient, delay: 86_400n })
    withFallback = { commitment: second, id: launched.id }
    // Another messenger user's launch, and a second launch to the first escrow.
    await launchTo(await commit(OTHER_USER), "MSG3")
    await launchSampleToken(net.rpcUrl, net.chain.deployment, { beneficiaryId: plain.id, symbol: "MSG4" })
    await indexed(await head())

    session = await login(USER)
    const escrows = await list(session)
    expect(escrows).toEqual([
      {
        id: plain.id,
        registered: false,
        owner: null,
        pendingOwner: null,
        pendingReadyAt: null,
        register: {
          kind: 2,
          handleCommitment: first.handleCommitment,
          fallbackRecipient: zeroAddress,
          fallbackDelay: "0"
        },
        visibility: "private"
      },
      {
        id: withFallback.id,
        registered: false,
        owner: null,
        pendingOwner: null,
        pendingReadyAt: null,
        register: {
          kind: 2,
          handleCommitment: second.handleCommitment,
          fallbackRecipient,
          fallbackDelay: "86400"
        },
        visibility: "private"
      }
    ])
    for (const escrow of escrows) {
      const r = escrow.register
      expect(r && computeId(2, r.handleCommitment, r.fallbackRecipient, BigInt(r.fallbackDelay))).toBe(
        escrow.id
      )
    }
  })

  it("a session made for one id lists that escrow only; other users see their own", async () => {
    expect((await list(await login(USER, { id: withFallback.id }))).map((e) => e.id)).toEqual([
      withFallback.id
    ])
    const unknownId = keccak256(toHex("no such escrow"))
    expect(await list(await login(USER, { id: unknownId }))).toEqual([])
    const others = await list(await login(OTHER_USER))
    expect(others).toHaveLength(1)
    expect(others[0]?.id).not.toBe(plain.id)
    expect(await list(await login("7700003"))).toEqual([])
  })

  it("after registerHandle on the vault and the index catching up, the escrow is registered", {
    timeout: 60_000
  }, async () => {
    await net.vaultWrite(SETUP, "registerHandle", [plain.commitment.handleCommitment, zeroAddress, 0n])
    await indexed(await head())
    const [registered, unregistered] = await list(session)
    expect(registered).toEqual({
      id: plain.id,
      registered: true,
      owner: zeroAddress,
      pendingOwner: null,
      pendingReadyAt: null,
      register: null,
      visibility: "private"
    })
    expect(unregistered).toMatchObject({ id: withFallback.id, registered: false, owner: null })
  })

  it("a proposed bind shows its pending owner and ready time; listing leaves it alone", {
    timeout: 60_000
  }, async () => {
    const newOwner = privateKeyToAccount(generatePrivateKey()).address
    const deadline = farDeadline()
    const attestor = privateKeyToAccount(devnetKeys.attestor)
    const signature = await net.sign(attestor, "BindOwner", {
      id: plain.id,
      newOwner,
      bindNonce: 0n,
      deadline
    })
    await net.vaultWrite(SETUP, "proposeBind", [plain.id, newOwner, deadline, [signature]])
    await indexed(await head())
    const onChain = await net.vaultAccount(plain.id)
    const [pending] = await list(session)
    expect(pending).toMatchObject({
      id: plain.id,
      registered: true,
      owner: zeroAddress,
      pendingOwner: newOwner,
      pendingReadyAt: onChain.pendingReadyAt.toString()
    })
    await list(session)
    expect(await net.vaultAccount(plain.id)).toEqual(onChain)
  })
})

describe("refusals on the devnet", () => {
  it("a tampered or foreign widget payload is 401 invalid_session", async () => {
    const good = widget(Number(USER))
    for (const auth of [
      { ...good, id: Number(OTHER_USER) },
      { ...good, first_name: "Mallory" },
      widget(Number(USER), "1000000001:not-the-devnet-bot")
    ])
      await expectRefusal(
        await post(base, "/v1/oauth/messenger/verify", { auth, stealthOwner }),
        401,
        "invalid_session"
      )
  })

  it("a replayed widget payload is 401 invalid_session", async () => {
    const auth = widget(Number(USER))
    expect((await post(base, "/v1/oauth/messenger/verify", { auth, stealthOwner })).status).toBe(200)
    await expectRefusal(
      await post(base, "/v1/oauth/messenger/verify", { auth, stealthOwner }),
      401,
      "invalid_session"
    )
  })

  it("unknown and expired sessions are 401 invalid_session", async () => {
    await expectRefusal(
      await post(base, "/v1/escrows", { session: "unknown-session-token-0000" }),
      401,
      "invalid_session"
    )
    const res = await post(shortLived, "/v1/oauth/messenger/verify", {
      auth: widget(Number(USER)),
      stealthOwner
    })
    expect(res.status).toBe(200)
    const { session: brief, expiresAt } = (await res.json()) as { session: string; expiresAt: string }
    await new Promise((resolve) => setTimeout(resolve, Number(expiresAt) * 1000 - Date.now() + 50))
    await expectRefusal(await post(shortLived, "/v1/escrows", { session: brief }), 401, "invalid_session")
  })

  it("messenger not configured: 400 unsupported, and /v1/info lists no platform", async () => {
    await expectRefusal(
      await post(unconfigured, "/v1/oauth/messenger/verify", { auth: widget(Number(USER)), stealthOwner }),
      400,
      "unsupported"
    )
    const info = await Effect.runPromise(new AttestorClient(net, unconfigured).client.info.info())
    expect(info.platforms).toEqual([])
  })

  it("malformed bodies are 400 bad_request", async () => {
    const { hash: _, ...withoutHash } = widget(Number(USER))
    for (const body of [
      { auth: withoutHash, stealthOwner },
      { auth: widget(Number(USER)), stealthOwner: "0xnot-an-address" },
      { auth: widget(Number(USER)), stealthOwner, id: "0x12" },
      "not json"
    ])
      await expectRefusal(await post(base, "/v1/oauth/messenger/verify", body), 400, "bad_request")
    for (const body of [{}, { session: "short" }, { session: ["a-list-of-tokens-000"] }])
      await expectRefusal(await post(base, "/v1/escrows", body), 400, "bad_request")
  })

  // Last: it stops the chain.
  it("with the chain gone and the index stale, /v1/escrows is 503 unavailable; logins still work", {
    timeout: 120_000
  }, async () => {
    await net.chain.anvil.stop()
    let state = ""
    for (let i = 0; i < 600 && state !== "retrying"; i++) {
      const health = await Effect.runPromise(devnetAttestor().client.operator.health())
      state = health.indexer?.state ?? ""
      if (state !== "retrying") await new Promise((resolve) => setTimeout(resolve, 100))
    }
    expect(state).toBe("retrying")
    await expectRefusal(await post(base, "/v1/escrows", { session }), 503, "unavailable")
    // A login needs no chain.
    expect(
      (await post(base, "/v1/oauth/messenger/verify", { auth: widget(Number(USER)), stealthOwner })).status
    ).toBe(200)
    // An unknown session is still told so first.
    await expectRefusal(
      await post(base, "/v1/escrows", { session: "unknown-session-token-0000" }),
      401,
      "invalid_session"
    )
  })
})
