/**
 * The devnet's wallet page (docs/getting-started.md "The wallet page", docs/protocol.md §9): a
 * small static recipient app at `http://localhost:5173/`, the origin on the devnet attestors'
 * redirect allow-list. Its module (src/devnet/wallet/main.ts) is bundled with esbuild when the
 * server starts, so nothing built is kept in the repository. `/config.json` names the committee
 * as deployment.json does (`attestors`, `attestorThreshold`), or one `attestorUrl`.
 *
 * Besides the page, the server holds two stand-ins of the outside world that need the devnet's
 * secrets, on the page's own origin:
 * - `POST /devnet/messenger-widget` `{ userId }`: the messenger login widget, a payload for that
 *   user signed with the devnet bot token;
 * - `POST /devnet/fedsocial-signer` `{ fid, nonce, domain, uri, expirationTime }`: a Farcaster
 *   wallet, a Sign In With Farcaster message with those values signed by the fid's custody key
 *   (fid 100i is mnemonic account #i, i = 3..9).
 *
 * Both sign with the devnet chain's time (the wall clock plus anvil's `evm_increaseTime` offset, read
 * per request), the clock the devnet attestors check them by (docs/protocol.md §9 "The devnet's
 * clock"): after an example skips a bind delay, a payload dated by this machine would be hours old.
 *
 * Its Content-Security-Policy lets the page reach this origin, the attestors, the relayer and the
 * chain's RPC (the page reads the vault itself: `bindNonces`, `isAttestor`, the chain's time) only.
 * Nothing here is logged.
 */
import { readFile } from "node:fs/promises"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import { fileURLToPath } from "node:url"
import { Effect, type Scope } from "effect"
import type { Plugin } from "esbuild"
import { createSiweMessage } from "viem/siwe"
import { devnetAccount } from "../../contracts/deploy.js"
import { signWidgetPayload, widgetKey } from "../attestor/logins/messenger/messengerWidget.js"
import { readOffsetSeconds } from "../chain/DevnetChainClock.js"
import { closeOnce, listen } from "./loopbackServer.js"

/** A committee member as deployment.json lists it (docs/protocol.md §9 "A committee devnet"). */
export interface WalletPageMember {
  readonly url: string
  readonly address: string
  readonly hintPublicKey: string
}

export interface WalletPageOptions {
  /** Default "127.0.0.1". */
  readonly host?: string
  /** Default 0 (a free port). */
  readonly port?: number
  /** The committee, member 1 first; or, instead, one `attestorUrl` (its address read from its `/v1/info`). */
  readonly attestors?: ReadonlyArray<WalletPageMember>
  /** How many members' signatures a bind needs (default 1). */
  readonly threshold?: number
  readonly attestorUrl?: string
  readonly relayerUrl: string
  /** The chain's JSON-RPC, for the page's reads of the vault. */
  readonly rpcUrl: string
  /** The bot token the messenger widget stand-in signs with. */
  readonly messengerBotToken: string
}

export interface WalletPage {
  /** `http://localhost:<port>`: the origin the attestor's allow-list and CORS name. */
  readonly url: string
  readonly close: () => Promise<void>
}

/** The fids whose custody keys the devnet signer holds: fid 100i is mnemonic account #i. */
const DEVNET_SIGNER_FIDS: ReadonlyArray<number> = [1003, 1004, 1005, 1006, 1007, 1008, 1009]

const WALLET_DIR = fileURLToPath(new URL("./wallet/", import.meta.url))
const MAX_BODY_BYTES = 4 * 1024
const USER_ID = /^[1-9][0-9]{0,14}$/

/**
 * `node:` imports of the shared modules the client brings in (schema/ids.ts's HMAC, the devnet
 * widget signer's hashes), used only by the attestor's own derivations and by scripts, are not
 * reachable from the page's code paths; in the browser they are stubs that throw if called.
 */
const nodeStubs: Plugin = {
  name: "node-stubs",
  setup(plugin) {
    plugin.onResolve({ filter: /^node:/ }, (args) => ({ path: args.path, namespace: "node-stub" }))
    plugin.onLoad({ filter: /.*/, namespace: "node-stub" }, () => ({
      contents: `const missing = () => { throw new Error("not available in a browser") }
export const createHash = missing
export const createHmac = missing
export const timingSafeEqual = missing
export default {}`,
      loader: "js"
    }))
  }
}

let bundled: Promise<string> | undefined

/** The page's module, bundled for browsers (once per process). */
const bundleWalletModule = (): Promise<string> => {
  bundled ??= bundle().catch((error: unknown) => {
    bundled = undefined
    throw error
  })
  return bundled
}

const bundle = async (): Promise<string> => {
  // Loaded here, not with the module: ./testing re-exports the devnet, and esbuild is an optional
  // peer that only the wallet page needs.
  const { build } = await import("esbuild")
  const result = await build({
    entryPoints: [`${WALLET_DIR}main.ts`],
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    minify: true,
    write: false,
    legalComments: "none",
    logLevel: "silent",
    plugins: [nodeStubs]
  })
  const output = result.outputFiles[0]
  if (output === undefined) throw new Error("esbuild produced no wallet module")
  return output.text
}

class BadRequest extends Error {}
/** The chain's RPC did not answer: the payload cannot be dated by the chain's clock. */
class ChainDown extends Error {}

const RPC_TIMEOUT_MS = 2_000

/** Now by the devnet chain's clock, in unix seconds: the attestors' now (docs/protocol.md §9). */
const chainNowSeconds = async (rpcUrl: string): Promise<number> => {
  const offset = await readOffsetSeconds(rpcUrl, RPC_TIMEOUT_MS).catch(() => {
    throw new ChainDown()
  })
  return Math.floor(Date.now() / 1000) + Math.max(0, offset)
}

const readJson = (req: IncomingMessage): Promise<Record<string, unknown>> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    let size = 0
    req.on("data", (chunk: Buffer) => {
      size += chunk.length
      if (size > MAX_BODY_BYTES) {
        req.destroy()
        reject(new BadRequest("body too large"))
      } else chunks.push(chunk)
    })
    req.on("end", () => {
      try {
        const parsed: unknown = JSON.parse(Buffer.concat(chunks).toString("utf8"))
        if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
          reject(new BadRequest("expected a JSON object"))
        else resolve(parsed as Record<string, unknown>)
      } catch {
        reject(new BadRequest("expected JSON"))
      }
    })
    req.on("error", reject)
  })

const text = (value: unknown, name: string, max = 200): string => {
  if (typeof value !== "string" || value.length === 0 || value.length > max)
    throw new BadRequest(`${name}: expected a string`)
  return value
}

/** The committee fields of `/config.json`: deployment.json's, or one `attestorUrl`. */
const committeeConfig = (
  options: WalletPageOptions
):
  | {
      readonly attestors: ReadonlyArray<WalletPageMember>
      readonly attestorThreshold: number
      readonly attestorUrl?: undefined
    }
  | { readonly attestorUrl: string; readonly attestors?: undefined } => {
  if (options.attestors === undefined) {
    if (options.attestorUrl === undefined) throw new Error("the wallet page needs attestors or attestorUrl")
    return { attestorUrl: options.attestorUrl }
  }
  const threshold = options.threshold ?? 1
  if (
    options.attestors.length === 0 ||
    !Number.isInteger(threshold) ||
    threshold < 1 ||
    threshold > options.attestors.length
  )
    throw new Error("the wallet page needs 1 or more attestors and a threshold of 1 to their number")
  return {
    attestors: options.attestors.map(({ url, address, hintPublicKey }) => ({ url, address, hintPublicKey })),
    attestorThreshold: threshold
  }
}

export const startWalletPage = async (options: WalletPageOptions): Promise<WalletPage> => {
  const [html, module] = await Promise.all([
    readFile(`${WALLET_DIR}index.html`, "utf8"),
    bundleWalletModule()
  ])
  const key = widgetKey(options.messengerBotToken)
  const committee = committeeConfig(options)
  const attestorUrls =
    committee.attestors === undefined ? [committee.attestorUrl] : committee.attestors.map((m) => m.url)
  const services = [
    ...new Set([...attestorUrls, options.relayerUrl, options.rpcUrl].map((url) => new URL(url).origin))
  ]
  const csp = [
    "default-src 'self'",
    `connect-src 'self' ${services.join(" ")}`,
    "img-src 'self' data:",
    "style-src 'self' 'unsafe-inline'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'"
  ].join("; ")
  let config = ""

  const send = (res: ServerResponse, status: number, type: string, body: string, extra = {}) => {
    res.writeHead(status, {
      "content-type": type,
      "content-length": Buffer.byteLength(body),
      "cache-control": "no-store",
      "x-content-type-options": "nosniff",
      ...extra
    })
    res.end(body)
  }
  const json = (res: ServerResponse, status: number, body: unknown) =>
    send(res, status, "application/json; charset=utf-8", JSON.stringify(body))

  const messengerWidget = async (body: Record<string, unknown>) => {
    const userId = text(body.userId, "userId", 20)
    if (!USER_ID.test(userId)) throw new BadRequest("userId: expected a decimal user id")
    return signWidgetPayload(key, {
      id: Number(userId),
      first_name: "Devnet",
      username: `dev${userId}`,
      auth_date: await chainNowSeconds(options.rpcUrl)
    })
  }

  const fedsocialSigner = async (body: Record<string, unknown>) => {
    const fid = body.fid
    if (typeof fid !== "number" || !DEVNET_SIGNER_FIDS.includes(fid))
      throw new BadRequest(`fid: the devnet signer holds fids ${DEVNET_SIGNER_FIDS.join(", ")}`)
    const expirationTime = new Date(text(body.expirationTime, "expirationTime", 40))
    if (Number.isNaN(expirationTime.getTime()))
      throw new BadRequest("expirationTime: expected an ISO 8601 time")
    const custody = devnetAccount(fid - 1000)
    const issuedAt = new Date((await chainNowSeconds(options.rpcUrl)) * 1000)
    let message: string
    try {
      message = createSiweMessage({
        domain: text(body.domain, "domain"),
        address: custody.address,
        statement: "Farcaster Auth",
        uri: text(body.uri, "uri"),
        version: "1",
        chainId: 10,
        nonce: text(body.nonce, "nonce", 100),
        issuedAt,
        expirationTime,
        resources: [`farcaster://fid/${fid}`]
      })
    } catch {
      throw new BadRequest("domain, uri or nonce: not valid in a sign-in message")
    }
    return { message, signature: await custody.signMessage({ message }) }
  }

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const path = new URL(req.url ?? "/", "http://wallet").pathname
    if (req.method === "GET" || req.method === "HEAD") {
      req.resume()
      switch (path) {
        case "/":
        case "/after-login":
          return send(res, 200, "text/html; charset=utf-8", html, { "content-security-policy": csp })
        case "/wallet.js":
          return send(res, 200, "text/javascript; charset=utf-8", module)
        case "/config.json":
          return send(res, 200, "application/json; charset=utf-8", config)
        default:
          return json(res, 404, { error: "not found", code: "not_found" })
      }
    }
    if (
      req.method === "POST" &&
      (path === "/devnet/messenger-widget" || path === "/devnet/fedsocial-signer")
    ) {
      const body = await readJson(req)
      return json(
        res,
        200,
        path === "/devnet/messenger-widget" ? await messengerWidget(body) : await fedsocialSigner(body)
      )
    }
    req.resume()
    return json(res, 405, { error: "method not allowed", code: "method_not_allowed" })
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (res.headersSent || res.destroyed) return
      if (error instanceof BadRequest) json(res, 400, { error: error.message, code: "bad_request" })
      else if (error instanceof ChainDown)
        json(res, 503, {
          error: "the devnet chain does not answer: is `npm run devnet` running?",
          code: "unavailable"
        })
      else json(res, 500, { error: "the devnet page server failed", code: "internal" })
    })
  })
  const { port } = await listen(server, options.port ?? 0, options.host ?? "127.0.0.1")
  const url = `http://localhost:${port}`
  config = JSON.stringify({
    ...committee,
    relayerUrl: options.relayerUrl,
    rpcUrl: options.rpcUrl,
    fids: DEVNET_SIGNER_FIDS
  })
  return { url, close: closeOnce(server) }
}

/** The Effect flavour: a scoped resource closed with its scope. */
export const walletPage = (options: WalletPageOptions): Effect.Effect<WalletPage, Error, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: () => startWalletPage(options),
      catch: (cause) => (cause instanceof Error ? cause : new Error(String(cause)))
    }),
    (page) => Effect.promise(() => page.close())
  )
