/**
 * A TCP proxy on loopback that can fail on demand, for the soak's faults (bench/soak.ts): in front
 * of PostgreSQL it makes the database unreachable without stopping the machine's server, in front
 * of anvil it makes the chain RPC silent.
 *
 * - `pass`: bytes flow both ways unchanged.
 * - `refuse`: every open connection is reset and every new one reset as soon as it is accepted,
 *   as a database that went away looks to its clients.
 * - `blackhole`: connections are accepted and nothing is answered; bytes sent on open connections
 *   are dropped. A connection that lost bytes can never be framed again, so it is reset when the
 *   proxy passes again (its client reconnects, as after a network outage).
 */
import net from "node:net"

export type ProxyMode = "pass" | "refuse" | "blackhole"

export interface TcpProxy {
  /** `127.0.0.1:<port>` of the proxy. */
  readonly host: string
  readonly port: number
  mode: ProxyMode
  /** Connections accepted so far. */
  readonly accepted: () => number
  readonly close: () => Promise<void>
}

interface Link {
  readonly client: net.Socket
  readonly upstream: net.Socket | undefined
  /** Bytes were dropped on it: it is reset when the proxy passes again. */
  broken: boolean
}

const reset = (socket: net.Socket) => {
  if (!socket.destroyed) socket.resetAndDestroy()
}

export const startTcpProxy = async (target: { host: string; port: number }): Promise<TcpProxy> => {
  const links = new Set<Link>()
  let mode: ProxyMode = "pass"
  let accepted = 0
  const drop = (link: Link) => {
    links.delete(link)
    reset(link.client)
    if (link.upstream !== undefined) reset(link.upstream)
  }
  const server = net.createServer((client) => {
    accepted++
    client.on("error", () => {})
    if (mode === "refuse") {
      reset(client)
      return
    }
    if (mode === "blackhole") {
      // Held without an upstream: it never gets an answer.
      const link: Link = { client, upstream: undefined, broken: true }
      links.add(link)
      client.on("data", () => {})
      client.on("close", () => links.delete(link))
      return
    }
    const upstream = net.connect(target.port, target.host)
    upstream.on("error", () => {})
    const link: Link = { client, upstream, broken: false }
    links.add(link)
    const forward = (from: net.Socket, to: net.Socket) =>
      from.on("data", (chunk: Buffer) => {
        if (mode === "blackhole" || link.broken) {
          link.broken = true
          return
        }
        to.write(chunk)
      })
    forward(client, upstream)
    forward(upstream, client)
    const close = () => drop(link)
    client.on("close", close)
    upstream.on("close", close)
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as net.AddressInfo).port
  return {
    host: "127.0.0.1",
    port,
    get mode() {
      return mode
    },
    set mode(next: ProxyMode) {
      mode = next
      // Into `refuse`, every open connection goes; back to `pass`, those that lost bytes go.
      for (const link of [...links]) if (next === "refuse" || (next === "pass" && link.broken)) drop(link)
    },
    accepted: () => accepted,
    close: async () => {
      for (const link of [...links]) drop(link)
      await new Promise((resolve) => server.close(resolve))
    }
  }
}
