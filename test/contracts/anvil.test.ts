// The anvil launcher: loopback port, readiness, explicit ports, Effect scope and no orphaned nodes.
import { spawn } from "node:child_process"
import net from "node:net"
import { fileURLToPath, pathToFileURL } from "node:url"
import { Effect, Exit } from "effect"
import { createPublicClient, createTestClient, http } from "viem"
import { describe, expect, it } from "vitest"
import { ANVIL_CHAIN_ID, AnvilStartError, spawnAnvil, startAnvil } from "../../src/chain/anvil.js"

const chainIdOf = (rpcUrl: string) =>
  createPublicClient({ transport: http(rpcUrl, { retryCount: 0 }) }).getChainId()

const answers = async (rpcUrl: string): Promise<boolean> =>
  chainIdOf(rpcUrl).then(
    () => true,
    () => false
  )

const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
    })
  })

describe("spawnAnvil", () => {
  it("starts on a free loopback port with chain id 31337 and the default mnemonic, and stops", async () => {
    const anvil = await spawnAnvil()
    try {
      expect(anvil.rpcUrl).toBe(`http://127.0.0.1:${anvil.port}`)
      expect(await chainIdOf(anvil.rpcUrl)).toBe(ANVIL_CHAIN_ID)
      const client = createPublicClient({ transport: http(anvil.rpcUrl) })
      const balance = await client.getBalance({ address: "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266" })
      expect(balance).toBe(10_000n * 10n ** 18n)
      expect(await createTestClient({ mode: "anvil", transport: http(anvil.rpcUrl) }).getAutomine()).toBe(
        true
      )
    } finally {
      await anvil.stop()
    }
    expect(await answers(anvil.rpcUrl)).toBe(false)
    await anvil.stop()
  })

  it("uses an explicit port, and refuses clearly when that port is taken", async () => {
    const port = await freePort()
    const anvil = await spawnAnvil({ port, noMining: true })
    try {
      expect(anvil.port).toBe(port)
      expect(await createTestClient({ mode: "anvil", transport: http(anvil.rpcUrl) }).getAutomine()).toBe(
        false
      )
      const failure = await spawnAnvil({ port }).then(
        () => undefined,
        (error: unknown) => error
      )
      expect(failure).toBeInstanceOf(AnvilStartError)
      expect((failure as AnvilStartError).message).toContain(`port ${port} on 127.0.0.1 is already in use`)
    } finally {
      await anvil.stop()
    }
  })
})

describe("startAnvil", () => {
  it("is a scoped resource: the node stops when the scope closes", async () => {
    const rpcUrl = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const anvil = yield* startAnvil({ blockTime: 1 })
          expect(yield* Effect.promise(() => chainIdOf(anvil.rpcUrl))).toBe(ANVIL_CHAIN_ID)
          return anvil.rpcUrl
        })
      )
    )
    expect(await answers(rpcUrl)).toBe(false)
  })

  it("fails with AnvilStartError on a taken port", async () => {
    const blocker = net.createServer()
    await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve))
    const address = blocker.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    try {
      const exit = await Effect.runPromiseExit(Effect.scoped(startAnvil({ port })))
      expect(Exit.isFailure(exit)).toBe(true)
      if (Exit.isFailure(exit)) expect(JSON.stringify(exit.cause)).toContain("AnvilStartError")
    } finally {
      blocker.close()
    }
  })
})

describe("parent death", () => {
  it("takes anvil down when the process that started it is killed outright", async () => {
    const anvilModule = pathToFileURL(
      fileURLToPath(new URL("../../src/chain/anvil.ts", import.meta.url))
    ).href
    const script = `import(${JSON.stringify(anvilModule)}).then(async (m) => {
      const a = await m.spawnAnvil()
      console.log(a.rpcUrl)
      setInterval(() => {}, 1000)
    })`
    const child = spawn(process.execPath, ["--import", "tsx", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"]
    })
    const rpcUrl = await new Promise<string>((resolve, reject) => {
      let out = ""
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
        out += chunk
        const line = out.split("\n").find((l) => l.startsWith("http://127.0.0.1:"))
        if (line !== undefined) resolve(line.trim())
      })
      child.once("exit", (code) => reject(new Error(`child exited early (${code})`)))
    })
    expect(await answers(rpcUrl)).toBe(true)
    child.kill("SIGKILL")
    const deadline = Date.now() + 5000
    while (Date.now() < deadline && (await answers(rpcUrl))) await new Promise((r) => setTimeout(r, 100))
    expect(await answers(rpcUrl)).toBe(false)
  })
})
