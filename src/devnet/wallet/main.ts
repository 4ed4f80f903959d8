/**
 * The devnet wallet page (docs/getting-started.md "The wallet page"): a recipient's whole journey
 * in a browser, written as a wallet should write it (docs/attestor.md "Writing a client"):
 *
 * - a stealth key per visit, kept in this tab's `sessionStorage` (devnet only);
 * - a login secret drawn per login, its challenge sent with the start, the secret kept in
 *   `sessionStorage` until the provider sends the browser back;
 * - a `#attest=` read only when this page has a login of its own pending (`loginLanding`): a token
 *   it did not ask for is refused and nothing is sent with it;
 * - every bind checked to be for this page's key (`bindsFor`) before anything is proposed;
 * - every refusal shown with the service's `error` and `code`.
 *
 * It talks to the attestor and the relayer named by `/config.json` and to the devnet's own
 * stand-ins on this page's origin (the messenger widget, the fedsocial signer); nothing else.
 */
import { Effect, Either, Schema } from "effect"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { BindResponse, type LoginSecret } from "../../../schema/attestor.js"
import { bindsFor, loginLanding, newLoginSecret, type PendingLogin } from "../../client.js"

interface WalletConfig {
  readonly attestorUrl: string
  readonly relayerUrl: string
  readonly fids: ReadonlyArray<number>
}

interface Session {
  readonly session: string
  readonly loginSecret: LoginSecret
  readonly stealthOwner: `0x${string}`
  readonly platform: string
  readonly userId: string
}

interface Escrow {
  readonly id: string
  readonly registered: boolean
  readonly owner: string | null
  readonly pendingOwner: string | null
  readonly pendingReadyAt: string | null
  readonly visibility: string
}

const OAUTH_PLATFORMS = ["microblog", "codehost", "community"]
const KEY = "devnet-wallet.stealthKey"
const PENDING = "devnet-wallet.pendingLogin"
const SESSION = "devnet-wallet.session"

// ---------------------------------------------------------------------------------------------
// What went wrong, as a person reads it: never a stack trace.

/** A service's refusal: its status, `error` and `code`. */
class Refusal extends Error {
  constructor(
    readonly where: string,
    readonly error: string,
    readonly code: string
  ) {
    super(`${where} was refused: ${error} (code ${code})`)
  }
}

/** A service that does not answer at all. */
class Unreachable extends Error {
  constructor(service: string, url: string) {
    super(
      `The ${service} at ${url} does not answer. Is \`npm run devnet\` running? Start it and reload this page.`
    )
  }
}

const byId = <T extends HTMLElement>(id: string): T => document.getElementById(id) as T

const showStatus = (text: string) => {
  byId("status").textContent = text
}

const showRefusal = (text: string | undefined) => {
  const box = byId("refusal")
  box.hidden = text === undefined
  box.textContent = text ?? ""
}

const explain = (error: unknown): string =>
  error instanceof Refusal || error instanceof Unreachable
    ? error.message
    : `Something went wrong: ${error instanceof Error ? error.message : String(error)}`

/** Runs one action of the page: its failure is shown, never thrown. */
const act = (action: () => Promise<void>) => async () => {
  showRefusal(undefined)
  try {
    await action()
  } catch (error) {
    showStatus("")
    showRefusal(explain(error))
  }
}

// ---------------------------------------------------------------------------------------------
// The services

let config: WalletConfig

const call = async (
  service: "attestor" | "relayer" | "devnet",
  path: string,
  body?: unknown
): Promise<unknown> => {
  const base = service === "attestor" ? config.attestorUrl : service === "relayer" ? config.relayerUrl : ""
  const where = `${body === undefined ? "GET" : "POST"} ${path}`
  let response: Response
  try {
    response = await fetch(
      `${base}${path}`,
      body === undefined
        ? {}
        : { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) }
    )
  } catch {
    throw new Unreachable(service === "devnet" ? "devnet page server" : service, base || location.origin)
  }
  const text = await response.text()
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  if (!response.ok) {
    const refusal = (json ?? {}) as { error?: unknown; code?: unknown }
    throw new Refusal(
      `${where} (${service})`,
      typeof refusal.error === "string" ? refusal.error : `HTTP ${response.status}`,
      typeof refusal.code === "string" ? refusal.code : "none"
    )
  }
  return json
}

// ---------------------------------------------------------------------------------------------
// This visit's key and login state, in sessionStorage

const stealthKey = (): `0x${string}` => {
  const kept = sessionStorage.getItem(KEY)
  if (kept !== null && /^0x[0-9a-f]{64}$/.test(kept)) return kept as `0x${string}`
  const key = generatePrivateKey()
  sessionStorage.setItem(KEY, key)
  return key
}

const stealthOwner = privateKeyToAccount(stealthKey()).address

const readJson = <A>(key: string): A | undefined => {
  const text = sessionStorage.getItem(key)
  if (text === null) return undefined
  try {
    return JSON.parse(text) as A
  } catch {
    return undefined
  }
}

const same = (a: string | null | undefined, b: string) => a?.toLowerCase() === b.toLowerCase()

const short = (hex: string) => `${hex.slice(0, 10)}…${hex.slice(-6)}`

// ---------------------------------------------------------------------------------------------
// Logins

const redirect = () => `${location.origin}/after-login`

/** Starts a redirect login: the secret kept, its challenge sent, the browser sent to the provider. */
const oauthLogin = (platform: string) =>
  act(async () => {
    const { loginSecret, loginChallenge } = newLoginSecret()
    const pending: PendingLogin & { readonly platform: string } = { loginSecret, stealthOwner, platform }
    sessionStorage.setItem(PENDING, JSON.stringify(pending))
    const start = { stealthOwner, redirect: redirect(), loginChallenge }
    if (byId<HTMLInputElement>("legacy-start").checked) {
      location.assign(`${config.attestorUrl}/v1/oauth/${platform}/start?${new URLSearchParams(start)}`)
      return
    }
    showStatus(`Starting the ${platform} login…`)
    const started = (await call("attestor", `/v1/oauth/${platform}/start`, start)) as { url: string }
    location.assign(started.url)
  })

/** A session answered in a body, checked to be for this page's key. */
const sessionFrom = (answer: unknown, loginSecret: LoginSecret, platform: string): Session => {
  const {
    session,
    userId,
    stealthOwner: owner
  } = answer as {
    session: string
    userId: string
    stealthOwner: string
  }
  if (!same(owner, stealthOwner))
    throw new Refusal(
      "the login",
      `the session is bound to ${owner}, not to this page's key`,
      "foreign_owner"
    )
  return { session, loginSecret, stealthOwner, platform, userId }
}

const messengerLogin = act(async () => {
  const userId = byId<HTMLInputElement>("messenger-user").value.trim()
  const { loginSecret, loginChallenge } = newLoginSecret()
  showStatus("The messenger widget signs you in…")
  const auth = await call("devnet", "/devnet/messenger-widget", { userId })
  const answer = await call("attestor", "/v1/oauth/messenger/verify", {
    auth,
    stealthOwner,
    loginChallenge
  })
  await loggedIn(sessionFrom(answer, loginSecret, "messenger"))
})

const fedsocialLogin = act(async () => {
  const fid = Number(byId<HTMLSelectElement>("fedsocial-fid").value)
  const { loginSecret, loginChallenge } = newLoginSecret()
  showStatus(`Signing in as fid ${fid}…`)
  const started = (await call("attestor", "/v1/oauth/fedsocial/start", {
    stealthOwner,
    loginChallenge
  })) as Record<string, string>
  const signed = await call("devnet", "/devnet/fedsocial-signer", { fid, ...started })
  const answer = await call("attestor", "/v1/oauth/fedsocial/verify", signed)
  await loggedIn(sessionFrom(answer, loginSecret, "fedsocial"))
})

/**
 * Where a redirect login comes back: the fragment is read only for a login this page started and
 * still has pending; then it is wiped from the address bar, whatever it held.
 */
const landing = async (): Promise<void> => {
  const fragment = location.hash
  if (fragment.length <= 1) return
  history.replaceState(null, "", location.pathname)
  const pending = readJson<PendingLogin & { readonly platform: string }>(PENDING)
  sessionStorage.removeItem(PENDING)
  const landed = loginLanding(`${location.origin}/${fragment}`, pending)
  if (landed === undefined) {
    if (/(^#|&)attest=/.test(fragment))
      throw new Refusal(
        "this page's address",
        "it carried a login token (#attest=) from a login this page did not start: the token was ignored and nothing was sent with it. Log in from this page",
        "unsolicited_login"
      )
    return
  }
  if (landed._tag === "Refused")
    throw new Refusal(
      `the ${pending?.platform ?? ""} login`,
      "the provider or the attestor refused it",
      landed.code
    )
  if (!same(landed.login.stealthOwner, stealthOwner))
    throw new Refusal("the login", "it was started for another key than this visit's", "foreign_owner")
  await loggedIn({
    session: landed.session,
    loginSecret: landed.login.loginSecret,
    stealthOwner,
    platform: pending?.platform ?? "",
    userId: ""
  })
}

// ---------------------------------------------------------------------------------------------
// Escrows, binds and proposals

let current: Session | undefined

const loggedIn = async (session: Session) => {
  current = session
  sessionStorage.setItem(SESSION, JSON.stringify(session))
  showStatus(
    `Logged in with ${session.platform}${session.userId === "" ? "" : ` as user ${session.userId}`}.`
  )
  byId("account").hidden = false
  byId("account-user").textContent =
    `${session.platform}${session.userId === "" ? "" : ` user ${session.userId}`}`
  await listEscrows()
}

const fetchEscrows = async (session: Session): Promise<ReadonlyArray<Escrow>> =>
  (
    (await call("attestor", "/v1/escrows", {
      session: session.session,
      loginSecret: session.loginSecret
    })) as { escrows: ReadonlyArray<Escrow> }
  ).escrows

const ownerCell = (owner: string | null) =>
  owner === null || /^0x0{40}$/.test(owner)
    ? "—"
    : same(owner, stealthOwner)
      ? `${short(owner)} (this page's key)`
      : short(owner)

const renderEscrows = (escrows: ReadonlyArray<Escrow>) => {
  const body = byId<HTMLTableSectionElement>("escrows")
  body.replaceChildren()
  if (escrows.length === 0) {
    const row = body.insertRow()
    const cell = row.insertCell()
    cell.colSpan = 7
    cell.textContent = "No escrow was launched to this user yet."
    return
  }
  for (const escrow of escrows) {
    const row = body.insertRow()
    row.dataset.escrow = escrow.id
    const cells = [
      escrow.id,
      escrow.registered ? "yes" : "no",
      ownerCell(escrow.owner),
      ownerCell(escrow.pendingOwner),
      escrow.pendingReadyAt === null ? "—" : new Date(Number(escrow.pendingReadyAt) * 1000).toLocaleString(),
      escrow.visibility
    ]
    for (const [i, text] of cells.entries()) {
      const cell = row.insertCell()
      if (i === 0) {
        const code = document.createElement("code")
        code.textContent = short(text)
        code.title = text
        cell.append(code)
      } else cell.textContent = text
      if (i === 3) cell.className = "pending-owner"
      if (i === 4) cell.className = "final-at"
    }
    const action = row.insertCell()
    if (escrow.pendingOwner === null && !same(escrow.owner, stealthOwner)) {
      const button = document.createElement("button")
      button.textContent = "Bind and propose"
      button.className = "bind"
      button.addEventListener(
        "click",
        act(() => bindAndPropose(escrow.id))
      )
      action.append(button)
    }
  }
}

const listEscrows = async () => {
  if (current === undefined) return
  renderEscrows(await fetchEscrows(current))
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const bindAndPropose = async (id: string) => {
  const session = current
  if (session === undefined) return
  showStatus("The attestor signs the bind…")
  const answer = await call("attestor", "/v1/bind", {
    session: session.session,
    loginSecret: session.loginSecret,
    ids: [id]
  })
  // Every signature must be for this page's key, or nothing is proposed.
  const decoded = Schema.decodeUnknownEither(BindResponse)(answer)
  if (Either.isLeft(decoded))
    throw new Refusal("POST /v1/bind (attestor)", "the answer is not a bind", "none")
  const checked = Effect.runSync(Effect.either(bindsFor(decoded.right.binds, stealthOwner)))
  if (Either.isLeft(checked))
    throw new Refusal("the bind", `${checked.left.message}: nothing proposed`, "foreign_bind")
  const raw = (answer as { binds: ReadonlyArray<Record<string, unknown>> }).binds.find(
    (bind) => bind.beneficiaryId === id
  )
  if (raw === undefined) throw new Refusal("POST /v1/bind (attestor)", "no signature for this escrow", "none")
  showStatus("The relayer proposes the bind…")
  const { txHash } = (await call("relayer", "/v1/propose-bind", {
    id: raw.beneficiaryId,
    newOwner: raw.newOwner,
    deadline: raw.deadline,
    signatures: [raw.signature],
    ...(raw.register === null ? {} : { register: raw.register })
  })) as { txHash: string }
  showStatus(`Proposed in ${short(txHash)}; waiting for it to be mined…`)
  for (let i = 0; ; i++) {
    const { status } = (await call("relayer", "/v1/tx-status", { txHash })) as { status: string }
    if (status === "success") break
    if (status === "reverted") throw new Refusal("the proposal", `transaction ${txHash} reverted`, "reverted")
    if (i >= 120) throw new Refusal("the proposal", `transaction ${txHash} is not mined yet`, status)
    await sleep(500)
  }
  for (let i = 0; i < 120; i++) {
    const escrows = await fetchEscrows(session)
    const escrow = escrows.find((e) => e.id === id)
    if (escrow !== undefined && same(escrow.pendingOwner, stealthOwner)) {
      renderEscrows(escrows)
      const finalAt = new Date(Number(escrow.pendingReadyAt) * 1000).toLocaleString()
      showStatus(`Bind proposed: this page's key is the pending owner, final at ${finalAt}.`)
      return
    }
    await sleep(500)
  }
  throw new Refusal(
    "the proposal",
    "the attestor does not show the pending bind yet: refresh later",
    "unavailable"
  )
}

// ---------------------------------------------------------------------------------------------
// Start

const start = async () => {
  byId("stealth-owner").textContent = stealthOwner
  let loaded: unknown
  try {
    loaded = await (await fetch("/config.json")).json()
  } catch {
    throw new Unreachable("devnet page server", location.origin)
  }
  config = loaded as WalletConfig
  // Read the fragment first: a token this page did not ask for is refused before anything else,
  // and the page goes on without it.
  let refused: unknown
  await landing().catch((error: unknown) => {
    refused = error
  })
  const info = (await call("attestor", "/v1/info")) as { platforms: ReadonlyArray<string> }
  const logins = byId("oauth-logins")
  for (const platform of OAUTH_PLATFORMS.filter((p) => info.platforms.includes(p))) {
    const button = document.createElement("button")
    button.textContent = `Log in with ${platform}`
    button.dataset.login = platform
    button.addEventListener("click", oauthLogin(platform))
    logins.append(button)
  }
  byId("messenger-widget").hidden = !info.platforms.includes("messenger")
  byId("fedsocial-signer").hidden = !info.platforms.includes("fedsocial")
  const fids = byId<HTMLSelectElement>("fedsocial-fid")
  for (const fid of config.fids) fids.add(new Option(String(fid), String(fid)))
  byId("messenger-login").addEventListener("click", messengerLogin)
  byId("fedsocial-login").addEventListener("click", fedsocialLogin)
  byId("refresh").addEventListener("click", act(listEscrows))
  byId("logout").addEventListener("click", () => {
    sessionStorage.removeItem(SESSION)
    current = undefined
    byId("account").hidden = true
    showStatus("Logged out.")
  })
  if (refused !== undefined) throw refused
  if (current === undefined) {
    const kept = readJson<Session>(SESSION)
    if (kept !== undefined && same(kept.stealthOwner, stealthOwner)) await loggedIn(kept)
  }
}

act(start)()
