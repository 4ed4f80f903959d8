/**
 * The recipient's journey in a real browser (docs/getting-started.md "The wallet page"): Debian's
 * Chromium, driven by playwright-core, on the devnet's wallet page (src/devnet/walletPage.ts)
 * against a relayer and an attestor of a private devnet and the stand-in providers. A codehost
 * login through the provider's consent page, its escrow listed, bound, proposed and shown pending
 * for the page's key with the time it becomes final; a messenger login through the widget
 * stand-in; a fedsocial sign-in through the devnet signer; a page opened with a `#attest=` token it
 * did not start refuses it and sends nothing with it (the login-binding rule of docs/attestor.md
 * "Writing a client"); the attestor down is one clear sentence. After the chain's clock is moved
 * ahead (as `examples/recipient-login.ts` does), a messenger login still makes a session; and a
 * recipient's whole journey: login, bind, the bind delay skipped, finalize, and a relayed claim whose
 * amount, less the relayer's fee, arrives at the typed address. Every request the page makes goes
 * to the devnet's services. Each scenario leaves a screenshot in test/browser/__screenshots__.
 *
 * No browser is a failure, never a skip: `.ci/run` installs Debian's `chromium`.
 */
import { existsSync } from "node:fs"
import { mkdir } from "node:fs/promises"
import { join } from "node:path"
import { Effect } from "effect"
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core"
import { getAddress, parseUnits } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest"
import {
  DEVNET_MESSENGER_BOT_TOKEN,
  devnetClockEnv,
  freeLoopbackPort,
  walletPageEnv
} from "../../layers/devnet.js"
import { newLoginSecret } from "../../src/client.js"
import { startWalletPage, type WalletPage } from "../../src/devnet/walletPage.js"
import { AttestorClient } from "../e2e/support/attestorClient.js"
import { RelayerDevnet } from "../e2e/support/relayerDevnet.js"

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"
const SCREENSHOTS = join(import.meta.dirname, "__screenshots__")

let net: RelayerDevnet
let attestor: AttestorClient
let wallet: WalletPage
let browser: Browser
let users = 3_000_000 + (process.pid % 1000) * 100

beforeAll(async () => {
  if (!existsSync(CHROMIUM))
    throw new Error(
      `no browser at ${CHROMIUM}: install Debian's chromium (apt-get install -y chromium), as .ci/run does`
    )
  await mkdir(SCREENSHOTS, { recursive: true })
  const port = await Effect.runPromise(freeLoopbackPort)
  const origin = `http://localhost:${port}`
  const env = walletPageEnv(origin)
  net = await RelayerDevnet.start("wallet-page", env.relayer)
  // On the chain's clock, as `npm run devnet` runs it (docs/protocol.md §9 "The devnet's clock").
  attestor = await AttestorClient.start(net, { ...env.attestor, ...devnetClockEnv }, { standIns: true })
  wallet = await startWalletPage({
    port,
    attestorUrl: attestor.url,
    relayerUrl: net.relayerUrl,
    rpcUrl: net.rpcUrl,
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
  await attestor?.stop()
  await net?.dispose()
})

/** A fresh browser context and page, recording every request the page makes. */
const openContext = async (): Promise<{ context: BrowserContext; page: Page; requests: Array<string> }> => {
  const context = await browser.newContext({ viewport: { width: 1100, height: 760 } })
  const page = await context.newPage()
  const requests: Array<string> = []
  page.on("request", (request) => requests.push(request.url()))
  return { context, page, requests }
}

/** Every request went to the devnet's services: the page, the attestor, the relayer, the chain, the stand-ins. */
const expectOnlyDevnet = (requests: ReadonlyArray<string>) => {
  const allowed = new Set([wallet.url, attestor.url, net.relayerUrl, net.rpcUrl, attestor.standIns?.url])
  const others = requests.filter((url) => !url.startsWith("data:") && !allowed.has(new URL(url).origin))
  expect(others).toEqual([])
}

const shot = (page: Page, name: string) =>
  page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true })

const launched = async (platform: "codehost" | "messenger" | "fedsocial", userId: string, symbol: string) => {
  const { id, block } = await attestor.launchTo(await attestor.commit(userId, platform), symbol)
  await attestor.indexed(block)
  return id
}

const refusal = (page: Page) => page.locator("#refusal")

/** Now by the chain's clock: anvil's next block time, which a skipped bind delay moved ahead. */
const chainNow = async () => Number((await net.publicClient().getBlock({ blockTag: "pending" })).timestamp)

/**
 * Moves the chain's clock `seconds` ahead, as `examples/recipient-login.ts` does when it skips the
 * bind delay, and waits until the attestor reads it: a widget payload dated by the chain is taken.
 */
const skipTime = async (seconds: number) => {
  await net.timeTravel(seconds)
  const user = String(++users)
  await vi.waitFor(
    async () => {
      const verified = await attestor.post("/v1/oauth/messenger/verify", {
        auth: AttestorClient.widget(user, DEVNET_MESSENGER_BOT_TOKEN, await chainNow()),
        stealthOwner: privateKeyToAccount(generatePrivateKey()).address,
        loginChallenge: newLoginSecret().loginChallenge
      })
      expect(verified.status).toBe(200)
    },
    { timeout: 30_000, interval: 200 }
  )
}

/** The page's status line once it reads `text`. */
const status = (page: Page, text: RegExp) =>
  page.locator("#status", { hasText: text }).waitFor({ timeout: 60_000 })

describe("the devnet wallet page in Chromium", () => {
  it("codehost: the consent page, the escrow listed, bound and proposed, pending for the page's key", {
    timeout: 90_000
  }, async () => {
    const user = String(++users)
    const id = await launched("codehost", user, "WPCH")
    const { context, page, requests } = await openContext()
    await page.goto(`${wallet.url}/`)
    const owner = (await page.locator("#stealth-owner").textContent()) ?? ""
    expect(owner).toMatch(/^0x[0-9a-fA-F]{40}$/)
    await expect(page.locator(".devnet").textContent()).resolves.toContain("Devnet only")
    await page.click("[data-login=codehost]")
    // The provider's consent page: pick the devnet user, authorize.
    await page.waitForSelector("#authorize")
    await shot(page, "consent-page")
    await page.fill("#devnet_user", user)
    await page.click("#authorize")
    await page.waitForURL(`${wallet.url}/after-login`)
    const row = page.locator(`tr[data-escrow="${id}"]`)
    await row.waitFor()
    await row.locator("button.bind").click()
    await page.locator("#status", { hasText: /^Bind proposed/ }).waitFor({ timeout: 60_000 })
    await expect(row.locator(".pending-owner").textContent()).resolves.toContain("(this page's key)")
    await expect(row.locator(".final-at").textContent()).resolves.not.toBe("—")
    expect(await refusal(page).isHidden()).toBe(true)
    await shot(page, "wallet-page")
    // On chain: the bind is pending for the key this page drew.
    const account = await net.vaultAccount(id as `0x${string}`)
    expect(account.pendingOwner.toLowerCase()).toBe(owner.toLowerCase())
    expectOnlyDevnet(requests)
    await context.close()
  })

  it("messenger: the widget stand-in logs the user in and the escrow is listed", {
    timeout: 60_000
  }, async () => {
    const user = String(++users)
    const id = await launched("messenger", user, "WPMS")
    const { context, page, requests } = await openContext()
    await page.goto(`${wallet.url}/`)
    await page.fill("#messenger-user", user)
    await page.click("#messenger-login")
    await page.locator(`tr[data-escrow="${id}"]`).waitFor()
    await expect(page.locator("#account-user").textContent()).resolves.toBe(`messenger user ${user}`)
    await shot(page, "messenger-login")
    expectOnlyDevnet(requests)
    await context.close()
  })

  it("fedsocial: the devnet signer signs in fid 1006 and the escrow is listed", {
    timeout: 60_000
  }, async () => {
    const id = await launched("fedsocial", "1006", "WPFS")
    const { context, page, requests } = await openContext()
    await page.goto(`${wallet.url}/`)
    await page.selectOption("#fedsocial-fid", "1006")
    await page.click("#fedsocial-login")
    await page.locator(`tr[data-escrow="${id}"]`).waitFor()
    await expect(page.locator("#account-user").textContent()).resolves.toBe("fedsocial user 1006")
    await shot(page, "fedsocial-login")
    expectOnlyDevnet(requests)
    await context.close()
  })

  it("a page opened with a #attest= token it did not start refuses it and sends nothing with it", {
    timeout: 60_000
  }, async () => {
    const victim = String(++users)
    await launched("codehost", victim, "WPST")
    // Someone else's login, completed as the victim: its session token, landed on the victim's page.
    const attacker = privateKeyToAccount(generatePrivateKey()).address
    const started = await attestor.post("/v1/oauth/codehost/start", {
      stealthOwner: attacker,
      redirect: `${wallet.url}/after-login`,
      loginChallenge: newLoginSecret().loginChallenge
    })
    const { url } = (await started.json()) as { url: string }
    const consent = await fetch(`${url}&devnet_user=${victim}`, { redirect: "manual" })
    const landed = await fetch(consent.headers.get("location")!, { redirect: "manual" })
    const location = landed.headers.get("location")!
    const token = /#attest=([A-Za-z0-9_-]{43})$/.exec(location)?.[1]
    expect(token).toBeDefined()

    const { context, page, requests } = await openContext()
    const bodies: Array<string> = []
    page.on("request", (request) => bodies.push(`${request.url()} ${request.postData() ?? ""}`))
    await page.goto(location)
    await refusal(page).waitFor()
    await expect(refusal(page).textContent()).resolves.toContain("unsolicited_login")
    // The page went on as usual: its logins are offered once /v1/info answered.
    await page.locator("[data-login=codehost]").waitFor()
    expect(page.url()).toBe(`${wallet.url}/after-login`)
    expect(await page.locator("#account").isHidden()).toBe(true)
    await shot(page, "stolen-token")
    expect(bodies.filter((line) => line.includes(token!))).toEqual([])
    expect(requests.filter((url) => /\/v1\/(bind|escrows)$/.test(url))).toEqual([])
    expectOnlyDevnet(requests)
    await context.close()
  })

  it("the attestor down: one clear sentence, no stack trace", { timeout: 60_000 }, async () => {
    const port = await Effect.runPromise(freeLoopbackPort)
    const orphan = await startWalletPage({
      attestorUrl: `http://127.0.0.1:${port}`,
      relayerUrl: net.relayerUrl,
      rpcUrl: net.rpcUrl,
      messengerBotToken: DEVNET_MESSENGER_BOT_TOKEN
    })
    try {
      const { context, page } = await openContext()
      await page.goto(`${orphan.url}/`)
      await refusal(page).waitFor()
      const text = (await refusal(page).textContent()) ?? ""
      expect(text).toBe(
        `The attestor at http://127.0.0.1:${port} does not answer. Is \`npm run devnet\` running? Start it and reload this page.`
      )
      expect(text).not.toMatch(/\n\s*at |Error:|TypeError/)
      await shot(page, "attestor-down")
      await context.close()
    } finally {
      await orphan.close()
    }
  })

  it("after the chain's clock moved an hour ahead, a messenger login makes a session", {
    timeout: 90_000
  }, async () => {
    await skipTime(Number(net.chain.deployment.bindDelay) + 1)
    const user = String(++users)
    const id = await launched("messenger", user, "WPCK")
    const { context, page, requests } = await openContext()
    await page.goto(`${wallet.url}/`)
    await page.fill("#messenger-user", user)
    await page.click("#messenger-login")
    await page.locator(`tr[data-escrow="${id}"]`).waitFor()
    await expect(page.locator("#status").textContent()).resolves.toBe(
      `Logged in with messenger as user ${user}.`
    )
    expect(await refusal(page).isHidden()).toBe(true)
    expectOnlyDevnet(requests)
    await context.close()
  })

  it("the journey: login, bind, the delay skipped, finalize, and a claim that arrives less the fee", {
    timeout: 180_000
  }, async () => {
    const user = String(++users)
    const id = await launched("messenger", user, "WPJR")
    const asset = getAddress(net.chain.deployment.settlementAsset)
    const decimals = net.chain.deployment.assets[net.chain.deployment.settlementAsset]?.decimals ?? 18
    const deposited = parseUnits("25", decimals)
    await net.deposit(id as `0x${string}`, asset, deposited)
    const { context, page, requests } = await openContext()
    await page.goto(`${wallet.url}/`)
    await page.fill("#messenger-user", user)
    await page.click("#messenger-login")
    const row = page.locator(`tr[data-escrow="${id}"]`)
    await row.locator("button.bind").click()
    await status(page, /^Bind proposed/)
    // The time left is counted on the chain's clock, whatever lead the earlier skip gave it.
    await expect(row.locator(".final-at").textContent()).resolves.toMatch(/\(final in (1 h|59 min)\)$/)
    await expect(row.locator(`.balance [data-asset="${asset}"]`).textContent()).resolves.toMatch(/^25 /)
    expect(await row.locator("button.finalize").count()).toBe(0)

    await skipTime(Number(net.chain.deployment.bindDelay) + 1)
    await page.click("#refresh")
    await row.locator("button.finalize").click()
    await status(page, /^Bind final/)
    await expect(row.locator("td").nth(2).textContent()).resolves.toContain("(this page's key)")

    const recipient = privateKeyToAccount(generatePrivateKey()).address
    await page.fill("#claim-to", recipient)
    await row.locator(`button.claim[data-asset="${asset}"]`).click()
    const review = page.locator("#claim-review")
    await review.waitFor()
    await expect(review.textContent()).resolves.toContain("The relayer's fee is")
    const amount = BigInt((await review.getAttribute("data-amount")) ?? "0")
    const fee = BigInt((await review.getAttribute("data-fee")) ?? "0")
    expect(amount).toBe(deposited)
    expect(fee).toBeGreaterThan(0n)
    await shot(page, "claim-review")
    await page.click("#claim-confirm")
    await status(page, /^Claimed/)
    expect(await net.tokenBalance(asset, recipient)).toBe(deposited - fee)
    await expect(row.locator(`.balance [data-asset="${asset}"]`).count()).resolves.toBe(0)
    expect(await refusal(page).isHidden()).toBe(true)
    await shot(page, "claimed")
    expectOnlyDevnet(requests)
    await context.close()
  })
})
