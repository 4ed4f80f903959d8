/**
 * One replica's send RPC hangs while it holds the hot key's lock (PostgreSQL only, when
 * DATABASE_URL is set): two relayer processes share one database and one chain; replica A
 * broadcasts through a server that accepts connections and never answers. Replica B keeps
 * serving: every claim posted to it is answered within the bound its settings give
 * (TX_LOCK_WAIT_MS and TX_RPC_TIMEOUT_MS, with room for a busy machine) and accepted. A's callers
 * get their hashes once the hold expired, and what A stored is sent by the monitor. Nothing is
 * sent twice: each claim is mined once, and the hot key's nonce moves by the number of claims.
 */

import type { AddressInfo } from "node:net"
import net from "node:net"
import { Effect } from "effect"
import { type Hex, zeroAddress } from "viem"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freeLoopbackPort, relayerEnv, writeDevnetFile } from "../../layers/devnet.js"
import { postgresSchema } from "../indexer/support/harness.js"
import { rpc } from "../relayer/txsender-support.js"
import { directClaimBody } from "../support/directClaim.js"
import { type ServiceProcess, startService } from "../support/process.js"
import { type ClaimAnswer, claimWithin } from "./support/claimWithin.js"
import { E18, freshAddress, freshOwner, VaultDevnet } from "./support/relayerDevnet.js"

const TIMEOUT = 360_000
const LOCK_WAIT_MS = 3_000
const HOLD_RPC_TIMEOUT_MS = 1_000
/** The longest a caller of the healthy replica may wait: its lock wait, and as much again for the rest. */
const BOUND_MS = 2 * (LOCK_WAIT_MS + HOLD_RPC_TIMEOUT_MS) + 4_000

let chain: VaultDevnet
const running: Array<ServiceProcess> = []
let hung: net.Server
const held = new Set<net.Socket>()

/** A send RPC that accepts every connection and never answers. */
const hangingServer = async (): Promise<string> => {
  hung = net.createServer((socket) => {
    held.add(socket)
    socket.on("error", () => {})
    socket.on("close", () => held.delete(socket))
  })
  await new Promise<void>((resolve) => hung.listen(0, "127.0.0.1", () => resolve()))
  return `http://127.0.0.1:${(hung.address() as AddressInfo).port}`
}

beforeAll(async () => {
  chain = await VaultDevnet.start("fleet-stall")
  // The deployment file the services read (their own URLs in it are not used here).
  await Effect.runPromise(
    writeDevnetFile(chain.chain, { relayerUrl: "http://127.0.0.1:1", attestorUrl: "http://127.0.0.1:1" })
  )
}, TIMEOUT)
afterAll(async () => {
  for (const service of running) await service.stop()
  for (const socket of held) socket.destroy()
  await new Promise<void>((resolve) => (hung === undefined ? resolve() : hung.close(() => resolve())))
  await chain?.dispose()
}, 60_000)

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const fundedOwner = async () => {
  const owner = freshOwner()
  await chain.registerOwner(owner)
  await chain.deposit(owner.id, chain.settlementAsset, 100n * E18)
  return owner
}

const minedNonce = async () =>
  Number(await rpc<Hex>(chain.rpcUrl, "eth_getTransactionCount", [chain.relayerAddress, "latest"]))

describe.skipIf(process.env.DATABASE_URL === undefined)("a replica whose send RPC hangs", () => {
  it("does not stall the other replica, and nothing is sent twice", { timeout: TIMEOUT }, async () => {
    const schema = await postgresSchema(process.env.DATABASE_URL as string)
    try {
      const sendRpcUrl = await hangingServer()
      const ports = [await Effect.runPromise(freeLoopbackPort), await Effect.runPromise(freeLoopbackPort)]
      const env = (port: number, extra: Record<string, string>) => ({
        ...relayerEnv(chain.chain, port),
        DATABASE_URL: schema.storage.kind === "postgresql" ? schema.storage.url : "",
        INDEXER_ENABLED: "false",
        TX_POLL_INTERVAL_MS: "200",
        TX_LOCK_WAIT_MS: String(LOCK_WAIT_MS),
        TX_RPC_TIMEOUT_MS: String(HOLD_RPC_TIMEOUT_MS),
        RATE_LIMIT_IP_BURST: "1000",
        RATE_LIMIT_IP_PER_MINUTE: "1000",
        ...extra
      })
      const hanging = startService("relayer", env(ports[0]!, { SEND_RPC_URL: sendRpcUrl }))
      const healthy = startService("relayer", env(ports[1]!, {}))
      running.push(hanging, healthy)
      const [hangingUrl, healthyUrl] = await Promise.all([hanging.url(), healthy.url()])

      const owners = []
      for (let i = 0; i < 8; i++) owners.push(await fundedOwner())
      const quote = await fetch(
        `${healthyUrl}/v1/quote?asset=${chain.settlementAsset}&adapter=${zeroAddress}`
      )
      const fee = BigInt(((await quote.json()) as { relayerFee: string }).relayerFee)
      const recipients = owners.map(() => freshAddress())
      const bodies = await Promise.all(
        owners.map((owner, i) =>
          directClaimBody({
            signer: owner.signer,
            chainId: chain.chain.deployment.chainId,
            vault: chain.vault,
            id: owner.id,
            asset: chain.settlementAsset,
            amount: 10n * E18,
            recipient: recipients[i]!,
            relayer: chain.relayerAddress,
            relayerFee: fee,
            nonce: 0n,
            deadline: BigInt(Math.floor(Date.now() / 1000) + 86_400)
          })
        )
      )
      const before = await minedNonce()

      // Two claims to the replica whose send RPC hangs: it takes the lock and broadcasts into
      // the void. Its callers may wait for its hold to expire, no longer than a minute.
      const toHanging = bodies.slice(0, 2).map((body) => claimWithin(hangingUrl, body, 60_000))
      await sleep(300)
      // Six to the healthy one, one every 300 ms, each given up after the bound.
      const toHealthy: Array<Promise<ClaimAnswer>> = []
      for (const body of bodies.slice(2)) {
        toHealthy.push(claimWithin(healthyUrl, body, BOUND_MS))
        await sleep(300)
      }
      const healthyAnswers = await Promise.all(toHealthy)
      const hangingAnswers = await Promise.all(toHanging)

      // The healthy replica answered each of its callers within the bound, and accepted each.
      expect(
        healthyAnswers.map((a) => a.status),
        JSON.stringify(healthyAnswers)
      ).toEqual(Array(6).fill(200))
      // The hanging replica's callers have their hashes: their claims are stored, sent by the
      // monitor.
      expect(
        hangingAnswers.map((a) => a.status),
        JSON.stringify(hangingAnswers)
      ).toEqual([200, 200])

      // Every claim is mined once: each account's vault nonce is 1, each recipient paid once.
      const deadline = Date.now() + 120_000
      for (let i = 0; i < owners.length; i++) {
        while ((await chain.vaultAccount(owners[i]!.id)).nonce !== 1n && Date.now() < deadline)
          await sleep(200)
        expect((await chain.vaultAccount(owners[i]!.id)).nonce).toBe(1n)
        expect(await chain.tokenBalance(chain.settlementAsset, recipients[i]!)).toBe(10n * E18 - fee)
      }
      // Eight claims, eight transactions of the hot key: none went out twice.
      while ((await minedNonce()) < before + 8 && Date.now() < deadline) await sleep(200)
      await sleep(1_000)
      expect(await minedNonce()).toBe(before + 8)

      // The hanging replica said what went unanswered, never where it was sent.
      const logs = `${hanging.stdout()}\n${hanging.stderr()}`
      expect(logs).toMatch(/went unanswered while holding the hot key's lock/)
      expect(logs).toMatch(/eth_sendRawTransaction/)
      expect(logs).not.toContain(sendRpcUrl.replace("http://", ""))
    } finally {
      for (const service of running.splice(0)) await service.stop()
      await schema.drop()
    }
  })
})
