/**
 * The devnet wallet page with a committee (docs/getting-started.md "The wallet page",
 * docs/attestor.md "The committee"), in Debian's Chromium driven by playwright-core: a 3-member
 * devnet at threshold 2 in this process, member 3 stopped. A messenger login at every member logs
 * in at the two that are up and shows the third down; the bind is proposed with the two signatures
 * and is pending on chain for the page's key. A codehost login (POST or deprecated GET start)
 * goes through member 1's consent page, then member 2's (each member its own app), and finds
 * member 3 down. With member 2 down as well, the page shows each member's reason and proposes nothing. A bind of the user's escrow to
 * someone else's key, made with the user's own logins (the devnet's widget is public), is a
 * warning on the page whose "Contest" contests at both members up, and a member's veto ends the
 * pending bind on chain.
 *
 * No browser is a failure, never a skip: `.ci/run` installs Debian's `chromium`.
 */
import { existsSync, readFileSync } from "node:fs"
import { mkdir } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, ManagedRuntime, Schema } from "effect"
import { type Browser, chromium, type Page } from "playwright-core"
import { createPublicClient, type Hex, http, zeroAddress } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { feeVaultAbi } from "../../contracts/abi.js"
import { launchSampleToken } from "../../contracts/deploy.js"
import {
  DEVNET_MESSENGER_BOT_TOKEN,
  Devnet,
  devnetMember,
  freeLoopbackPort,
  type RunningDevnet,
  type RunningMember
} from "../../layers/devnet.js"
import type { SessionToken } from "../../schema/attestor.js"
import { computeId } from "../../schema/ids.js"
import { Address, Bytes32 } from "../../schema/primitives.js"
import { ProposeBindRequest } from "../../schema/relayer.js"
import { encodeBeneficiaryHint, sealHint } from "../../src/attestor/hints/hintEnvelopes.js"
import { signWidgetPayload, widgetKey } from "../../src/attestor/logins/messenger/messengerWidget.js"
import {
  collectBindSignatures,
  committeeDeadline,
  committeeOf,
  type MemberSession,
  proposeBindRequestOf
} from "../../src/client.js"
import { startWalletPage, type WalletPage } from "../../src/devnet/walletPage.js"

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"
const SCREENSHOTS = join(import.meta.dirname, "__screenshots__")

let runtime: ManagedRuntime.ManagedRuntime<Devnet, unknown>
let devnet: RunningDevnet
let members: ReadonlyArray<RunningMember>
let wallet: WalletPage
let browser: Browser
let users = 4_000_000 + (process.pid % 1000) * 100

beforeAll(async () => {
  if (!existsSync(CHROMIUM))
    throw new Error(
      `no browser at ${CHROMIUM}: install Debian's chromium (apt-get install -y chromium), as .ci/run does`
    )
  await mkdir(SCREENSHOTS, { recursive: true })
  const port = await Effect.runPromise(freeLoopbackPort)
  const origin = `http://localhost:${port}`
  runtime = ManagedRuntime.make(
    Devnet.layer({
      dir: join(tmpdir(), `wallet-committee-${process.pid}`),
      attestors: 3,
      threshold: 2,
      walletOrigin: origin
    })
  )
  devnet = await runtime.runPromise(Devnet)
  members = devnet.running ?? []
  // Member 3 is down for the whole file: its URL stays in the page's committee, nothing answers there.
  await runtime.runPromise(members[2]!.stop)
  wallet = await startWalletPage({
    port,
    attestors: members.map(({ url, address, hintPublicKey }) => ({ url, address, hintPublicKey })),
    threshold: devnet.attestorThreshold,
    relayerUrl: devnet.relayerUrl,
    rpcUrl: devnet.anvil.rpcUrl,
    messengerBotToken: DEVNET_MESSENGER_BOT_TOKEN
  })
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync"
    ]
  })
}, 300_000)

afterAll(async () => {
  await browser?.close()
  await wallet?.close()
  await runtime?.dispose()
})

const chain = () => createPublicClient({ transport: http(devnet.anvil.rpcUrl) })

/** Waits until the member's vault indexer and hint index both cover `block`. */
const indexed = async (url: string, block: bigint) => {
  for (let i = 0; i < 600; i++) {
    const health = (await (await fetch(`${url}/v1/health`)).json()) as {
      indexer?: { block: number }
      hints?: { block: number }
    }
    if ((health.indexer?.block ?? -1) >= block && (health.hints?.block ?? -1) >= block) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`${url} did not index block ${block}`)
}

/** A launch to `platform` (messenger by default) user `userId`, its hint sealed to every member, indexed by the members up. */
const launched = async (
  userId: string,
  symbol: string,
  up: ReadonlyArray<RunningMember>,
  platform = "messenger"
): Promise<Hex> => {
  const answer = await fetch(`${members[0]!.url}/v1/commitment`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ platform, userId })
  })
  const { platformId, nonce, attestorSalt, handleCommitment } = (await answer.json()) as {
    platformId: number
    nonce: Hex
    attestorSalt: Hex
    handleCommitment: Hex
  }
  const id = computeId(2, handleCommitment, zeroAddress, 0n)
  const hint = { platformId, userId, nonce, attestorSalt }
  const { blockNumber } = await launchSampleToken(devnet.anvil.rpcUrl, devnet.deployment, {
    beneficiaryId: id,
    beneficiaryHint: encodeBeneficiaryHint(members.map((m) => sealHint(m.hintPublicKey, hint))),
    symbol
  })
  for (const member of up) await indexed(member.url, blockNumber)
  return id
}

const pendingOwner = async (id: Hex) => {
  const [, , , , , pending] = await chain().readContract({
    address: devnet.deployment.vault,
    abi: feeVaultAbi,
    functionName: "accountOf",
    args: [id]
  })
  return pending
}

/** Member `k`'s state cell once it shows `state`. */
const memberState = async (page: Page, k: number, state: string) => {
  const cell = page.locator(`tr[data-member="${k}"] .member-state[data-state="${state}"]`)
  await cell.waitFor()
  return (await cell.textContent()) ?? ""
}

/** The page, logged in with messenger as `user` at every member it reaches. */
const loggedIn = async (user: string, id: Hex) => {
  const context = await browser.newContext({ viewport: { width: 1100, height: 900 } })
  const page = await context.newPage()
  const requests: Array<string> = []
  page.on("request", (request) => requests.push(`${request.method()} ${request.url()}`))
  await page.goto(`${wallet.url}/`)
  await page.locator("#threshold", { hasText: "2 of these 3" }).waitFor()
  await page.fill("#messenger-user", user)
  await page.click("#messenger-login")
  await page.locator(`tr[data-escrow="${id}"]`).waitFor()
  return { context, page, requests, owner: (await page.locator("#stealth-owner").textContent()) ?? "" }
}

describe("the devnet wallet page with a 3-member committee at threshold 2, member 3 down", () => {
  it("logs in at the two members up, shows the third down, proposes with two signatures", {
    timeout: 120_000
  }, async () => {
    const user = String(++users)
    const id = await launched(user, "WCM2", members.slice(0, 2))
    const { context, page, requests, owner } = await loggedIn(user, id)
    await memberState(page, 1, "logged-in")
    await memberState(page, 2, "logged-in")
    await expect(memberState(page, 3, "down")).resolves.toBe("down (no answer)")
    await expect(page.locator("#status").textContent()).resolves.toContain("at 2 of 3 attestors")
    await page.locator(`tr[data-escrow="${id}"] button.bind`).click()
    await page.locator("#status", { hasText: /^Bind proposed/ }).waitFor({ timeout: 60_000 })
    await memberState(page, 1, "signed")
    await memberState(page, 2, "signed")
    await memberState(page, 3, "down")
    expect(await page.locator("#refusal").isHidden()).toBe(true)
    await expect(page.locator(`tr[data-escrow="${id}"] .pending-owner`).textContent()).resolves.toContain(
      "(this page's key)"
    )
    await page.screenshot({ path: join(SCREENSHOTS, "wallet-committee.png"), fullPage: true })
    // On chain: pending for the page's key, proposed once.
    expect((await pendingOwner(id)).toLowerCase()).toBe(owner.toLowerCase())
    expect(requests.filter((r) => r.startsWith(`POST ${devnet.relayerUrl}/v1/propose-bind`))).toHaveLength(1)
    await context.close()
  })

  it.each([
    ["POST", false],
    ["deprecated GET", true]
  ])(
    "codehost (%s start): the consent page of member 1, then of member 2, member 3 down",
    {
      timeout: 120_000
    },
    async (_, legacy) => {
      const user = String(++users)
      const id = await launched(user, "WCMO", members.slice(0, 2), "codehost")
      const context = await browser.newContext({ viewport: { width: 1100, height: 900 } })
      const page = await context.newPage()
      await page.goto(`${wallet.url}/`)
      await page.locator("[data-login=codehost]").waitFor()
      if (legacy) await page.check("#legacy-start")
      await page.click("[data-login=codehost]")
      // Each member has its own app at the provider: one consent per member, member after member.
      for (const k of [1, 2]) {
        await page.waitForURL(
          (url) => url.searchParams.get("client_id") === devnetMember(k).oauthApps.codehost.clientId
        )
        await page.fill("#devnet_user", user)
        await page.click("#authorize")
      }
      await page.locator(`tr[data-escrow="${id}"]`).waitFor()
      expect(page.url()).toBe(`${wallet.url}/after-login`)
      await memberState(page, 1, "logged-in")
      await memberState(page, 2, "logged-in")
      await memberState(page, 3, "down")
      await expect(page.locator("#status").textContent()).resolves.toBe(
        "Logged in with codehost at 2 of 3 attestors."
      )
      expect(await page.locator("#refusal").isHidden()).toBe(true)
      await context.close()
    }
  )

  it("with member 2 down too: each member's reason, nothing proposed", { timeout: 120_000 }, async () => {
    const user = String(++users)
    const id = await launched(user, "WCM1", members.slice(0, 2))
    const { context, page, requests } = await loggedIn(user, id)
    await memberState(page, 2, "logged-in")
    await runtime.runPromise(members[1]!.stop)
    try {
      await page.locator(`tr[data-escrow="${id}"] button.bind`).click()
      const refusal = page.locator("#refusal")
      await refusal.waitFor()
      const text = (await refusal.textContent()) ?? ""
      expect(text).toContain("1 of 2 attestor signatures needed")
      expect(text).toContain(`${members[1]!.url} (${members[1]!.address}) down`)
      expect(text).toContain(`${members[2]!.url} (${members[2]!.address}) not asked`)
      expect(text).toContain("Nothing was proposed.")
      await memberState(page, 1, "signed")
      await expect(memberState(page, 2, "down")).resolves.toBe("down (no answer)")
      await memberState(page, 3, "down")
      await page.screenshot({ path: join(SCREENSHOTS, "wallet-committee-short.png"), fullPage: true })
      expect(requests.filter((r) => r.includes("/v1/propose-bind"))).toEqual([])
      expect(await pendingOwner(id)).toBe(zeroAddress)
    } finally {
      await runtime.runPromise(members[1]!.start)
      await context.close()
    }
  })

  it("a pending bind to another key: a warning, contested at both members up, vetoed", {
    timeout: 120_000
  }, async () => {
    const user = String(++users)
    const id = await launched(user, "WCMC", members.slice(0, 2))
    // Someone else binds the user's escrow to their own key at members 1 and 2.
    const other = privateKeyToAccount(generatePrivateKey()).address
    await proposeBindTo(user, id, other)
    expect((await pendingOwner(id)).toLowerCase()).toBe(other.toLowerCase())
    const { context, page } = await loggedIn(user, id)
    const row = page.locator(`tr[data-escrow="${id}"]`)
    await expect(row.locator(".warning").textContent()).resolves.toMatch(
      /^A bind to another key is pending \(final in .+\)\. Not yours\? Contest it\.$/
    )
    expect(await row.locator("button.bind").count()).toBe(0)
    await page.screenshot({ path: join(SCREENSHOTS, "wallet-committee-contest.png"), fullPage: true })
    await row.locator("button.contest").click()
    await page.locator("#status", { hasText: /^Contested at 2 of 3 attestors/ }).waitFor()
    await memberState(page, 1, "contested")
    await memberState(page, 2, "contested")
    await memberState(page, 3, "down")
    // A member's veto (AUTO_VETO) ends the pending bind.
    await until(async () => (await pendingOwner(id)) === zeroAddress, "the contested bind was not vetoed")
    await context.close()
  })
})

/** Waits for `done`, polling the chain; fails with `message` after a minute. */
const until = async (done: () => Promise<boolean>, message: string) => {
  for (let i = 0; i < 300; i++) {
    if (await done()) return
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  throw new Error(message)
}

/** Logs `userId` in at members 1 and 2 for `owner`, collects their signatures, and proposes the bind. */
const proposeBindTo = async (userId: string, id: Hex, owner: `0x${string}`) => {
  const sessions: Array<MemberSession | undefined> = []
  for (const member of members.slice(0, 2)) {
    const auth = signWidgetPayload(widgetKey(DEVNET_MESSENGER_BOT_TOKEN), {
      id: Number(userId),
      first_name: "Other",
      username: `other${userId}`,
      auth_date: Math.floor(Date.now() / 1000)
    })
    const answer = await fetch(`${member.url}/v1/oauth/messenger/verify`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ auth, stealthOwner: owner })
    })
    expect(answer.status).toBe(200)
    sessions.push({ session: ((await answer.json()) as { session: SessionToken }).session })
  }
  sessions.push(undefined)
  const { bindDeadlineSeconds } = (await (await fetch(`${members[0]!.url}/v1/info`)).json()) as {
    bindDeadlineSeconds: number
  }
  const vault = devnet.deployment.vault
  const collected = await Effect.runPromise(
    Effect.gen(function* () {
      const committee = yield* committeeOf(JSON.parse(readFileSync(devnet.deploymentFile, "utf8")))
      const deadline = yield* committeeDeadline([bindDeadlineSeconds], Math.floor(Date.now() / 1000))
      return yield* collectBindSignatures({
        committee,
        sessions,
        owner: Schema.decodeSync(Address)(owner),
        id: Schema.decodeUnknownSync(Bytes32)(id),
        bindNonce: 0n,
        deadline,
        chain: { chainId: devnet.deployment.chainId, vault },
        isAttestor: (signer) =>
          chain().readContract({
            address: vault,
            abi: feeVaultAbi,
            functionName: "isAttestor",
            args: [signer]
          })
      })
    })
  )
  const proposed = await fetch(`${devnet.relayerUrl}/v1/propose-bind`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(Schema.encodeSync(ProposeBindRequest)(proposeBindRequestOf(collected)))
  })
  expect(proposed.status).toBe(200)
  const { txHash } = (await proposed.json()) as { txHash: Hex }
  const { blockNumber } = await chain().waitForTransactionReceipt({ hash: txHash })
  // The page lists escrows as the members index them.
  for (const member of members.slice(0, 2)) await indexed(member.url, blockNumber)
}
