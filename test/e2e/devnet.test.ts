/**
 * `npm run devnet` as a new user meets it, and an outside client that knows only viem,
 * docs/protocol.md and `.devnet/deployment.json`: it registers an account, deposits and claims
 * directly on the vault with its own EIP-712 signature. The ABI and typed data below are written
 * from docs/protocol.md on purpose, not imported from this repository.
 */
import { readFileSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import {
  type Address,
  createPublicClient,
  createWalletClient,
  defineChain,
  encodeAbiParameters,
  type Hex,
  http,
  keccak256,
  parseAbi,
  parseEventLogs
} from "viem"
import { mnemonicToAccount } from "viem/accounts"
import { afterAll, describe, expect, it } from "vitest"
import { freeLoopbackPort } from "../../layers/devnet.js"
import { newLoginSecret } from "../../src/client.js"
import { type ServiceProcess, startService } from "../support/process.js"

const vaultAbi = parseAbi([
  "function registerOwner(address owner, bytes32 salt, address fallbackRecipient, uint256 fallbackDelay) returns (bytes32 id)",
  "function deposit(bytes32 id, address asset, uint256 amount)",
  "function claim((bytes32 beneficiaryId, address asset, uint256 amount, address adapter, bytes32 dataHash, address relayer, uint256 relayerFee, uint256 nonce, uint256 deadline) claim, bytes adapterData, bytes signature)",
  "function nonces(bytes32 id) view returns (uint256)",
  "function balanceOf(bytes32 id, address asset) view returns (uint256)",
  "event Registered(bytes32 indexed id, uint8 kind, address owner, bytes32 commitment, address fallbackRecipient, uint256 fallbackDelay)",
  "event Claimed(bytes32 indexed id, address indexed asset, address indexed adapter, address relayer, uint256 amount, uint256 relayerFee, uint256 nonce)",
  "event Pinged(bytes32 indexed id, uint256 nonce)"
])
const erc20Abi = parseAbi([
  "function approve(address spender, uint256 amount) returns (bool)",
  "function balanceOf(address account) view returns (uint256)",
  "function mint(address to, uint256 amount)"
])

const MNEMONIC = "test test test test test test test test test test test junk"
const ZERO: Address = "0x0000000000000000000000000000000000000000"

/**
 * A port for the devnet to listen on, outside the kernel's ephemeral range: the connections the
 * devnet opens before its services listen (to anvil, to the database) take their local ports from
 * that range, and could otherwise take one chosen here first.
 */
const freePort = () => Effect.runPromise(freeLoopbackPort)

const portAnswers = (port: number) =>
  fetch(`http://127.0.0.1:${port}`, { method: "POST", body: "{}" }).then(
    () => true,
    () => false
  )

const running: Array<ServiceProcess> = []
afterAll(async () => {
  await Promise.all(running.map((p) => p.stop()))
})

const startDevnet = async (
  dir: string,
  committee?: { readonly attestors: number; readonly threshold: number }
) => {
  const ports: Record<string, number> = {
    rpc: await freePort(),
    relayer: await freePort(),
    attestor: await freePort(),
    doubles: await freePort(),
    facilitator: await freePort(),
    wallet: await freePort()
  }
  const members = [ports.attestor]
  for (let k = 2; k <= (committee?.attestors ?? 1); k++) {
    ports[`attestor${k}`] = await freePort()
    members.push(ports[`attestor${k}`])
  }
  const devnet = startService("devnet", {
    ...(committee === undefined
      ? {}
      : {
          DEVNET_ATTESTORS: String(committee.attestors),
          DEVNET_ATTESTOR_THRESHOLD: String(committee.threshold),
          DEVNET_ATTESTOR_PORTS: members.join(",")
        }),
    DEVNET_DIR: dir,
    DEVNET_RPC_PORT: String(ports.rpc),
    DEVNET_RELAYER_PORT: String(ports.relayer),
    DEVNET_ATTESTOR_PORT: String(ports.attestor),
    DEVNET_DOUBLES_PORT: String(ports.doubles),
    DEVNET_FACILITATOR_PORT: String(ports.facilitator),
    DEVNET_WALLET_PORT: String(ports.wallet)
  })
  running.push(devnet)
  const deadline = Date.now() + 280_000
  while (!devnet.stdout().includes("devnet is up")) {
    if (devnet.child.exitCode !== null)
      throw new Error(
        `devnet exited (${devnet.child.exitCode}): ${devnet.stderr()}\n${devnet.stdout().slice(-4000)}`
      )
    if (Date.now() > deadline) throw new Error(`devnet did not come up: ${devnet.stdout()}`)
    await new Promise((r) => setTimeout(r, 200))
  }
  return { devnet, ports }
}

describe("npm run devnet", () => {
  const dir = join(tmpdir(), `devnet-${process.pid}`)

  it("brings the system up; an outside client claims on the vault and pings through the relayer with a fee", {
    timeout: 360_000
  }, async () => {
    const { devnet, ports } = await startDevnet(dir)
    const file = JSON.parse(readFileSync(join(dir, "deployment.json"), "utf8"))
    for (const field of [
      "chainId",
      "vault",
      "settlementAsset",
      "shieldAdapter",
      "swapRouter",
      "startBlock",
      "quotedFullBalance",
      "assets",
      "nativePriceFeed",
      "rpcUrl",
      "relayerUrl",
      "attestorUrl",
      "doublesUrl",
      "facilitatorUrl",
      "bindDelay",
      "hintPublicKey",
      "tokens"
    ]) {
      expect(file, field).toHaveProperty(field)
    }
    expect(file.chainId).toBe(31337)
    expect(Object.keys(file.tokens).length).toBeGreaterThanOrEqual(3)
    expect(Object.values(file.assets).map((a) => (a as { decimals: number }).decimals)).toEqual(
      expect.arrayContaining([18, 6])
    )
    expect(file.hintPublicKey).toMatch(/^0x0[23][0-9a-f]{64}$/)
    for (const url of [file.relayerUrl, file.attestorUrl]) {
      expect((await fetch(`${url}/v1/health`)).status).toBe(200)
      expect((await fetch(`${url}/v1/metrics`, { headers: { authorization: "Bearer devnet" } })).status).toBe(
        200
      )
    }
    // The attestor vetoes unattested and contested binds, paid by account #2 (docs/protocol.md §9).
    expect(await (await fetch(`${file.attestorUrl}/v1/health`)).json()).toMatchObject({
      vetoWatcher: { autoVeto: true }
    })

    // The outside client: account #5 owns, #6 receives, #7 submits.
    const chain = defineChain({
      id: file.chainId,
      name: "devnet",
      nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
      rpcUrls: { default: { http: [file.rpcUrl] } }
    })
    const owner = mnemonicToAccount(MNEMONIC, { addressIndex: 5 })
    const recipient = mnemonicToAccount(MNEMONIC, { addressIndex: 6 }).address
    const submitter = mnemonicToAccount(MNEMONIC, { addressIndex: 7 })
    const publicClient = createPublicClient({ chain, transport: http(file.rpcUrl) })
    const wallet = createWalletClient({ chain, transport: http(file.rpcUrl), account: submitter })
    const vault = file.vault as Address
    const asset = file.settlementAsset as Address
    const mined = async (hash: Hex) => {
      const receipt = await publicClient.waitForTransactionReceipt({ hash })
      if (receipt.status !== "success") {
        // Replayed on the state before its block, so that a failure names what was refused.
        const tx = await publicClient.getTransaction({ hash })
        const why = await publicClient
          .call({
            account: tx.from,
            to: tx.to ?? undefined,
            data: tx.input,
            blockNumber: receipt.blockNumber - 1n
          })
          .then(
            () => "no revert when replayed on the block before",
            (error: Error) => error.message.split("\n").slice(0, 3).join(" / ")
          )
        expect.fail(
          `transaction reverted in block ${receipt.blockNumber} (gas used ${receipt.gasUsed} of ${tx.gas}): ${why}`
        )
      }
      return receipt
    }

    const salt = keccak256(encodeAbiParameters([{ type: "string" }], ["outside client salt"]))
    const registration = await mined(
      await wallet.writeContract({
        address: vault,
        abi: vaultAbi,
        functionName: "registerOwner",
        args: [owner.address, salt, ZERO, 0n]
      })
    )
    const [registered] = parseEventLogs({ abi: vaultAbi, logs: registration.logs, eventName: "Registered" })
    const id = registered!.args.id
    const commitment = keccak256(
      encodeAbiParameters([{ type: "address" }, { type: "bytes32" }], [owner.address, salt])
    )
    expect(id).toBe(
      keccak256(
        encodeAbiParameters(
          [{ type: "uint8" }, { type: "bytes32" }, { type: "address" }, { type: "uint256" }],
          [1, commitment, ZERO, 0n]
        )
      )
    )

    const amount = 100n * 10n ** 18n
    await mined(
      await wallet.writeContract({
        address: asset,
        abi: erc20Abi,
        functionName: "mint",
        args: [submitter.address, amount]
      })
    )
    await mined(
      await wallet.writeContract({
        address: asset,
        abi: erc20Abi,
        functionName: "approve",
        args: [vault, amount]
      })
    )
    await mined(
      await wallet.writeContract({
        address: vault,
        abi: vaultAbi,
        functionName: "deposit",
        args: [id, asset, amount]
      })
    )
    expect(
      await publicClient.readContract({
        address: vault,
        abi: vaultAbi,
        functionName: "balanceOf",
        args: [id, asset]
      })
    ).toBe(amount)

    // docs/protocol.md §3, written out as an outside client would.
    const claimTypes = [
      { name: "beneficiaryId", type: "bytes32" },
      { name: "asset", type: "address" },
      { name: "amount", type: "uint256" },
      { name: "adapter", type: "address" },
      { name: "dataHash", type: "bytes32" },
      { name: "relayer", type: "address" },
      { name: "relayerFee", type: "uint256" },
      { name: "nonce", type: "uint256" },
      { name: "deadline", type: "uint256" }
    ] as const
    const adapterData = encodeAbiParameters([{ type: "address" }], [recipient])
    const claim = {
      beneficiaryId: id,
      asset,
      amount: 40n * 10n ** 18n,
      adapter: ZERO,
      dataHash: keccak256(adapterData),
      relayer: ZERO,
      relayerFee: 10n ** 18n,
      nonce: await publicClient.readContract({
        address: vault,
        abi: vaultAbi,
        functionName: "nonces",
        args: [id]
      }),
      deadline: BigInt(Math.floor(Date.now() / 1000) + 3600)
    }
    const signature = await owner.signTypedData({
      domain: { name: "FeeVault", version: "1", chainId: file.chainId, verifyingContract: vault },
      primaryType: "Claim",
      types: { Claim: claimTypes },
      message: claim
    })
    const before = await publicClient.readContract({
      address: asset,
      abi: erc20Abi,
      functionName: "balanceOf",
      args: [recipient]
    })
    const claimed = await mined(
      await wallet.writeContract({
        address: vault,
        abi: vaultAbi,
        functionName: "claim",
        args: [claim, adapterData, signature]
      })
    )
    const after = await publicClient.readContract({
      address: asset,
      abi: erc20Abi,
      functionName: "balanceOf",
      args: [recipient]
    })
    expect(after - before).toBe(claim.amount - claim.relayerFee)
    const [event] = parseEventLogs({ abi: vaultAbi, logs: claimed.logs, eventName: "Claimed" })
    expect(event?.args).toMatchObject({ id, amount: claim.amount, relayerFee: claim.relayerFee, nonce: 0n })
    expect(
      await publicClient.readContract({ address: vault, abi: vaultAbi, functionName: "nonces", args: [id] })
    ).toBe(1n)

    // An owner action through the relayer, paid by a fee-only claim in the same transaction:
    // Ping at nonce 1, the fee claim at nonce 2, naming the relayer of GET /v1/config.
    const config = (await (await fetch(`${file.relayerUrl}/v1/config`)).json()) as { relayer: Address }
    const quote = (await (
      await fetch(
        `${file.relayerUrl}/v1/quote?${new URLSearchParams({ action: "ping", asset, adapter: ZERO })}`
      )
    ).json()) as { relayerFee: string }
    const domain = {
      name: "FeeVault",
      version: "1",
      chainId: file.chainId,
      verifyingContract: vault
    } as const
    const deadline = BigInt(Math.floor(Date.now() / 1000) + 3600)
    const fee = {
      ...claim,
      amount: BigInt(quote.relayerFee),
      dataHash: keccak256("0x"),
      relayer: config.relayer,
      relayerFee: BigInt(quote.relayerFee),
      nonce: 2n,
      deadline
    }
    const body = {
      id,
      deadline: deadline.toString(),
      signature: await owner.signTypedData({
        domain,
        primaryType: "Ping",
        types: {
          Ping: [
            { name: "id", type: "bytes32" },
            { name: "nonce", type: "uint256" },
            { name: "deadline", type: "uint256" }
          ]
        },
        message: { id, nonce: 1n, deadline }
      }),
      fee: {
        claim: Object.fromEntries(
          Object.entries(fee).map(([k, v]) => [k, typeof v === "bigint" ? v.toString() : v])
        ),
        signature: await owner.signTypedData({
          domain,
          primaryType: "Claim",
          types: { Claim: claimTypes },
          message: fee
        })
      }
    }
    const pinged = await fetch(`${file.relayerUrl}/v1/ping`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body)
    })
    const { txHash } = (await pinged.json()) as { txHash: Hex }
    expect(pinged.status).toBe(200)
    const receipt = await mined(txHash)
    expect(parseEventLogs({ abi: vaultAbi, logs: receipt.logs, eventName: "Pinged" })[0]?.args.nonce).toBe(1n)
    // The relayer's account list catches up with the block and shows the nonce both steps used.
    let listed: { nonce: string } | undefined
    for (let i = 0; i < 200 && listed === undefined; i++) {
      const accounts = (await (await fetch(`${file.relayerUrl}/v1/accounts`)).json()) as {
        block: number
        accounts: ReadonlyArray<{ id: Hex; nonce: string }>
      }
      if (accounts.block >= Number(receipt.blockNumber)) listed = accounts.accounts.find((a) => a.id === id)
      else await new Promise((resolve) => setTimeout(resolve, 100))
    }
    expect(listed?.nonce).toBe("3")

    // A recipient logs in with microblog at the stand-in provider (docs/protocol.md §9) as the devnet's
    // sample user, and finds the sample launch's escrow.
    const stealthOwner = mnemonicToAccount(MNEMONIC, { addressIndex: 8 }).address
    // The devnet keeps LOGIN_CHALLENGE=required, as production does: a start without one is refused.
    const unbound = await fetch(`${file.attestorUrl}/v1/oauth/microblog/start`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ stealthOwner })
    })
    expect(unbound.status).toBe(400)
    expect(await unbound.json()).toMatchObject({
      code: "bad_request",
      error: expect.stringMatching(/^loginChallenge: required/)
    })
    const { loginSecret, loginChallenge } = newLoginSecret()
    const started = (await (
      await fetch(`${file.attestorUrl}/v1/oauth/microblog/start`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ stealthOwner, loginChallenge })
      })
    ).json()) as { url: string }
    expect(started.url.startsWith(file.doublesUrl)).toBe(true)
    const consent = await fetch(`${started.url}&devnet_user=1000001`, { redirect: "manual" })
    expect(consent.status).toBe(302)
    const login = await fetch(consent.headers.get("location") ?? "", { redirect: "manual" })
    expect(login.status).toBe(200)
    const session = (await login.json()) as { session: string; userId: string; stealthOwner: string }
    expect(session).toMatchObject({ userId: "1000001", stealthOwner })
    const escrows = (await (
      await fetch(`${file.attestorUrl}/v1/escrows`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ session: session.session, loginSecret })
      })
    ).json()) as { escrows: Array<{ registered: boolean }> }
    expect(escrows.escrows.length).toBeGreaterThanOrEqual(1)

    // A creator buys the lookup of the handle dev42 on microblog (docs/protocol.md §9, §10): 402 with the
    // quote in the devnet's `permit2` method, a one-time Permit2 approval, a Permit2 witness transfer
    // for exactly the price to the canonical x402ExactPermit2Proxy, 200.
    const lookup = (paymentSignature?: string) =>
      fetch(`${file.attestorUrl}/v1/commitment`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          ...(paymentSignature === undefined ? {} : { "payment-signature": paymentSignature })
        },
        body: JSON.stringify({ platform: "microblog", handle: "dev42" })
      })
    const challenged = await lookup()
    expect(challenged.status).toBe(402)
    expect(await challenged.json()).toMatchObject({ code: "payment_required" })
    const quoted = JSON.parse(
      Buffer.from(challenged.headers.get("payment-required") ?? "", "base64").toString("utf8")
    ) as {
      accepts: Array<{
        network: string
        asset: Address
        amount: string
        payTo: Address
        maxTimeoutSeconds: number
        extra: { assetTransferMethod: string }
      }>
    }
    const [terms] = quoted.accepts
    if (terms === undefined) throw new Error("no payment option quoted")
    expect(terms).toMatchObject({
      network: "eip155:31337",
      asset: file.settlementAsset,
      amount: "10000000000000000",
      payTo: mnemonicToAccount(MNEMONIC, { addressIndex: 0 }).address,
      extra: { assetTransferMethod: "permit2" }
    })
    const permit2: Address = "0x000000000022D473030F116dDEE9F6B43aC78BA3"
    const spender: Address = "0x402085c248EeA27D92E8b30b2C58ed07f9E20001"
    const creator = mnemonicToAccount(MNEMONIC, { addressIndex: 9 })
    const creatorWallet = createWalletClient({ account: creator, chain, transport: http(file.rpcUrl) })
    await mined(
      await creatorWallet.writeContract({
        address: terms.asset,
        abi: erc20Abi,
        functionName: "mint",
        args: [creator.address, 10n ** 18n]
      })
    )
    await mined(
      await creatorWallet.writeContract({
        address: terms.asset,
        abi: erc20Abi,
        functionName: "approve",
        args: [permit2, 2n ** 256n - 1n]
      })
    )
    const now = BigInt(Math.floor(Date.now() / 1000))
    const authorization = {
      from: creator.address,
      permitted: { token: terms.asset, amount: terms.amount },
      spender,
      nonce: String(BigInt(keccak256(creator.address)) >> 8n),
      deadline: String(now + 300n),
      witness: { to: terms.payTo, validAfter: String(now - 60n) }
    }
    const permitSignature = await creator.signTypedData({
      domain: { name: "Permit2", chainId: 31337, verifyingContract: permit2 },
      primaryType: "PermitWitnessTransferFrom",
      types: {
        PermitWitnessTransferFrom: [
          { name: "permitted", type: "TokenPermissions" },
          { name: "spender", type: "address" },
          { name: "nonce", type: "uint256" },
          { name: "deadline", type: "uint256" },
          { name: "witness", type: "Witness" }
        ],
        TokenPermissions: [
          { name: "token", type: "address" },
          { name: "amount", type: "uint256" }
        ],
        Witness: [
          { name: "to", type: "address" },
          { name: "validAfter", type: "uint256" }
        ]
      },
      message: {
        permitted: { token: terms.asset, amount: BigInt(terms.amount) },
        spender,
        nonce: BigInt(authorization.nonce),
        deadline: BigInt(authorization.deadline),
        witness: { to: terms.payTo, validAfter: BigInt(authorization.witness.validAfter) }
      }
    })
    const paid = await lookup(
      Buffer.from(
        JSON.stringify({
          x402Version: 2,
          accepted: terms,
          payload: { signature: permitSignature, permit2Authorization: authorization }
        })
      ).toString("base64")
    )
    expect(paid.status).toBe(200)
    expect(await paid.json()).toMatchObject({ platform: "microblog", userId: "42" })
    const settlement = JSON.parse(
      Buffer.from(paid.headers.get("payment-response") ?? "", "base64").toString("utf8")
    ) as { success: boolean; transaction: Hex }
    expect(settlement.success).toBe(true)
    expect((await mined(settlement.transaction)).status).toBe("success")

    // Ctrl-C / SIGTERM stops everything: no chain, no services left listening.
    expect(await devnet.stop()).toBe(0)
    for (const port of Object.values(ports)) expect(await portAnswers(port)).toBe(false)
  })

  it("starts again in the same directory after a stop; the checkout's relayer follows its moved ports", {
    timeout: 360_000
  }, async () => {
    const { devnet, ports } = await startDevnet(dir)
    const file = JSON.parse(readFileSync(join(dir, "deployment.json"), "utf8"))
    expect(file.rpcUrl).toBe(`http://127.0.0.1:${ports.rpc}`)
    expect((await fetch(`${file.relayerUrl}/v1/health`)).status).toBe(200)

    // `npm run devnet:relayer`'s settings file names this run's RPC and a port beside its relayer.
    const settings = readFileSync(join(dir, "relayer.env"), "utf8")
    expect(settings).toContain(`RPC_URL=http://127.0.0.1:${ports.rpc}\n`)
    expect(settings).toContain(`PORT=${(ports.relayer ?? 0) + 10}\n`)
    expect(readFileSync(join(dir, "attestor.env"), "utf8")).toContain(`PORT=${(ports.attestor ?? 0) + 10}\n`)
    // The relayer from that file (its port left to the kernel here) quotes from the moved devnet.
    const checkout = startService("relayer", { ENV_FILE: join(dir, "relayer.env"), PORT: "0" })
    running.push(checkout)
    const url = await checkout.url()
    const config = (await (await fetch(`${url}/v1/config`)).json()) as {
      settlementAsset: Address
      adapters: { direct: Address }
    }
    expect(config.settlementAsset).toBe(file.settlementAsset)
    const quote = await fetch(
      `${url}/v1/quote?asset=${config.settlementAsset}&adapter=${config.adapters.direct}`
    )
    expect(quote.status).toBe(200)
    expect(checkout.stdout()).toContain("relayer.env")
    await checkout.stop()
    expect(await devnet.stop()).toBe(0)
  })

  it("DEVNET_ATTESTORS=3 DEVNET_ATTESTOR_THRESHOLD=2 starts three members, each listed and registered", {
    timeout: 360_000
  }, async () => {
    const committeeDir = join(tmpdir(), `devnet-committee-${process.pid}`)
    const { devnet, ports } = await startDevnet(committeeDir, { attestors: 3, threshold: 2 })
    const file = JSON.parse(readFileSync(join(committeeDir, "deployment.json"), "utf8"))
    expect(file.attestorThreshold).toBe(2)
    const urls = [ports.attestor, ports.attestor2, ports.attestor3].map((p) => `http://127.0.0.1:${p}`)
    expect(file.attestors.map((a: { url: string }) => a.url)).toEqual(urls)
    expect(file.attestorUrl).toBe(urls[0])
    const chain = createPublicClient({ transport: http(file.rpcUrl) })
    const vaultReads = parseAbi([
      "function attestorThreshold() view returns (uint256)",
      "function isAttestor(address) view returns (bool)"
    ])
    expect(
      await chain.readContract({ address: file.vault, abi: vaultReads, functionName: "attestorThreshold" })
    ).toBe(2n)
    for (const [i, member] of (
      file.attestors as Array<{ url: string; address: Address; hintPublicKey: Hex }>
    ).entries()) {
      // Each member is its own process: its own address and hint key, vetoing with its own key.
      expect(await (await fetch(`${member.url}/v1/info`)).json()).toMatchObject({
        attestor: member.address,
        hintPublicKey: member.hintPublicKey
      })
      expect(await (await fetch(`${member.url}/v1/health`)).json()).toMatchObject({
        vetoWatcher: { autoVeto: true }
      })
      expect(
        await chain.readContract({
          address: file.vault,
          abi: vaultReads,
          functionName: "isAttestor",
          args: [member.address]
        })
      ).toBe(true)
      expect(devnet.stdout()).toContain(`${i + 1} ${member.url}  ${member.address}`)
    }
    expect(new Set(file.attestors.map((a: { hintPublicKey: Hex }) => a.hintPublicKey)).size).toBe(3)
    expect(await devnet.stop()).toBe(0)
    for (const port of Object.values(ports)) expect(await portAnswers(port)).toBe(false)
  })

  it("refuses a committee threshold above its size before starting anything", {
    timeout: 60_000
  }, async () => {
    const devnet = startService("devnet", {
      DEVNET_DIR: join(tmpdir(), `devnet-threshold-${process.pid}`),
      DEVNET_ATTESTORS: "3",
      DEVNET_ATTESTOR_THRESHOLD: "4"
    })
    running.push(devnet)
    expect(await devnet.exited).toBe(1)
    expect(devnet.stderr()).toContain("DEVNET_ATTESTOR_THRESHOLD must be 1 to 3 (DEVNET_ATTESTORS), not 4")
    expect(devnet.stdout()).not.toContain("deploying")
  })

  it("refuses a taken port with a clear error before starting anything", { timeout: 180_000 }, async () => {
    const blocker = createServer()
    const port = await new Promise<number>((resolve) =>
      blocker.listen(0, "127.0.0.1", () => resolve((blocker.address() as { port: number }).port))
    )
    try {
      const devnet = startService("devnet", {
        DEVNET_DIR: join(tmpdir(), `devnet-taken-${process.pid}`),
        DEVNET_RPC_PORT: String(await freePort()),
        DEVNET_RELAYER_PORT: String(port),
        DEVNET_ATTESTOR_PORT: String(await freePort()),
        DEVNET_DOUBLES_PORT: String(await freePort()),
        DEVNET_FACILITATOR_PORT: String(await freePort()),
        DEVNET_WALLET_PORT: String(await freePort())
      })
      running.push(devnet)
      expect(await devnet.exited).toBe(1)
      expect(devnet.stderr()).toContain(
        `port ${port} for the relayer (DEVNET_RELAYER_PORT) is already in use`
      )
      expect(devnet.stdout()).not.toContain("deploying")
    } finally {
      blocker.close()
    }
  })
})
