/**
 * The devnet wallet page (docs/getting-started.md "The wallet page"): a recipient's whole journey
 * in a browser, written as a wallet should write it (docs/attestor.md "Writing a client"), with
 * every member of the attestor committee (docs/attestor.md "The committee"):
 *
 * - a stealth key per visit, kept in this tab's `sessionStorage` (devnet only);
 * - a login at every member, each with a login secret of its own drawn for it, its challenge sent
 *   with that member's start, the secret kept in `sessionStorage` with that member's session. The
 *   page logs in at every member it reaches, not only t of them: a member that attested this key
 *   vetoes a proposal to another key at the same bind nonce, so each login also guards the user;
 * - the messenger widget and the fedsocial signer need no redirect, so those logins go to each
 *   member in turn without leaving the page. An OAuth login is a redirect: the page starts it at
 *   one member, and when that member's callback lands it starts the next, member after member.
 *   One login pending at a time keeps the landing rule exact (a `#attest=` is read only for the
 *   one login this page has pending, `loginLanding`) and never leaves a started login's state to
 *   expire at the provider while the user consents at another member;
 * - each member's state shown: logged in, signed, refused with its code, down (no answer), or not
 *   asked yet;
 * - one deadline for every member (`committeeDeadline`, by the chain's time), the signatures
 *   collected and checked as the vault checks them (`collectBindSignatures`: each for this page's
 *   key, the current bind nonce, from a registered attestor), proposed through the relayer only
 *   with at least the threshold of them; with fewer, each member's reason and nothing proposed;
 * - a pending bind to a key that is not this page's shown as a warning with a "Contest" action
 *   that contests at every member the user is logged in at (docs/attestor.md "The committee",
 *   "What the wallet shows in the window");
 * - every refusal shown with the service's `error` and `code`.
 *
 * It talks to the attestors, the relayer and the chain's RPC named by `/config.json` and to the
 * devnet's own stand-ins on this page's origin (the messenger widget, the fedsocial signer).
 */
import { Effect, Either, Schema } from "effect"
import { createPublicClient, http } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import type { LoginChallenge, LoginSecret, SessionToken } from "../../../schema/attestor.js"
import { Address, Bytes32 } from "../../../schema/primitives.js"
import { ProposeBindRequest } from "../../../schema/relayer.js"
import {
  type Committee,
  type CommitteeMember,
  collectBindSignatures,
  committeeDeadline,
  committeeOf,
  feeVaultAbi,
  loginLanding,
  MEMBER_TIMEOUT_MS,
  type MemberOutcome,
  type MemberSession,
  newLoginSecret,
  type PendingLogin,
  proposeBindRequestOf
} from "../../client.js"

interface WalletConfig {
  /** The committee, as deployment.json lists it; or one `attestorUrl`. */
  readonly attestors?: ReadonlyArray<unknown>
  readonly attestorThreshold?: number
  readonly attestorUrl?: string
  readonly relayerUrl: string
  readonly rpcUrl: string
  readonly fids: ReadonlyArray<number>
}

/** What one member's login gave: a session, or the state it was left in. */
type MemberLogin =
  | { readonly _tag: "Session"; readonly session: string; readonly loginSecret: LoginSecret }
  | { readonly _tag: "Failed"; readonly state: MemberState }

interface Session {
  readonly stealthOwner: `0x${string}`
  readonly platform: string
  readonly userId: string
  /** Per member, in the committee's order; `urls` names the committee these belong to. */
  readonly members: ReadonlyArray<MemberLogin>
  readonly urls: ReadonlyArray<string>
}

/** An OAuth login pending at member `member`, the logins of the members before it done. */
interface PendingOAuth extends PendingLogin {
  readonly platform: string
  readonly member: number
  readonly legacy: boolean
  readonly done: ReadonlyArray<MemberLogin>
}

interface Escrow {
  readonly id: string
  readonly registered: boolean
  readonly owner: string | null
  readonly pendingOwner: string | null
  readonly pendingReadyAt: string | null
  readonly visibility: string
}

type StateKind = "not-asked" | "asking" | "logged-in" | "signed" | "contested" | "refused" | "down" | "failed"

interface MemberState {
  readonly kind: StateKind
  readonly text: string
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

/** Why nothing was proposed: every member's reason, as the committee helpers gave them. */
class NotProposed extends Error {}

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
  error instanceof Refusal || error instanceof Unreachable || error instanceof NotProposed
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
let committee: Committee

interface Service {
  readonly name: string
  readonly base: string
}

const relayer = (): Service => ({ name: "relayer", base: config.relayerUrl })
const devnet: Service = { name: "devnet page server", base: "" }

/** Member `i` as this page names it: "the attestor" alone, "attestor 2" in a committee. */
const memberName = (i: number) => (committee.members.length === 1 ? "attestor" : `attestor ${i + 1}`)
const memberService = (i: number): Service => ({ name: memberName(i), base: committee.members[i]?.url ?? "" })

const call = async (service: Service, path: string, body?: unknown): Promise<unknown> => {
  const where = `${body === undefined ? "GET" : "POST"} ${path}`
  let response: Response
  try {
    response = await fetch(`${service.base}${path}`, {
      signal: AbortSignal.timeout(MEMBER_TIMEOUT_MS),
      ...(body === undefined
        ? {}
        : { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
    })
  } catch {
    throw new Unreachable(service.name, service.base || location.origin)
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
      `${where} (${service.name})`,
      typeof refusal.error === "string" ? refusal.error : `HTTP ${response.status}`,
      typeof refusal.code === "string" ? refusal.code : "none"
    )
  }
  return json
}

const chain = () => createPublicClient({ transport: http(config.rpcUrl) })

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
// Each member's state

let states: Array<MemberState> = []

const setState = (i: number, kind: StateKind, text: string) => {
  states[i] = { kind, text }
  renderMembers()
}

const renderMembers = () => {
  const body = byId<HTMLTableSectionElement>("members")
  body.replaceChildren()
  for (const [i, member] of committee.members.entries()) {
    const row = body.insertRow()
    row.dataset.member = String(i + 1)
    const state = states[i] ?? { kind: "not-asked", text: "not asked yet" }
    for (const text of [String(i + 1), member.url, member.address, state.text])
      row.insertCell().textContent = text
    const cell = row.cells[3]
    if (cell !== undefined) {
      cell.className = "member-state"
      cell.dataset.state = state.kind
    }
  }
}

/** A member's failure to answer, as its state: down, or refused with its code. */
const failureState = (error: unknown): MemberState =>
  error instanceof Unreachable
    ? { kind: "down", text: "down (no answer)" }
    : error instanceof Refusal
      ? { kind: "refused", text: `refused: ${error.code} (${error.error})` }
      : { kind: "failed", text: error instanceof Error ? error.message : String(error) }

/** What a member did for a bind, as its state (`collectBindSignatures`'s outcome). */
const outcomeState = (outcome: MemberOutcome, before: MemberState | undefined): MemberState => {
  switch (outcome._tag) {
    case "Signed":
      return { kind: "signed", text: "signed" }
    case "NotAsked":
      // No session there: what its login found (down, refused) says more than "not asked".
      return before !== undefined && before.kind !== "logged-in"
        ? before
        : { kind: "not-asked", text: "not asked (no session)" }
    case "Down":
      return { kind: "down", text: "down (no answer)" }
    case "Refused":
      return { kind: "refused", text: `refused: ${outcome.code} (${outcome.reason})` }
    case "ForeignBind":
      return { kind: "failed", text: `signed for another key, ${outcome.newOwner}` }
    case "NotAttestor":
    case "Duplicate":
      return { kind: "failed", text: `${outcome._tag}: signed as ${outcome.signer}` }
    default:
      return { kind: "failed", text: `${outcome._tag}: ${outcome.reason}` }
  }
}

// ---------------------------------------------------------------------------------------------
// Logins, one per member

const redirect = () => `${location.origin}/after-login`

/** A session answered in a body, checked to be for this page's key. */
const sessionFrom = (answer: unknown, loginSecret: LoginSecret): MemberLogin => {
  const { session, stealthOwner: owner } = answer as { session: string; stealthOwner: string }
  if (!same(owner, stealthOwner))
    throw new Refusal(
      "the login",
      `the session is bound to ${owner}, not to this page's key`,
      "foreign_owner"
    )
  return { _tag: "Session", session, loginSecret }
}

/** One login at member `i` with a fresh secret; its outcome shown in the member's row. */
const loginAt = async (
  i: number,
  login: (service: Service, loginChallenge: LoginChallenge) => Promise<unknown>
): Promise<MemberLogin> => {
  const { loginSecret, loginChallenge } = newLoginSecret()
  setState(i, "asking", "logging in…")
  try {
    const kept = sessionFrom(await login(memberService(i), loginChallenge), loginSecret)
    setState(i, "logged-in", "logged in")
    return kept
  } catch (error) {
    const state = failureState(error)
    setState(i, state.kind, state.text)
    return { _tag: "Failed", state }
  }
}

/** The same login at each member in turn, without leaving the page. */
const loginAtEach = async (
  platform: string,
  userId: string,
  login: (service: Service, loginChallenge: LoginChallenge) => Promise<unknown>
) => {
  const members: Array<MemberLogin> = []
  for (const i of committee.members.keys()) members.push(await loginAt(i, login))
  await finishLogin({ stealthOwner, platform, userId, members, urls: committee.members.map((m) => m.url) })
}

const messengerLogin = act(async () => {
  const userId = byId<HTMLInputElement>("messenger-user").value.trim()
  showStatus("The messenger widget signs you in…")
  const auth = await call(devnet, "/devnet/messenger-widget", { userId })
  await loginAtEach("messenger", userId, (service, loginChallenge) =>
    call(service, "/v1/oauth/messenger/verify", { auth, stealthOwner, loginChallenge })
  )
})

const fedsocialLogin = act(async () => {
  const fid = Number(byId<HTMLSelectElement>("fedsocial-fid").value)
  showStatus(`Signing in as fid ${fid}…`)
  await loginAtEach("fedsocial", String(fid), async (service, loginChallenge) => {
    const started = (await call(service, "/v1/oauth/fedsocial/start", {
      stealthOwner,
      loginChallenge
    })) as Record<string, string>
    const signed = await call(devnet, "/devnet/fedsocial-signer", { fid, ...started })
    return call(service, "/v1/oauth/fedsocial/verify", signed)
  })
})

/**
 * Starts the redirect login at the first member from `from` on that starts it, keeping its secret
 * as the one pending login; with none left, the login is done.
 */
const oauthFrom = async (
  platform: string,
  from: number,
  legacy: boolean,
  done: ReadonlyArray<MemberLogin>
) => {
  const logins = [...done]
  for (let i = from; i < committee.members.length; i++) {
    const { loginSecret, loginChallenge } = newLoginSecret()
    const pending: PendingOAuth = { loginSecret, stealthOwner, platform, member: i, legacy, done: logins }
    const start = { stealthOwner, redirect: redirect(), loginChallenge }
    const service = memberService(i)
    showStatus(`Starting the ${platform} login at ${memberName(i)}…`)
    setState(i, "asking", "logging in…")
    try {
      // The deprecated GET start is a navigation: the member is asked for its info first, so one
      // that is down is skipped rather than leaving the browser on an error page.
      const url = legacy
        ? await call(service, "/v1/info").then(
            () => `${service.base}/v1/oauth/${platform}/start?${new URLSearchParams(start)}`
          )
        : ((await call(service, `/v1/oauth/${platform}/start`, start)) as { url: string }).url
      sessionStorage.setItem(PENDING, JSON.stringify(pending))
      location.assign(url)
      return
    } catch (error) {
      const state = failureState(error)
      setState(i, state.kind, state.text)
      logins.push({ _tag: "Failed", state })
    }
  }
  sessionStorage.removeItem(PENDING)
  await finishLogin({
    stealthOwner,
    platform,
    userId: "",
    members: logins,
    urls: committee.members.map((m) => m.url)
  })
}

const oauthLogin = (platform: string) =>
  act(() => oauthFrom(platform, 0, byId<HTMLInputElement>("legacy-start").checked, []))

/**
 * Where a redirect login comes back: the fragment is read only for a login this page started and
 * still has pending; then it is wiped from the address bar, whatever it held, and the login goes
 * on at the next member.
 */
const landing = async (): Promise<void> => {
  const fragment = location.hash
  if (fragment.length <= 1) return
  history.replaceState(null, "", location.pathname)
  const pending = readJson<PendingOAuth>(PENDING)
  sessionStorage.removeItem(PENDING)
  const landed = loginLanding(`${location.origin}/${fragment}`, pending)
  if (landed === undefined || pending === undefined) {
    if (/(^#|&)attest=/.test(fragment))
      throw new Refusal(
        "this page's address",
        "it carried a login token (#attest=) from a login this page did not start: the token was ignored and nothing was sent with it. Log in from this page",
        "unsolicited_login"
      )
    return
  }
  restoreStates(pending.done)
  const i = pending.member
  let login: MemberLogin
  if (landed._tag === "Refused")
    login = { _tag: "Failed", state: { kind: "refused", text: `refused: ${landed.code}` } }
  else if (!same(landed.login.stealthOwner, stealthOwner))
    login = {
      _tag: "Failed",
      state: { kind: "refused", text: "refused: foreign_owner (another key's login)" }
    }
  else login = { _tag: "Session", session: landed.session, loginSecret: landed.login.loginSecret }
  if (login._tag === "Session") setState(i, "logged-in", "logged in")
  else setState(i, login.state.kind, login.state.text)
  await oauthFrom(pending.platform, i + 1, pending.legacy, [...pending.done, login])
}

const restoreStates = (logins: ReadonlyArray<MemberLogin>) => {
  states = logins.map((login) =>
    login._tag === "Session" ? { kind: "logged-in", text: "logged in" } : login.state
  )
  renderMembers()
}

// ---------------------------------------------------------------------------------------------
// Escrows, binds, proposals and contests

let current: Session | undefined

const sessionsOf = (session: Session): ReadonlyArray<MemberSession | undefined> =>
  session.members.map((login) =>
    login._tag === "Session"
      ? { session: login.session as SessionToken, loginSecret: login.loginSecret }
      : undefined
  )

/** A login with no session at any member is refused, with each member's reason. */
const finishLogin = async (session: Session) => {
  if (session.members.every((login) => login._tag === "Failed")) {
    const reasons = session.members.map((login, i) =>
      login._tag === "Failed" ? `${memberName(i)}: ${login.state.text}` : ""
    )
    throw new Refusal(
      `the ${session.platform} login`,
      `no attestor logged you in (${reasons.join("; ")})`,
      "no_session"
    )
  }
  await loggedIn(session)
}

const loggedIn = async (session: Session) => {
  current = session
  sessionStorage.setItem(SESSION, JSON.stringify(session))
  const at = session.members.filter((login) => login._tag === "Session").length
  const where = committee.members.length === 1 ? "" : ` at ${at} of ${committee.members.length} attestors`
  showStatus(
    `Logged in with ${session.platform}${session.userId === "" ? "" : ` as user ${session.userId}`}${where}.`
  )
  byId("account").hidden = false
  byId("account-user").textContent =
    `${session.platform}${session.userId === "" ? "" : ` user ${session.userId}`}`
  await listEscrows()
}

/** The escrows as the first member with a session that answers lists them. */
const fetchEscrows = async (session: Session): Promise<ReadonlyArray<Escrow>> => {
  let last: unknown
  for (const [i, login] of session.members.entries()) {
    if (login._tag !== "Session") continue
    try {
      const answer = await call(memberService(i), "/v1/escrows", {
        session: login.session,
        loginSecret: login.loginSecret
      })
      return (answer as { escrows: ReadonlyArray<Escrow> }).escrows
    } catch (error) {
      last = error
    }
  }
  throw last ?? new Refusal("the escrows", "no attestor session", "no_session")
}

const ownerCell = (owner: string | null) =>
  owner === null || /^0x0{40}$/.test(owner)
    ? "—"
    : same(owner, stealthOwner)
      ? `${short(owner)} (this page's key)`
      : short(owner)

const timeLeft = (readyAt: string | null) => {
  const seconds = Number(readyAt ?? 0) - Math.floor(Date.now() / 1000)
  if (seconds <= 0) return "it can be finalized now"
  const hours = Math.floor(seconds / 3600)
  const minutes = Math.ceil((seconds % 3600) / 60)
  return `final in ${hours > 0 ? `${hours} h ` : ""}${minutes} min`
}

const actionButton = (text: string, className: string, action: () => Promise<void>) => {
  const button = document.createElement("button")
  button.textContent = text
  button.className = className
  button.addEventListener("click", act(action))
  return button
}

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
    if (escrow.pendingOwner !== null && !same(escrow.pendingOwner, stealthOwner)) {
      // docs/attestor.md "What the wallet shows in the window": someone else's key is pending.
      const warning = document.createElement("div")
      warning.className = "warning"
      warning.textContent = `A bind to another key is pending (${timeLeft(escrow.pendingReadyAt)}). Not yours? Contest it.`
      action.append(
        warning,
        actionButton("Contest", "contest", () => contest(escrow.id))
      )
    } else if (escrow.pendingOwner === null && !same(escrow.owner, stealthOwner))
      action.append(actionButton("Bind and propose", "bind", () => bindAndPropose(escrow.id)))
  }
}

const listEscrows = async () => {
  if (current === undefined) return
  renderEscrows(await fetchEscrows(current))
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Now by the chain: anvil stamps its next block with the time a skipped bind delay moved ahead. */
const chainNow = async (): Promise<number> => {
  const pending = await chain().getBlock({ blockTag: "pending" })
  return Math.max(Math.floor(Date.now() / 1000), Number(pending.timestamp))
}

/** Every member's `/v1/info` that answers: the deadlines they accept, the chain and vault. */
const memberInfos = async () => {
  const answers = await Promise.all(
    committee.members.map((_, i) =>
      call(memberService(i), "/v1/info").then(
        (info) => info as { bindDeadlineSeconds: number; chainId: number; vault: `0x${string}` },
        () => undefined
      )
    )
  )
  return answers.flatMap((info) => (info === undefined ? [] : [info]))
}

const bindAndPropose = async (id: string) => {
  const session = current
  if (session === undefined) return
  showStatus("The attestors sign the bind…")
  const infos = await memberInfos()
  const first = infos[0]
  if (first === undefined) throw new Unreachable(memberName(0), committee.members[0]?.url ?? "")
  const vault = chain()
  const [now, bindNonce] = await Promise.all([
    chainNow(),
    vault.readContract({
      address: first.vault,
      abi: feeVaultAbi,
      functionName: "bindNonces",
      args: [id as `0x${string}`]
    })
  ])
  const deadline = await Effect.runPromise(
    committeeDeadline(
      infos.map((info) => info.bindDeadlineSeconds),
      now
    )
  )
  const collected = await Effect.runPromise(
    Effect.either(
      collectBindSignatures({
        committee,
        sessions: sessionsOf(session),
        owner: Schema.decodeSync(Address)(stealthOwner),
        id: Schema.decodeUnknownSync(Bytes32)(id),
        bindNonce,
        deadline,
        chain: { chainId: first.chainId, vault: first.vault },
        isAttestor: (signer) =>
          vault.readContract({
            address: first.vault,
            abi: feeVaultAbi,
            functionName: "isAttestor",
            args: [signer]
          })
      })
    )
  )
  const outcomes = Either.isLeft(collected) ? collected.left.outcomes : collected.right.outcomes
  for (const [i, outcome] of outcomes.entries()) {
    const state = outcomeState(outcome, states[i])
    setState(i, state.kind, state.text)
  }
  // Fewer than the threshold: every member's reason, and nothing proposed.
  if (Either.isLeft(collected)) throw new NotProposed(`${collected.left.message}. Nothing was proposed.`)
  showStatus(`The relayer proposes the bind with ${collected.right.signatures.length} signatures…`)
  const request = Schema.encodeSync(ProposeBindRequest)(proposeBindRequestOf(collected.right))
  const { txHash } = (await call(relayer(), "/v1/propose-bind", request)) as { txHash: string }
  showStatus(`Proposed in ${short(txHash)}; waiting for it to be mined…`)
  for (let i = 0; ; i++) {
    const { status } = (await call(relayer(), "/v1/tx-status", { txHash })) as { status: string }
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

/** Contests the escrow at every member the user is logged in at (docs/attestor.md "The committee"). */
const contest = async (id: string) => {
  const session = current
  if (session === undefined) return
  showStatus("Contesting at every attestor you are logged in at…")
  let contested = 0
  for (const [i, login] of session.members.entries()) {
    if (login._tag !== "Session") continue
    try {
      await call(memberService(i), "/v1/bind", {
        session: login.session,
        loginSecret: login.loginSecret,
        ids: [id],
        contest: true
      })
      contested++
      setState(i, "contested", "contested")
    } catch (error) {
      const state = failureState(error)
      setState(i, state.kind, state.text)
    }
  }
  if (contested === 0)
    throw new Refusal("the contest", "no attestor you are logged in at took it", "not_contested")
  showStatus(
    `Contested at ${contested} of ${committee.members.length} attestors: a member with AUTO_VETO vetoes the pending bind.`
  )
  await listEscrows()
}

// ---------------------------------------------------------------------------------------------
// Start

/** The committee of `/config.json`; one `attestorUrl` is a committee of one, its address from its `/v1/info`. */
const loadCommittee = async (): Promise<Committee> => {
  if (config.attestors !== undefined) return Effect.runPromise(committeeOf(config))
  const service: Service = { name: "attestor", base: config.attestorUrl ?? "" }
  const info = (await call(service, "/v1/info")) as Pick<CommitteeMember, "hintPublicKey"> & {
    attestor: CommitteeMember["address"]
  }
  return {
    members: [{ url: service.base, address: info.attestor, hintPublicKey: info.hintPublicKey }],
    threshold: 1
  }
}

/** The platforms of the first member that answers; a committee none of whose members answers stops here. */
const platforms = async (): Promise<ReadonlyArray<string>> => {
  let first: unknown
  for (const i of committee.members.keys()) {
    try {
      const info = (await call(memberService(i), "/v1/info")) as { platforms: ReadonlyArray<string> }
      return info.platforms
    } catch (error) {
      first ??= error
      const state = failureState(error)
      setState(i, state.kind, state.text)
    }
  }
  throw first
}

const start = async () => {
  byId("stealth-owner").textContent = stealthOwner
  let loaded: unknown
  try {
    loaded = await (await fetch("/config.json")).json()
  } catch {
    throw new Unreachable("devnet page server", location.origin)
  }
  config = loaded as WalletConfig
  committee = await loadCommittee()
  byId("threshold").textContent =
    `A bind needs ${committee.threshold} of these ${committee.members.length} attestors' signatures.`
  renderMembers()
  // Read the fragment first: a token this page did not ask for is refused before anything else,
  // and the page goes on without it.
  let refused: unknown
  await landing().catch((error: unknown) => {
    refused = error
  })
  const offered = await platforms()
  const logins = byId("oauth-logins")
  for (const platform of OAUTH_PLATFORMS.filter((p) => offered.includes(p))) {
    const button = document.createElement("button")
    button.textContent = `Log in with ${platform}`
    button.dataset.login = platform
    button.addEventListener("click", oauthLogin(platform))
    logins.append(button)
  }
  byId("messenger-widget").hidden = !offered.includes("messenger")
  byId("fedsocial-signer").hidden = !offered.includes("fedsocial")
  const fids = byId<HTMLSelectElement>("fedsocial-fid")
  for (const fid of config.fids) fids.add(new Option(String(fid), String(fid)))
  byId("messenger-login").addEventListener("click", messengerLogin)
  byId("fedsocial-login").addEventListener("click", fedsocialLogin)
  byId("refresh").addEventListener("click", act(listEscrows))
  byId("logout").addEventListener("click", () => {
    sessionStorage.removeItem(SESSION)
    current = undefined
    states = []
    renderMembers()
    byId("account").hidden = true
    showStatus("Logged out.")
  })
  if (refused !== undefined) throw refused
  if (current === undefined) {
    const kept = readJson<Session>(SESSION)
    const urls = committee.members.map((m) => m.url)
    if (kept !== undefined && same(kept.stealthOwner, stealthOwner) && kept.urls?.join() === urls.join()) {
      restoreStates(kept.members)
      await loggedIn(kept)
    }
  }
}

act(start)()
