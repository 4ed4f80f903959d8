/**
 * What every loopback stand-in of the devnet does with its HTTP server (docs/protocol.md §9): listen
 * on a port (0: any free one) and close once, ending every connection at once so a test or the
 * devnet stops without waiting for keep-alive clients.
 */

import type { Server } from "node:http"
import type { AddressInfo } from "node:net"

/** Listens on `host:port` and resolves with the address it got. */
export const listen = (server: Server, port: number, host: string): Promise<AddressInfo> =>
  new Promise<AddressInfo>((resolve, reject) => {
    server.once("error", reject)
    server.listen(port, host, () => {
      server.off("error", reject)
      resolve(server.address() as AddressInfo)
    })
  })

/** A close that runs `before` and closes the server once; every later call gets the same promise. */
export const closeOnce = (server: Server, before: () => void = () => {}): (() => Promise<void>) => {
  let closing: Promise<void> | undefined
  return () => {
    closing ??= new Promise<void>((resolve) => {
      before()
      server.close(() => resolve())
      server.closeAllConnections()
    })
    return closing
  }
}
