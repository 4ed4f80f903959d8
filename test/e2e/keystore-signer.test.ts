/**
 * Keystore signers end to end (docs/operations.md "Keys"): the relayer process signs from an
 * encrypted keystore (`RELAYER_SIGNER=keystore`) and relays a claim that is mined on anvil; the
 * attestor process serves the keystore key's address; neither process's output, at debug level,
 * holds the private key or the passphrase. A wrong passphrase stops start-up with one line.
 */
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { encodeAbiParameters, type Hex, keccak256, zeroAddress } from "viem"
import { privateKeyToAddress } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  attestorEnv,
  devnetKeys,
  freeLoopbackPort,
  relayerEnv,
  writeDevnetFile
} from "../../layers/devnet.js"
import { encryptKeystore } from "../../src/keys/keystore.js"
import { type ServiceProcess, startService } from "../support/process.js"
import { E18, farDeadline, freshAddress, freshOwner, json, VaultDevnet } from "./support/relayerDevnet.js"

const PROCESS_TIMEOUT = 240_000
const PASSPHRASE = "keystore e2e passphrase, never logged"

const dir = mkdtempSync(join(tmpdir(), "keystore-signer-"))
let files = 0
const secretFile = (text: string): string => {
  const path = join(dir, `f${files++}`)
  writeFileSync(path, text)
  chmodSync(path, 0o600)
  return path
}
const keystoreOf = (key: Hex) =>
  secretFile(JSON.stringify(encryptKeystore(key, PASSPHRASE, { scryptN: 16_384 })))

let net: VaultDevnet
const running: Array<ServiceProcess> = []

beforeAll(async () => {
  net = await VaultDevnet.start("keystore-signer-e2e")
  // The services read the deployment file; their URLs in it are not used here.
  await Effect.runPromise(
    writeDevnetFile(net.chain, { relayerUrl: "http://127.0.0.1:1", attestorUrl: "http://127.0.0.1:1" })
  )
}, 180_000)
afterAll(async () => {
  for (const service of running) await service.stop()
  await net?.dispose()
}, 60_000)

/** Without the local key settings the devnet gives, so the keystore is the only key. */
const withoutLocalKey = (env: Record<string, string>, name: string) => {
  const { [name]: _, ...rest } = env
  return rest
}

/** What a process printed must not hold the key (in any case, with or without 0x) or the passphrase. */
const expectNoSecrets = (service: ServiceProcess, key: Hex) => {
  const output = `${service.stdout()}\n${service.stderr()}`.toLowerCase()
  expect(output).not.toContain(key.slice(2).toLowerCase())
  expect(output).not.toContain(PASSPHRASE.toLowerCase())
}

const until = async <A>(probe: () => Promise<A | undefined>, seconds = 60): Promise<A> => {
  const deadline = Date.now() + seconds * 1000
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error("condition not reached in time")
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

describe("keystore signers", () => {
  it("the relayer signs from a keystore: a claim is mined, and no output holds the key or passphrase", {
    timeout: PROCESS_TIMEOUT
  }, async () => {
    const port = await Effect.runPromise(freeLoopbackPort)
    const service = startService("relayer", {
      ...withoutLocalKey(relayerEnv(net.chain, port), "RELAYER_PRIVATE_KEY"),
      RELAYER_SIGNER: "keystore",
      RELAYER_KEYSTORE: keystoreOf(devnetKeys.relayer),
      RELAYER_KEYSTORE_PASSPHRASE_FILE: secretFile(`${PASSPHRASE}\n`),
      INDEXER_ENABLED: "false",
      TX_POLL_INTERVAL_MS: "100",
      LOG_LEVEL: "debug"
    })
    running.push(service)
    const base = await service.url()
    expect(service.stdout()).toContain(
      `RELAYER_SIGNER: keystore signer, address ${privateKeyToAddress(devnetKeys.relayer)}`
    )

    const owner = freshOwner()
    await net.registerOwner(owner)
    await net.deposit(owner.id, net.settlementAsset, 100n * E18)
    const quoted = await fetch(`${base}/v1/quote?asset=${net.settlementAsset}&adapter=${zeroAddress}`)
    expect(quoted.status).toBe(200)
    const relayerFee = BigInt(((await quoted.json()) as { relayerFee: string }).relayerFee)
    const adapterData = encodeAbiParameters([{ type: "address" }], [freshAddress()])
    const claim = {
      beneficiaryId: owner.id,
      asset: net.settlementAsset,
      amount: 10n * E18,
      adapter: zeroAddress,
      dataHash: keccak256(adapterData),
      relayer: net.relayerAddress,
      relayerFee,
      nonce: 0n,
      deadline: farDeadline()
    }
    const res = await fetch(`${base}/v1/claim`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: json({ claim, adapterData, signature: await net.sign(owner.signer, "Claim", claim) })
    })
    const answer = (await res.json()) as { txHash?: Hex }
    expect(res.status, json(answer)).toBe(200)
    const status = await until(async () => {
      const polled = await fetch(`${base}/v1/tx-status`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: json({ txHash: answer.txHash })
      })
      const body = (await polled.json()) as { status: string }
      return body.status === "pending" ? undefined : body.status
    })
    expect(status).toBe("success")
    // Mined on anvil, sent from the keystore's key.
    const receipt = await net.publicClient().getTransactionReceipt({ hash: answer.txHash! })
    expect(receipt.from.toLowerCase()).toBe(privateKeyToAddress(devnetKeys.relayer).toLowerCase())
    expect((await net.vaultAccount(owner.id)).nonce).toBe(1n)
    expect(await service.stop()).toBe(0)
    expectNoSecrets(service, devnetKeys.relayer)
  })

  it("the attestor serves its keystore key's address, and a wrong passphrase stops it in one line", {
    timeout: PROCESS_TIMEOUT
  }, async () => {
    const port = await Effect.runPromise(freeLoopbackPort)
    const keystore = keystoreOf(devnetKeys.attestor)
    const env = {
      ...withoutLocalKey(attestorEnv(net.chain, port), "ATTESTOR_PRIVATE_KEY"),
      ATTESTOR_SIGNER: "keystore",
      ATTESTOR_KEYSTORE: keystore,
      LOG_LEVEL: "debug"
    }
    const refused = startService("attestor", {
      ...env,
      ATTESTOR_KEYSTORE_PASSPHRASE_FILE: secretFile("a wrong passphrase\n")
    })
    running.push(refused)
    expect(await refused.exited).toBe(1)
    expect(refused.stderr().trim().split("\n")).toEqual([
      "attestor: invalid settings: ATTESTOR_KEYSTORE_PASSPHRASE_FILE: the passphrase does not open ATTESTOR_KEYSTORE"
    ])

    const service = startService("attestor", {
      ...env,
      ATTESTOR_KEYSTORE_PASSPHRASE_FILE: secretFile(PASSPHRASE)
    })
    running.push(service)
    const base = await service.url()
    const info = (await (await fetch(`${base}/v1/info`)).json()) as { attestor: string }
    expect(info.attestor).toBe(privateKeyToAddress(devnetKeys.attestor))
    expect(service.stdout()).toContain(`ATTESTOR_SIGNER: keystore signer, address ${info.attestor}`)
    expect(await service.stop()).toBe(0)
    expectNoSecrets(service, devnetKeys.attestor)
  })
})
