/**
 * fedsocial sign-in end to end on the devnet (docs/attestor.md §3, §4; docs/protocol.md §9 registry
 * stand-ins, §10 "fedsocial"): account #5, custody of fid 1005 on the devnet's IdRegistry, signs a
 * Sign In With Farcaster message with the values of start and gets a session for fid 1005 bound to
 * the stealth owner of start, lists the escrow launched to fedsocial user 1005 and gets a bind signed.
 * Every other message is refused with 401 `invalid_session` and no session: another domain, a
 * nonce never issued, a reused nonce, an expired message or nonce, a signer that is not the fid's
 * custody, another fid, a malformed message. A message refused before any RPC call spends nothing;
 * one the registries refuse spends its nonce, so sending it again costs nothing more. The registry RPC
 * down is 503 `unavailable` and leaves the nonce usable: the same signed message verifies once the
 * registry answers again, once. A message signed for a start made before the fid's contest makes
 * no session after it. What a message costs the registry RPC, counted at a proxy: nothing until its
 * nonce is live and its ordinary signature recovers to its address, then the two registry reads; a
 * contract wallet's signature is 400 `unsupported` at no cost unless `FEDSOCIAL_CONTRACT_SIGNATURES`
 * allows it, and then its one `eth_call` carries `FEDSOCIAL_CONTRACT_SIGNATURE_GAS` (a factory that
 * loops forever is refused at once).
 */
import { Effect } from "effect"
import type { Address, Hex, LocalAccount } from "viem"
import { encodeAbiParameters, getAddress, numberToHex, serializeErc6492Signature } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { createSiweMessage } from "viem/siwe"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { idRegistryStandInAbi, keyRegistryStandInAbi } from "../../contracts/abi.js"
import {
  devnetAccount,
  devnetClients,
  FARCASTER_ID_REGISTRY,
  FARCASTER_KEY_REGISTRY
} from "../../contracts/deploy.js"
import { DEVNET_METRICS_TOKEN } from "../../layers/devnet.js"
import { newLoginSecret } from "../../src/client.js"
import { type ProxiedRequest, type RpcProxy, startRpcProxy } from "../chain/rpcProxy.js"
import { AttestorClient } from "./support/attestorClient.js"
import { VaultDevnet } from "./support/relayerDevnet.js"

let net: VaultDevnet
let attestor: AttestorClient
/** One with 1-second nonces. */
let shortLived: AttestorClient
/** One that reads the registries through `registry`, which a test can stop answering. */
let flaky: AttestorClient
let registry: RpcProxy
/** One that checks contract wallets' signatures, with a gas limit of `CONTRACT_GAS`, through `registry`. */
let contracts: AttestorClient
const CONTRACT_GAS = 500_000

/** Every request comes from loopback: one client address, whose unfinished starts pile up here. */
const common = {
  RATE_LIMIT_BURST: "1000",
  RATE_LIMIT_PER_MINUTE: "1000",
  OAUTH_STATES_PER_CLIENT: "1000",
  INDEXER_POLL_INTERVAL_MS: "200"
}

beforeAll(async () => {
  net = await VaultDevnet.start("attestor-fedsocial")
  attestor = await AttestorClient.start(net, common, { standIns: true })
  shortLived = await AttestorClient.start(
    net,
    { ...common, OAUTH_STATE_TTL_SECONDS: "1", DATA_DIR: `${net.chain.dir}/data/attestor-short` },
    { standIns: true }
  )
  registry = await startRpcProxy(net.rpcUrl)
  flaky = await AttestorClient.start(
    net,
    { ...common, FEDSOCIAL_RPC_URL: registry.url, DATA_DIR: `${net.chain.dir}/data/attestor-flaky` },
    { standIns: true }
  )
  contracts = await AttestorClient.start(
    net,
    {
      ...common,
      FEDSOCIAL_RPC_URL: registry.url,
      FEDSOCIAL_CONTRACT_SIGNATURES: "true",
      FEDSOCIAL_CONTRACT_SIGNATURE_GAS: String(CONTRACT_GAS),
      DATA_DIR: `${net.chain.dir}/data/attestor-contracts`
    },
    { standIns: true }
  )
}, 300_000)

afterAll(async () => {
  await attestor?.stop()
  await shortLived?.stop()
  await flaky?.stop()
  await contracts?.stop()
  await registry?.close()
  await net?.dispose()
})

const newOwner = (): Address => privateKeyToAccount(generatePrivateKey()).address

interface Started {
  readonly nonce: string
  readonly domain: string
  readonly uri: string
  readonly expirationTime: string
}

const start = async (on: AttestorClient, stealthOwner: Address): Promise<Started> => {
  const res = await on.post("/v1/oauth/fedsocial/start", { stealthOwner })
  expect(res.status).toBe(200)
  return (await res.json()) as Started
}

type Overrides = Partial<{ domain: string; nonce: string; uri: string; expirationTime: Date }>

/** A FIP-11 message from `address` for `fid` with the values of start (each overridable). */
const fip11 = (address: Address, fid: number, started: Started, overrides: Overrides = {}) =>
  createSiweMessage({
    domain: overrides.domain ?? started.domain,
    address,
    statement: "Farcaster Auth",
    uri: overrides.uri ?? started.uri,
    version: "1",
    chainId: 10,
    nonce: overrides.nonce ?? started.nonce,
    issuedAt: new Date(),
    expirationTime: overrides.expirationTime ?? new Date(started.expirationTime),
    resources: [`farcaster://fid/${fid}`]
  })

/** A FIP-11 message for `fid` with the values of start (each overridable), signed by `signer`. */
const signIn = async (signer: LocalAccount, fid: number, started: Started, overrides: Overrides = {}) => {
  const message = fip11(signer.address, fid, started, overrides)
  return { message, signature: (await signer.signMessage({ message })) as Hex }
}

const verify = (on: AttestorClient, body: unknown) => on.post("/v1/oauth/fedsocial/verify", body)

const expectRefusal = async (res: Response, status: number, code: string) => {
  expect(res.status).toBe(status)
  expect(await res.json()).toMatchObject({ code })
}

const okLogins = async (on: AttestorClient) => {
  const text = await Effect.runPromise(
    on.client.operator.metrics({ headers: { authorization: `Bearer ${DEVNET_METRICS_TOKEN}` } })
  )
  const line = text
    .split("\n")
    .find(
      (l) =>
        l.startsWith("attestor_logins_total{") &&
        l.includes('platform="fedsocial"') &&
        l.includes('outcome="ok"')
    )
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(" ") + 1))
}

const custody = (index: number) => devnetAccount(index)

describe("fedsocial sign-in on the devnet", () => {
  it("start gives the message's values; /v1/info lists fedsocial", async () => {
    const started = await start(attestor, newOwner())
    expect(started.nonce).toMatch(/^[A-Za-z0-9]{8,}$/)
    expect(started.domain).toBe("localhost:5173")
    expect(started.uri).toBe("http://localhost:5173/login")
    expect(Date.parse(started.expirationTime) - Date.now()).toBeGreaterThan(500_000)
    const info = await Effect.runPromise(attestor.client.info.info())
    expect(info.platforms).toContain("fedsocial")
  })

  it("account #5 signs for fid 1005: a session for 1005 bound to the stealth owner of start, its escrow listed, a bind signed", {
    timeout: 120_000
  }, async () => {
    const commitment = await attestor.commit("1005", "fedsocial")
    const { id } = await attestor.launchTo(commitment, "FID5")
    await attestor.indexed(await attestor.head())

    const stealthOwner = newOwner()
    const started = await start(attestor, stealthOwner)
    const res = await verify(attestor, await signIn(custody(5), 1005, started))
    expect(res.status).toBe(200)
    const session = (await res.json()) as {
      session: string
      platform: string
      userId: string
      stealthOwner: string
    }
    expect(session).toMatchObject({ platform: "fedsocial", userId: "1005", stealthOwner, ids: [] })

    const escrows = (await (await attestor.post("/v1/escrows", { session: session.session })).json()) as {
      escrows: Array<{ id: string }>
    }
    expect(escrows.escrows.map((e) => e.id)).toEqual([id])
    const binds = (await (await attestor.post("/v1/bind", { session: session.session })).json()) as {
      binds: Array<{ beneficiaryId: string; newOwner: string }>
    }
    expect(binds.binds).toEqual([expect.objectContaining({ beneficiaryId: id, newOwner: stealthOwner })])
  })

  it("an auth address the KeyRegistry lists for the fid signs in too", { timeout: 60_000 }, async () => {
    const authKey = privateKeyToAccount(generatePrivateKey())
    const admin = await devnetClients(net.rpcUrl, devnetAccount(0))
    const hash = await admin.walletClient.writeContract({
      address: FARCASTER_KEY_REGISTRY,
      abi: keyRegistryStandInAbi,
      functionName: "add",
      args: [1007n, encodeAbiParameters([{ type: "address" }], [authKey.address]), 2]
    })
    await admin.publicClient.waitForTransactionReceipt({ hash })
    const res = await verify(attestor, await signIn(authKey, 1007, await start(attestor, newOwner())))
    expect(res.status).toBe(200)
    expect(((await res.json()) as { userId: string }).userId).toBe("1007")
  })
})

describe("fedsocial refusals: 401 invalid_session and no session", () => {
  it("another domain", async () => {
    const before = await okLogins(attestor)
    const started = await start(attestor, newOwner())
    await expectRefusal(
      await verify(attestor, await signIn(custody(5), 1005, started, { domain: "elsewhere.example" })),
      401,
      "invalid_session"
    )
    expect(await okLogins(attestor)).toBe(before)
  })

  it("a nonce this attestor never issued", async () => {
    const started = await start(attestor, newOwner())
    await expectRefusal(
      await verify(attestor, await signIn(custody(5), 1005, started, { nonce: "neverIssued12345" })),
      401,
      "invalid_session"
    )
  })

  it("a reused nonce", async () => {
    const signed = await signIn(custody(5), 1005, await start(attestor, newOwner()))
    expect((await verify(attestor, signed)).status).toBe(200)
    await expectRefusal(await verify(attestor, signed), 401, "invalid_session")
  })

  it("one message verified twice at once: one session", async () => {
    const signed = await signIn(custody(5), 1005, await start(attestor, newOwner()))
    const before = await okLogins(attestor)
    const answers = await Promise.all([verify(attestor, signed), verify(attestor, signed)])
    expect(answers.map((res) => res.status).sort()).toEqual([200, 401])
    expect(await okLogins(attestor)).toBe(before + 1)
  })

  it("an expired message, and a nonce past its lifetime", { timeout: 20_000 }, async () => {
    const started = await start(attestor, newOwner())
    await expectRefusal(
      await verify(
        attestor,
        await signIn(custody(5), 1005, started, { expirationTime: new Date(Date.now() - 1_000) })
      ),
      401,
      "invalid_session"
    )
    const short = await start(shortLived, newOwner())
    const signed = await signIn(custody(5), 1005, short)
    await new Promise((resolve) => setTimeout(resolve, 2_100))
    await expectRefusal(await verify(shortLived, signed), 401, "invalid_session")
  })

  it("a signature its message's address did not make spends nothing; a message the registries refuse spends the nonce", async () => {
    const started = await start(attestor, newOwner())
    const message = fip11(custody(5).address, 1005, started)
    await expectRefusal(
      await verify(attestor, { message, signature: await custody(6).signMessage({ message }) }),
      401,
      "invalid_session"
    )
    // Presented at an OAuth callback, the nonce is no state of that platform's, and stays too.
    const callback = await fetch(
      `${attestor.url}/v1/oauth/microblog/callback?code=x&state=${started.nonce}`,
      { redirect: "manual" }
    )
    expect(callback.status).toBe(400)
    expect((await verify(attestor, await signIn(custody(5), 1005, started))).status).toBe(200)
    // Account #6 signs for fid 1005, which it does not hold: the registries say no, and the nonce
    // is gone, even for the message that holds.
    const next = await start(attestor, newOwner())
    await expectRefusal(await verify(attestor, await signIn(custody(6), 1005, next)), 401, "invalid_session")
    await expectRefusal(await verify(attestor, await signIn(custody(5), 1005, next)), 401, "invalid_session")
  })

  it("a message refused for itself (another expiry than start's) spends nothing", async () => {
    const started = await start(attestor, newOwner())
    const later = {
      ...started,
      expirationTime: new Date(Date.parse(started.expirationTime) - 1_000).toISOString()
    }
    await expectRefusal(await verify(attestor, await signIn(custody(5), 1005, later)), 401, "invalid_session")
    expect((await verify(attestor, await signIn(custody(5), 1005, started))).status).toBe(200)
  })

  it("a start's loginChallenge binds the session it makes", async () => {
    const { loginSecret, loginChallenge } = newLoginSecret()
    const res = await attestor.post("/v1/oauth/fedsocial/start", { stealthOwner: newOwner(), loginChallenge })
    expect(res.status).toBe(200)
    const started = (await res.json()) as Started
    const verified = await verify(attestor, await signIn(custody(5), 1005, started))
    expect(verified.status).toBe(200)
    const { session } = (await verified.json()) as { session: string }
    await expectRefusal(await attestor.post("/v1/escrows", { session }), 401, "invalid_session")
    await expectRefusal(
      await attestor.post("/v1/escrows", { session, loginSecret: newLoginSecret().loginSecret }),
      401,
      "invalid_session"
    )
    expect((await attestor.post("/v1/escrows", { session, loginSecret })).status).toBe(200)
  })

  it("a signer that is not the fid's custody, and a message naming another fid", async () => {
    await expectRefusal(
      await verify(attestor, await signIn(custody(6), 1005, await start(attestor, newOwner()))),
      401,
      "invalid_session"
    )
    await expectRefusal(
      await verify(attestor, await signIn(custody(5), 1006, await start(attestor, newOwner()))),
      401,
      "invalid_session"
    )
  })

  it("another uri, or another expiration time, than start gave", async () => {
    const started = await start(attestor, newOwner())
    await expectRefusal(
      await verify(attestor, await signIn(custody(5), 1005, started, { uri: "http://localhost:5173/other" })),
      401,
      "invalid_session"
    )
    // Still ahead, but later than the nonce lives (docs/protocol.md §10: exactly that time).
    const later = await start(attestor, newOwner())
    await expectRefusal(
      await verify(
        attestor,
        await signIn(custody(5), 1005, later, {
          expirationTime: new Date(Date.parse(later.expirationTime) + 3_600_000)
        })
      ),
      401,
      "invalid_session"
    )
  })

  it("a fid too long for a number: 401, not a server error", async () => {
    const signer = custody(5)
    const started = await start(attestor, newOwner())
    const message = fip11(signer.address, 1005, started).replace(
      "farcaster://fid/1005",
      `farcaster://fid/${"9".repeat(400)}`
    )
    await expectRefusal(
      await verify(attestor, { message, signature: await signer.signMessage({ message }) }),
      401,
      "invalid_session"
    )
    // Refused after the library was asked: the nonce is spent.
    await expectRefusal(await verify(attestor, await signIn(signer, 1005, started)), 401, "invalid_session")
  })

  it("a malformed message", async () => {
    const signer = custody(5)
    const message = "Sign in to something, please"
    await expectRefusal(
      await verify(attestor, { message, signature: await signer.signMessage({ message }) }),
      401,
      "invalid_session"
    )
  })
})

describe("the OAuth callback", () => {
  it("refuses a fedsocial nonce presented as an OAuth state, without spending it", async () => {
    const started = await start(attestor, newOwner())
    await expectRefusal(
      await fetch(`${attestor.url}/v1/oauth/fedsocial/callback?code=x&state=${started.nonce}`),
      400,
      "bad_request"
    )
    expect((await verify(attestor, await signIn(custody(5), 1005, started))).status).toBe(200)
  })
})

describe("the registry RPC down", () => {
  it("is 503 unavailable and spends nothing: the same signed message verifies once the registry answers again, once", {
    timeout: 30_000
  }, async () => {
    const stealthOwner = newOwner()
    const signed = await signIn(custody(5), 1005, await start(flaky, stealthOwner))
    registry.setRule(() => ({ kind: "destroy" }))
    try {
      await expectRefusal(await verify(flaky, signed), 503, "unavailable")
      await expectRefusal(await verify(flaky, signed), 503, "unavailable")
      // The registry was asked, and did not answer.
      expect(registry.count()).toBeGreaterThan(0)
    } finally {
      registry.reset()
    }
    const res = await verify(flaky, signed)
    expect(res.status).toBe(200)
    expect(await res.json()).toMatchObject({ platform: "fedsocial", userId: "1005", stealthOwner })
    // Still single use.
    await expectRefusal(await verify(flaky, signed), 401, "invalid_session")
  })
})

/** Every request `registry` gets while `run` runs, with its params. */
const seenBy = async (run: () => Promise<void>): Promise<ReadonlyArray<ProxiedRequest>> => {
  const seen: ProxiedRequest[] = []
  registry.setRule((request) => {
    seen.push(request)
    return { kind: "forward" }
  })
  try {
    await run()
  } finally {
    registry.reset()
  }
  return seen
}

/** `code` placed at a fresh address on the devnet chain (anvil_setCode). */
const placeCode = async (code: Hex): Promise<Address> => {
  const at = newOwner()
  await net.publicClient().request({ method: "anvil_setCode" as never, params: [at, code] as never })
  return at
}

/** Runtime code that loops forever: JUMPDEST PUSH0 JUMP. */
const LOOP = "0x5b5f56"
/** Runtime code that answers ERC-1271's magic value to any call: a wallet that accepts every signature. */
const ACCEPT_ALL = "0x631626ba7e60e01b5f5260205ff3"

/** A counterfactual wallet's ERC-6492 signature whose factory is code that loops forever. */
const loopingFactorySignature = async (): Promise<Hex> =>
  serializeErc6492Signature({
    address: await placeCode(LOOP),
    data: "0x12345678",
    signature: `0x${"11".repeat(65)}`
  })

describe("what a message costs the registry RPC (FEDSOCIAL_RPC_URL)", () => {
  it("a nonce this attestor never issued: refused before any RPC call", async () => {
    const signed = await signIn(custody(5), 1005, await start(flaky, newOwner()), {
      nonce: "neverIssued12345"
    })
    const seen = await seenBy(async () => {
      await expectRefusal(await verify(flaky, signed), 401, "invalid_session")
    })
    expect(seen.map((request) => request.method)).toEqual([])
  })

  it("nothing either for what the message shows by itself: another domain, uri or expiry, a signature that does not recover to its address", {
    timeout: 20_000
  }, async () => {
    const started = await start(flaky, newOwner())
    const refusals = [
      await signIn(custody(5), 1005, started, { domain: "elsewhere.example" }),
      await signIn(custody(5), 1005, started, { uri: "http://localhost:5173/other" }),
      await signIn(custody(5), 1005, started, {
        expirationTime: new Date(Date.parse(started.expirationTime) - 1_000)
      }),
      {
        message: fip11(custody(5).address, 1005, started),
        signature: await custody(6).signMessage({ message: fip11(custody(5).address, 1005, started) })
      }
    ]
    const seen = await seenBy(async () => {
      for (const body of refusals) await expectRefusal(await verify(flaky, body), 401, "invalid_session")
    })
    expect(seen.map((request) => request.method)).toEqual([])
    // The nonce is still live: the message that holds makes a session, with the two registry reads.
    const reads = await seenBy(async () => {
      expect((await verify(flaky, await signIn(custody(5), 1005, started))).status).toBe(200)
    })
    expect(reads.map((request) => request.method)).toEqual(["eth_call", "eth_call"])
    expect(reads.map((request) => getAddress((request.params as [{ to: Address }])[0].to)).sort()).toEqual(
      [getAddress(FARCASTER_ID_REGISTRY), getAddress(FARCASTER_KEY_REGISTRY)].sort()
    )
  })

  it("a message the registries refuse costs their two reads once: sent again and again, it costs nothing more", async () => {
    // A fresh key claims fid 1005: its signature recovers to its own address, so the registries
    // are asked, and say no.
    const body = await signIn(privateKeyToAccount(generatePrivateKey()), 1005, await start(flaky, newOwner()))
    const seen = await seenBy(async () => {
      for (let i = 0; i < 10; i++) await expectRefusal(await verify(flaky, body), 401, "invalid_session")
    })
    expect(seen.map((request) => request.method)).toEqual(["eth_call", "eth_call"])
  })

  it("a contract wallet's signature (ERC-6492, ERC-1271) is 400 unsupported by default, before any RPC call, and spends nothing", async () => {
    const started = await start(flaky, newOwner())
    const message = fip11(newOwner(), 1005, started)
    const signatures = [await loopingFactorySignature(), `0x${"ab".repeat(70)}`]
    const seen = await seenBy(async () => {
      for (const signature of signatures) {
        const res = await verify(flaky, { message, signature })
        expect({ status: res.status, body: await res.json() }).toEqual({
          status: 400,
          body: {
            code: "unsupported",
            error:
              "this attestor does not accept contract-wallet signatures (ERC-1271, ERC-6492): sign with the key of the fid's custody address or of one of its auth addresses"
          }
        })
      }
    })
    expect(seen.map((request) => request.method)).toEqual([])
    expect((await verify(flaky, await signIn(custody(5), 1005, started))).status).toBe(200)
  })

  it("allowed, a counterfactual wallet whose factory loops forever costs one eth_call with the gas limit: refused, its nonce spent", {
    timeout: 20_000
  }, async () => {
    const started = await start(contracts, newOwner())
    const body = { message: fip11(newOwner(), 1005, started), signature: await loopingFactorySignature() }
    const seen = await seenBy(async () => {
      await expectRefusal(await verify(contracts, body), 401, "invalid_session")
    })
    expect(seen.map((request) => request.method)).toEqual(["eth_call"])
    // viem's ERC-6492 validator, deployed by the call itself (no `to`), capped at the setting.
    const [callParams] = (seen[0]?.params ?? [{}]) as [{ to?: string; gas?: string }]
    expect(callParams.to).toBeUndefined()
    expect(callParams.gas).toBe(numberToHex(CONTRACT_GAS))
    // Sent again, it costs nothing: the nonce is spent.
    const again = await seenBy(async () => {
      await expectRefusal(await verify(contracts, body), 401, "invalid_session")
    })
    expect(again).toEqual([])
  })

  it("allowed, a deployed ERC-1271 wallet that holds a fid signs in; by default the same message is 400 unsupported", {
    timeout: 30_000
  }, async () => {
    const wallet = getAddress(await placeCode(ACCEPT_ALL))
    const admin = await devnetClients(net.rpcUrl, devnetAccount(0))
    const hash = await admin.walletClient.writeContract({
      address: FARCASTER_ID_REGISTRY,
      abi: idRegistryStandInAbi,
      functionName: "register",
      args: [wallet, 1100n]
    })
    await admin.publicClient.waitForTransactionReceipt({ hash })
    const signature = `0x${"cd".repeat(70)}`
    const stealthOwner = newOwner()
    const signed = { message: fip11(wallet, 1100, await start(contracts, stealthOwner)), signature }
    const res = await verify(contracts, signed)
    expect(res.status).toBe(200)
    expect(await res.json()).toMatchObject({ platform: "fedsocial", userId: "1100", stealthOwner })
    await expectRefusal(
      await verify(attestor, { message: fip11(wallet, 1100, await start(attestor, newOwner())), signature }),
      400,
      "unsupported"
    )
  })
})

describe("a contest of fid 1005", () => {
  it("a message the victim signed, through a relay, for an attacker's start made before the victim contests makes no session after it", {
    timeout: 60_000
  }, async () => {
    // The attacker's start, for its own key, and the victim's signature it obtained and kept.
    const kept = await signIn(custody(5), 1005, await start(attestor, newOwner()))
    // The victim signs in on its own, in a later second (a login counts as started before the
    // contest when it started in an earlier second), and contests its escrow.
    await new Promise((resolve) => setTimeout(resolve, 1_100))
    const own = await verify(attestor, await signIn(custody(5), 1005, await start(attestor, newOwner())))
    expect(own.status).toBe(200)
    const session = ((await own.json()) as { session: string }).session
    const escrows = (await (await attestor.post("/v1/escrows", { session })).json()) as {
      escrows: Array<{ id: string }>
    }
    // The escrow launched to fid 1005 above.
    expect(escrows.escrows).toHaveLength(1)
    const contested = await attestor.post("/v1/bind", {
      session,
      ids: [escrows.escrows[0]?.id],
      contest: true
    })
    expect({ status: contested.status, body: await contested.json() }).toEqual({
      status: 200,
      body: { binds: [] }
    })
    const okBefore = await okLogins(attestor)
    const res = await verify(attestor, kept)
    expect({ status: res.status, body: await res.json() }).toEqual({
      status: 401,
      body: {
        code: "invalid_session",
        error: "this login was started before the account's last contest: log in again"
      }
    })
    expect(await okLogins(attestor)).toBe(okBefore)
    // A sign-in started after the contest makes a session.
    const after = await verify(attestor, await signIn(custody(5), 1005, await start(attestor, newOwner())))
    expect(after.status).toBe(200)
  })
})
