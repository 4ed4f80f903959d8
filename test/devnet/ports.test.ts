/**
 * The ports the devnet chooses up front for its services (layers/devnet.ts): free, distinct, and
 * outside the range the kernel takes local ports of outgoing connections from, so that a connection
 * opened between the choice and the service's listen cannot be holding the port.
 */
import { readFileSync } from "node:fs"
import { createServer } from "node:net"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { freeLoopbackPort } from "../../layers/devnet.js"

/** The kernel's floor, read here on its own rather than through the module under test. */
const ephemeralFloor = (): number => {
  try {
    return Number.parseInt(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8"), 10)
  } catch {
    return process.platform === "linux" ? 32768 : 49152
  }
}

const listenOn = (port: number) =>
  new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen({ port, host: "127.0.0.1", exclusive: true }, () => resolve(server))
  })

describe("freeLoopbackPort", () => {
  it("chooses distinct free ports below the ephemeral range", async () => {
    const ports = await Effect.runPromise(Effect.all(Array.from({ length: 20 }, () => freeLoopbackPort)))
    expect(new Set(ports).size).toBe(ports.length)
    for (const port of ports) {
      expect(port).toBeGreaterThan(1023)
      expect(port).toBeLessThan(ephemeralFloor())
    }
    // Each one can be listened on at once.
    const servers = await Promise.all(ports.map(listenOn))
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))))
  })

  it("passes over a port something already listens on", async () => {
    const first = await Effect.runPromise(freeLoopbackPort)
    // Hold the ports that come next in this process's sequence, as another process would.
    const heldPorts = Array.from({ length: 5 }, (_, i) => first + 1 + i)
    const held = await Promise.all(heldPorts.map(listenOn))
    try {
      const chosen = await Effect.runPromise(freeLoopbackPort)
      expect(heldPorts).not.toContain(chosen)
      await listenOn(chosen).then((server) => new Promise((resolve) => server.close(resolve)))
    } finally {
      await Promise.all(held.map((server) => new Promise((resolve) => server.close(resolve))))
    }
  })
})
