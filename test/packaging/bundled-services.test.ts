/**
 * The services as `npm run build` bundles them (scripts/bundle.ts) and operators run them, under
 * plain node on a devnet: the bundled relayer relays a registering claim that the vault executes,
 * and the bundled attestor answers a commitment that recomputes as docs/protocol.md §2 says. The
 * container check (container-build.test.ts) only asks the bundles for their health; this is the
 * request path of each, so a dependency that stops working once bundled fails here.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Exit, Schema, Scope } from "effect"
import { type Hex, keccak256, toHex, zeroAddress } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { feeVaultAbi, testTokenAbi } from "../../contracts/abi.js"
import { devnetAccount, devnetClients } from "../../contracts/deploy.js"
import {
  attestorEnv,
  DEVNET_PEPPER,
  type DevnetChain,
  devnetChain,
  devnetKeys,
  freeLoopbackPort,
  relayerEnv,
  writeDevnetFile
} from "../../layers/devnet.js"
import { CommitmentResponse } from "../../schema/attestor.js"
import { attestorSalt, computeId, handleCommitment, ownerCommitment, userIdHash } from "../../schema/ids.js"
import { bundle, SERVICE_ENTRY_POINTS } from "../../scripts/bundle.js"
import { directClaimBody } from "../support/directClaim.js"
import { repoRoot, type ServiceProcess, startService } from "../support/process.js"

// Bundling, a devnet with the reference contracts and two services starting: a minute on a busy machine.
const SETUP_TIMEOUT = 180_000
const TEST_TIMEOUT = 60_000

// Under the project's node_modules, so the bundles find the dependencies they leave to it.
const outdir = mkdtempSync(join(repoRoot, "node_modules", ".bundled-services-test-"))
const scope = Effect.runSync(Scope.make())
const services: ServiceProcess[] = []
/** Removed at the end: the bundles and the services' data directories. */
const scratch: string[] = [outdir]
let chain: DevnetChain
let relayerUrl: string
let attestorUrl: string

beforeAll(async () => {
  await bundle(SERVICE_ENTRY_POINTS, outdir)
  const chainDir = join(tmpdir(), `bundled-services-${process.pid}`)
  scratch.push(chainDir)
  chain = await Effect.runPromise(Scope.extend(devnetChain({ dir: chainDir }), scope))
  const relayerPort = await Effect.runPromise(freeLoopbackPort)
  const attestorPort = await Effect.runPromise(freeLoopbackPort)
  await Effect.runPromise(
    writeDevnetFile(chain, {
      relayerUrl: `http://127.0.0.1:${relayerPort}`,
      attestorUrl: `http://127.0.0.1:${attestorPort}`
    })
  )
  // Each on an embedded database of its own, created by the bundle's cluster creator.
  const dataDir = (name: string) => {
    const dir = mkdtempSync(join(tmpdir(), `bundled-${name}-`))
    scratch.push(dir)
    return dir
  }
  // Started as the image starts them: the services' node flags and allocator setting, plain node.
  const start = (name: "relayer" | "attestor", env: Record<string, string>) => {
    const service = startService(name, env, { bundle: join(outdir, `${name}.js`) })
    services.push(service)
    return service.url()
  }
  ;[relayerUrl, attestorUrl] = await Promise.all([
    start("relayer", { ...relayerEnv(chain, relayerPort), DATA_DIR: dataDir("relayer") }),
    start("attestor", { ...attestorEnv(chain, attestorPort), DATA_DIR: dataDir("attestor") })
  ])
}, SETUP_TIMEOUT)

afterAll(async () => {
  await Promise.all(services.map((service) => service.stop()))
  await Effect.runPromise(Scope.close(scope, Exit.void))
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true })
})

describe("the bundled services", () => {
  it("relay a registering claim that the vault executes", { timeout: TEST_TIMEOUT }, async () => {
    const { vault, settlementAsset: usdt, chainId } = chain.deployment
    const owner = privateKeyToAccount(generatePrivateKey())
    const salt = keccak256(toHex(owner.address))
    const id = computeId(1, ownerCommitment(owner.address, salt), zeroAddress, 0n)
    const recipient = privateKeyToAccount(generatePrivateKey()).address
    const amount = 10n * 10n ** 18n
    const admin = devnetAccount(0)
    const { publicClient, walletClient } = await devnetClients(chain.anvil.rpcUrl, admin)
    for (const request of [
      { address: usdt, abi: testTokenAbi, functionName: "mint", args: [admin.address, amount] },
      { address: usdt, abi: testTokenAbi, functionName: "approve", args: [vault, amount] },
      { address: vault, abi: feeVaultAbi, functionName: "deposit", args: [id, usdt, amount] }
    ])
      await publicClient.waitForTransactionReceipt({
        hash: await walletClient.writeContract(request as never)
      })

    const quote = (await (
      await fetch(`${relayerUrl}/v1/quote?asset=${usdt}&adapter=${zeroAddress}&register=1`)
    ).json()) as { relayerFee: string }
    const relayerFee = BigInt(quote.relayerFee)
    const body = await directClaimBody({
      signer: owner,
      chainId,
      vault,
      id,
      asset: usdt,
      amount,
      recipient,
      relayer: privateKeyToAccount(devnetKeys.relayer).address,
      relayerFee,
      nonce: 0n,
      deadline: BigInt(Math.floor(Date.now() / 1000) + 3600),
      register: { kind: 1, owner: owner.address, salt, fallbackRecipient: zeroAddress, fallbackDelay: 0n }
    })
    const res = await fetch(`${relayerUrl}/v1/claim`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body
    })
    const answer = (await res.json()) as { txHash?: Hex }
    expect(res.status, JSON.stringify(answer)).toBe(200)
    const receipt = await publicClient.waitForTransactionReceipt({ hash: answer.txHash! })
    expect(receipt.status).toBe("success")
    const balance = (hexAddress: Hex) =>
      publicClient.readContract({
        address: usdt,
        abi: testTokenAbi,
        functionName: "balanceOf",
        args: [hexAddress]
      }) as Promise<bigint>
    expect(await balance(recipient)).toBe(amount - relayerFee)
  })

  it("answer a commitment that recomputes from the pepper", { timeout: TEST_TIMEOUT }, async () => {
    const userId = "7012345678"
    const res = await fetch(`${attestorUrl}/v1/commitment`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ platform: "messenger", userId })
    })
    expect(res.status).toBe(200)
    // The wire shape too: the protocol's response schema, not a cast.
    const body = Schema.decodeUnknownSync(CommitmentResponse)(await res.json())
    const salt = attestorSalt(Buffer.from(DEVNET_PEPPER.slice(2), "hex"), body.platformId, userId)
    expect(body.userIdHash).toBe(userIdHash(userId))
    expect(body.attestorSalt).toBe(salt)
    expect(body.handleCommitment).toBe(
      handleCommitment(body.platformId, userIdHash(userId), salt, body.nonce)
    )
    expect(body.attestor).toBe(privateKeyToAccount(devnetKeys.attestor).address)
  })
})
