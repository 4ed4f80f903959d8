/**
 * The devnet as a scoped layer: what end-to-end tests build on. Both services run in-process on
 * free ports against a private chain, and everything stops with the scope.
 */
import { readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { ManagedRuntime } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Devnet, type RunningDevnet } from "../../layers/devnet.js"

const runtime = ManagedRuntime.make(Devnet.layer({ dir: join(tmpdir(), `devnet-layer-${process.pid}`) }))
let devnet: RunningDevnet

beforeAll(async () => {
  devnet = await runtime.runPromise(Devnet)
}, 300_000)

describe("devnet layer", () => {
  it("serves both services and writes the deployment file naming them", async () => {
    const relayer = await fetch(`${devnet.relayerUrl}/v1/health`)
    expect(relayer.status).toBe(200)
    expect(await relayer.json()).toMatchObject({ ok: true, chainId: 31337 })
    const attestor = await fetch(`${devnet.attestorUrl}/v1/health`)
    expect(attestor.status).toBe(200)
    // The devnet's attestor vetoes (docs/protocol.md §9), from its own key.
    expect(await attestor.json()).toMatchObject({ ok: true, vetoWatcher: { autoVeto: true } })
    const file = JSON.parse(readFileSync(devnet.deploymentFile, "utf8"))
    expect(file).toMatchObject({
      relayerUrl: devnet.relayerUrl,
      attestorUrl: devnet.attestorUrl,
      vault: devnet.deployment.vault
    })
  })

  it("stops the services and the chain when the scope closes", async () => {
    await runtime.dispose()
    const refused = (url: string) =>
      fetch(url, { method: "POST", body: "{}" }).then(
        () => false,
        () => true
      )
    expect(await refused(devnet.relayerUrl)).toBe(true)
    expect(await refused(devnet.attestorUrl)).toBe(true)
    expect(await refused(devnet.anvil.rpcUrl)).toBe(true)
  })
})

afterAll(() => runtime.dispose())
