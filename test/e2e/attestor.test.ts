/**
 * The attestor on the devnet, spoken to over HTTP as a creator's client does: `GET /v1/info`
 * names the devnet's chain, vault, attestor key (mnemonic #2, an attestor of the vault) and hint
 * key; `POST /v1/commitment` returns a commitment that, with a hint sealed to that hint key,
 * launches a token whose `TokenLaunched.beneficiaryId` is `computeId(2, handleCommitment, …)` and
 * whose hint the attestor's key opens back to the same id. Spoken to through the typed client
 * (`fee-vault-services/client`), as a wallet would.
 */
import { tmpdir } from "node:os"
import { join } from "node:path"
import { decrypt } from "eciesjs"
import { Effect, Exit, Layer, Logger, LogLevel, Scope } from "effect"
import {
  createPublicClient,
  decodeAbiParameters,
  type Hex,
  hexToBytes,
  http,
  parseEventLogs,
  zeroAddress
} from "viem"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { feeVaultAbi } from "../../contracts/abi.js"
import { devnetAccount, devnetRoles, launchSampleToken } from "../../contracts/deploy.js"
import { Attestor } from "../../layers/attestor.js"
import {
  attestorEnv,
  DEVNET_HINT_PRIVATE_KEY,
  DEVNET_PEPPER,
  type DevnetChain,
  devnetChain,
  freeLoopbackPort,
  withSettings,
  writeDevnetFile
} from "../../layers/devnet.js"
import type { CommitmentRequest } from "../../schema/attestor.js"
import { computeId, ZERO_ADDRESS } from "../../schema/ids.js"
import {
  encodeBeneficiaryHint,
  hintBeneficiaryId,
  hintPublicKeyOf,
  makeHint,
  sealHint
} from "../../src/attestor/hints/hintEnvelopes.js"
import { type AttestorClient, attestorFetchClient } from "../../src/client.js"

let scope: Scope.CloseableScope
let chain: DevnetChain
let attestor: AttestorClient

beforeAll(async () => {
  scope = await Effect.runPromise(Scope.make())
  const started = await Effect.runPromise(
    Effect.gen(function* () {
      const devnet = yield* devnetChain({ dir: join(tmpdir(), `attestor-e2e-${process.pid}`) })
      const port = yield* freeLoopbackPort
      // No relayer runs in this test: its URL in the deployment file is a placeholder nobody answers.
      yield* writeDevnetFile(devnet, {
        relayerUrl: "http://127.0.0.1:1",
        attestorUrl: `http://127.0.0.1:${port}`
      })
      yield* Layer.buildWithScope(
        withSettings(Attestor.layer, attestorEnv(devnet, port)).pipe(
          Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
        ),
        scope
      )
      return { devnet, url: `http://127.0.0.1:${port}` }
    }).pipe(Scope.extend(scope))
  )
  chain = started.devnet
  attestor = await Effect.runPromise(attestorFetchClient(started.url))
}, 300_000)

afterAll(async () => {
  if (scope !== undefined) await Effect.runPromise(Scope.close(scope, Exit.void))
})

const run = <A, E>(call: Effect.Effect<A, E>) => Effect.runPromise(call)

const commit = (payload: CommitmentRequest) => run(attestor.commitments.commitment({ payload, headers: {} }))

describe("attestor on the devnet", () => {
  it("indexes the vault and its hints: /v1/health reports both up to the head", {
    timeout: 60_000
  }, async () => {
    const head = Number(
      await createPublicClient({ transport: http(chain.anvil.rpcUrl) }).getBlockNumber({ cacheTime: 0 })
    )
    let health = await run(attestor.operator.health())
    for (let i = 0; i < 300; i++) {
      health = await run(attestor.operator.health())
      if ((health.hints?.block ?? -1) >= head) break
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    expect(health.ok).toBe(true)
    expect(health.indexer).toMatchObject({ state: "following" })
    expect(health.indexer?.block).toBeGreaterThanOrEqual(head)
    // The devnet's sample launch is among the blocks the hint index covers.
    expect(health.hints).toMatchObject({ state: "ready" })
    expect(health.hints?.block).toBeGreaterThanOrEqual(head)
  })

  it("GET /v1/info names the devnet's chain, vault, attestor and hint key", async () => {
    const info = await run(attestor.info.info())
    expect(info).toEqual({
      chainId: 31337,
      vault: chain.deployment.vault,
      attestor: devnetAccount(devnetRoles.attestor).address,
      hintPublicKey: hintPublicKeyOf(DEVNET_HINT_PRIVATE_KEY),
      platforms: ["messenger"],
      bindDeadlineSeconds: 3600,
      handleLookup: { mode: "off", platforms: [], price: null }
    })
    expect(info.hintPublicKey).toBe(chain.hintPublicKey)
    const client = createPublicClient({ transport: http(chain.anvil.rpcUrl) })
    const isAttestor = await client.readContract({
      address: chain.deployment.vault,
      abi: feeVaultAbi,
      functionName: "isAttestor",
      args: [info.attestor]
    })
    expect(isAttestor).toBe(true)
  })

  it("POST /v1/commitment: a creator launches with the commitment and a hint, and the id matches", async () => {
    const info = await run(attestor.info.info())
    const userId = "2000002"
    const commitment = await commit({ platform: "microblog", userId })
    expect(commitment).toMatchObject({
      platform: "microblog",
      platformId: 1,
      userId,
      kind: 2,
      attestor: info.attestor
    })

    // The hint the creator builds from the response: the devnet pepper gives the same salt.
    const hint = makeHint(Buffer.from(DEVNET_PEPPER.slice(2), "hex"), 1, userId, commitment.nonce)
    expect(hint.attestorSalt).toBe(commitment.attestorSalt)
    const beneficiaryId = computeId(2, commitment.handleCommitment, ZERO_ADDRESS, 0n)
    expect(hintBeneficiaryId(hint)).toBe(beneficiaryId)

    const launched = await launchSampleToken(chain.anvil.rpcUrl, chain.deployment, {
      beneficiaryId,
      beneficiaryHint: encodeBeneficiaryHint([sealHint(info.hintPublicKey, hint)]),
      symbol: "CMT"
    })
    const client = createPublicClient({ transport: http(chain.anvil.rpcUrl) })
    const receipt = await client.getTransactionReceipt({ hash: launched.txHash })
    const [event] = parseEventLogs({ abi: feeVaultAbi, eventName: "TokenLaunched", logs: receipt.logs })
    expect(event?.args.beneficiaryId).toBe(beneficiaryId)

    // The attestor's hint key opens the envelope back to the same commitment and id.
    const [envelopes] = decodeAbiParameters([{ type: "bytes[]" }], event?.args.beneficiaryHint ?? "0x")
    expect(envelopes).toHaveLength(1)
    const opened = JSON.parse(
      new TextDecoder().decode(decrypt(hexToBytes(DEVNET_HINT_PRIVATE_KEY), hexToBytes(envelopes[0] as Hex)))
    )
    expect(opened).toEqual({
      platformId: 1,
      userId,
      nonce: commitment.nonce,
      attestorSalt: commitment.attestorSalt
    })
    expect(hintBeneficiaryId(opened)).toBe(beneficiaryId)
  })

  it("a commitment with a fallback gives the id computeId(2, handleCommitment, recipient, delay)", async () => {
    const commitment = await commit({ platform: "community", handle: "80351110224678912" })
    const recipient = devnetAccount(devnetRoles.firstFree).address
    const hint = makeHint(
      Buffer.from(DEVNET_PEPPER.slice(2), "hex"),
      commitment.platformId,
      commitment.userId,
      commitment.nonce,
      { recipient, delay: 86_400n }
    )
    expect(hintBeneficiaryId(hint)).toBe(computeId(2, commitment.handleCommitment, recipient, 86_400n))
    expect(hintBeneficiaryId(hint)).not.toBe(computeId(2, commitment.handleCommitment, zeroAddress, 0n))
  })

  it("refuses a handle lookup with 400 unsupported: handle lookups are off", async () => {
    const refused = await run(
      Effect.flip(
        attestor.commitments.commitment({ payload: { platform: "codehost", handle: "octocat" }, headers: {} })
      )
    )
    expect(refused._tag).toBe("Unsupported")
  })
})
