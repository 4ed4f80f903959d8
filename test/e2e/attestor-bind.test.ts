/**
 * A messenger recipient binds an escrow on the devnet, end to end over HTTP: a creator takes a
 * commitment from the attestor and launches a token with a hint sealed to its hint key; the
 * recipient logs in with a widget payload signed with the devnet bot token and asks
 * `POST /v1/bind` for a BindOwner signature of the (unregistered) escrow; a devnet account then
 * registers the handle with the returned registration payload and sends `proposeBind` with exactly
 * the returned signature: the vault (whose only attestor, threshold 1, is this one) accepts it and
 * the account's pending owner is the session's stealth owner. Asked again, the attestor signs
 * nothing for the escrow: it has a pending bind.
 */
import { Effect, Exit, Layer, Logger, LogLevel, Schema, Scope } from "effect"
import { type Address, type Hex, zeroAddress } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { launchSampleToken } from "../../contracts/deploy.js"
import { AttestorLive } from "../../layers/attestor.js"
import {
  attestorEnv,
  DEVNET_MESSENGER_BOT_TOKEN,
  devnetKeys,
  freeLoopbackPort,
  withSettings,
  writeDevnetFile
} from "../../layers/devnet.js"
import { BindResponse, SessionResponse } from "../../schema/attestor.js"
import { computeId } from "../../schema/ids.js"
import { encodeBeneficiaryHint, sealHint } from "../../src/attestor/hints.js"
import { signWidgetPayload, widgetKey } from "../../src/attestor/messenger.js"
import { VaultDevnet } from "./support/relayerDevnet.js"

/** Mnemonic account that sends the vault transactions (free for tests, PROTOCOL.md §9). */
const SETUP = 3

interface WireBind {
  beneficiaryId: Hex
  newOwner: Address
  bindNonce: string
  deadline: string
  signature: Hex
  attestor: Address
  register: { kind: number; handleCommitment: Hex; fallbackRecipient: Address; fallbackDelay: string } | null
}

let net: VaultDevnet
let scope: Scope.CloseableScope
let base = ""

beforeAll(async () => {
  net = await VaultDevnet.start("attestor-bind")
  scope = await Effect.runPromise(Scope.make())
  base = await Effect.runPromise(
    Effect.gen(function* () {
      const port = yield* freeLoopbackPort
      yield* writeDevnetFile(net.chain, {
        relayerUrl: "http://127.0.0.1:1",
        attestorUrl: `http://127.0.0.1:${port}`
      })
      const env = {
        ...attestorEnv(net.chain, port),
        RATE_LIMIT_BURST: "1000",
        RATE_LIMIT_PER_MINUTE: "1000",
        INDEXER_POLL_INTERVAL_MS: "200"
      }
      yield* Layer.buildWithScope(
        withSettings(AttestorLive, env).pipe(Layer.provide(Logger.minimumLogLevel(LogLevel.Error))),
        scope
      )
      return `http://127.0.0.1:${port}`
    })
  )
}, 300_000)

afterAll(async () => {
  if (scope !== undefined) await Effect.runPromise(Scope.close(scope, Exit.void))
  await net?.dispose()
})

const post = (path: string, body: unknown) =>
  fetch(`${base}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body)
  })

/** Waits until the attestor's vault indexer and hint index both cover `block`. */
const indexed = async (block: number) => {
  for (let i = 0; i < 600; i++) {
    const health = (await (await fetch(`${base}/v1/health`)).json()) as {
      indexer?: { block?: number }
      hints?: { block?: number }
    }
    if ((health.indexer?.block ?? -1) >= block && (health.hints?.block ?? -1) >= block) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`the attestor did not index block ${block}`)
}

const head = async () => Number(await net.publicClient().getBlockNumber({ cacheTime: 0 }))

const bind = async (session: string): Promise<Array<WireBind>> => {
  const res = await post("/v1/bind", { session })
  expect(res.status).toBe(200)
  const body = (await res.json()) as { binds: Array<WireBind> }
  expect(() => Schema.decodeUnknownSync(BindResponse)(body)).not.toThrow()
  return body.binds
}

const USER = "7710001"

describe("a messenger recipient binds an escrow on the devnet", () => {
  it("the vault accepts proposeBind with the attestor's signature; asked again, it signs nothing", {
    timeout: 180_000
  }, async () => {
    // A creator's launch to the messenger user.
    const commitRes = await post("/v1/commitment", { platform: "messenger", userId: USER })
    expect(commitRes.status).toBe(200)
    const commitment = (await commitRes.json()) as {
      platformId: number
      userId: string
      nonce: Hex
      attestorSalt: Hex
      handleCommitment: Hex
    }
    const info = (await (await fetch(`${base}/v1/info`)).json()) as {
      hintPublicKey: Hex
      attestor: Address
      bindDeadlineSeconds: number
    }
    expect(info.attestor).toBe(privateKeyToAccount(devnetKeys.attestor).address)
    const id = computeId(2, commitment.handleCommitment, zeroAddress, 0n)
    const hint = sealHint(info.hintPublicKey, {
      platformId: commitment.platformId,
      userId: commitment.userId,
      nonce: commitment.nonce,
      attestorSalt: commitment.attestorSalt
    })
    await launchSampleToken(net.rpcUrl, net.chain.deployment, {
      beneficiaryId: id,
      beneficiaryHint: encodeBeneficiaryHint([hint]),
      symbol: "BND1"
    })
    await indexed(await head())

    // The recipient logs in with the widget, for a stealth owner chosen before.
    const stealthOwner = privateKeyToAccount(generatePrivateKey()).address
    const loginRes = await post("/v1/oauth/messenger/verify", {
      auth: signWidgetPayload(widgetKey(DEVNET_MESSENGER_BOT_TOKEN), {
        id: Number(USER),
        first_name: "Recipient",
        username: "bind_recipient",
        auth_date: Math.floor(Date.now() / 1000) - 1
      }),
      stealthOwner
    })
    expect(loginRes.status).toBe(200)
    const { session } = Schema.decodeUnknownSync(SessionResponse)(await loginRes.json())

    const binds = await bind(session)
    expect(binds).toHaveLength(1)
    const [signed] = binds as [WireBind]
    expect(signed).toMatchObject({
      beneficiaryId: id,
      newOwner: stealthOwner,
      bindNonce: "0",
      attestor: info.attestor,
      register: {
        kind: 2,
        handleCommitment: commitment.handleCommitment,
        fallbackRecipient: zeroAddress,
        fallbackDelay: "0"
      }
    })
    expect(BigInt(signed.deadline) % 600n).toBe(0n)

    // A devnet account registers the handle from the payload and proposes the bind with exactly
    // the returned signature.
    const register = signed.register as NonNullable<WireBind["register"]>
    await net.vaultWrite(SETUP, "registerHandle", [
      register.handleCommitment,
      register.fallbackRecipient,
      BigInt(register.fallbackDelay)
    ])
    await net.vaultWrite(SETUP, "proposeBind", [
      signed.beneficiaryId,
      signed.newOwner,
      BigInt(signed.deadline),
      [signed.signature]
    ])
    const account = await net.vaultAccount(id)
    expect(account.pendingOwner).toBe(stealthOwner)
    expect(account.bindNonce).toBe(1n)

    // The attestor's index sees the pending bind: nothing more to sign for this escrow.
    await indexed(await head())
    expect(await bind(session)).toEqual([])
  })
})
