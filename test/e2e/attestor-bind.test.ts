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
import { Effect, Schema } from "effect"
import { type Address, type Hex, zeroAddress } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { devnetKeys } from "../../layers/devnet.js"
import { BindResponse } from "../../schema/attestor.js"
import { AttestorClient } from "./support/attestorClient.js"
import { VaultDevnet } from "./support/relayerDevnet.js"

/** Mnemonic account that sends the vault transactions (free for tests, docs/protocol.md §9). */
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
let attestor: AttestorClient

beforeAll(async () => {
  net = await VaultDevnet.start("attestor-bind")
  attestor = await AttestorClient.start(net)
}, 300_000)

afterAll(async () => {
  await attestor?.stop()
  await net?.dispose()
})

const bind = async (session: string): Promise<Array<WireBind>> => {
  const res = await attestor.post("/v1/bind", { session })
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
    const commitment = await attestor.commit(USER)
    const info = await Effect.runPromise(attestor.client.info.info())
    expect(info.attestor).toBe(privateKeyToAccount(devnetKeys.attestor).address)
    const { id } = await attestor.launchTo(commitment, "BND1")
    await attestor.indexed(await attestor.head())

    // The recipient logs in with the widget, for a stealth owner chosen before.
    const stealthOwner = privateKeyToAccount(generatePrivateKey()).address
    const session = await attestor.login(USER, stealthOwner)

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
    await attestor.indexed(await attestor.head())
    expect(await bind(session)).toEqual([])
  })
})
