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
 * - the journey's end: each escrow's balance per asset (the relayer's `GET /v1/accounts`), the time
 *   left until a proposed bind is final, a "Finalize" button once it is due (`POST
 *   /v1/finalize-bind`), and a relayed claim of a balance to an address the user types: the
 *   relayer's fee (`GET /v1/quote`) shown before the page's key signs the EIP-712 `Claim`, then the
 *   transaction followed (`POST /v1/tx-status`) until it is mined;
 * - every time by the chain's clock: the devnet's chain runs ahead of this machine once a bind delay
 *   was skipped (docs/protocol.md §9 "The devnet's clock"), so time left is counted on the chain and
 *   "final at" is told on this machine's clock;
 * - every refusal shown with the service's `error` and `code`.
 *
 * It talks to the attestors, the relayer (through the typed client of src/client.ts) and the
 * chain's RPC named by `/config.json` and to the
 * devnet's own stand-ins on this page's origin (the messenger widget, the fedsocial signer).
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import { Effect, Either, Schema } from "effect"
import {
  createPublicClient,
  encodeAbiParameters,
  erc20Abi,
  formatUnits,
  type Hex,
  http,
  isAddress,
  keccak256
} from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import type { LoginChallenge, LoginSecret, SessionToken } from "../../../schema/attestor.js"
import { vaultDomain, vaultTypes } from "../../../schema/eip712.js"
import { errorCatalog } from "../../../schema/errors.js"
import { ZERO_ADDRESS } from "../../../schema/ids.js"
import { Address, Bytes32 } from "../../../schema/primitives.js"
import {
  type Account,
  ClaimRequest,
  FinalizeBindRequest,
  QuoteQuery,
  TxStatusRequest
} from "../../../schema/relayer.js"
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
  proposeBindRequestOf,
  type RelayerClient,
  relayerFetchClient
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

let relayerClient: Promise<RelayerClient> | undefined

/**
 * One call of the relayer's typed client (src/client.ts): its answer, or its refusal as the
 * service's `error` and `code`. Answers are never taken from the browser's cache: `GET
 * /v1/accounts` may be cached 15 s, and a balance must show as soon as it changed.
 */
const relayerCall = async <A, E>(
  where: string,
  request: (relayer: RelayerClient) => Effect.Effect<A, E>
): Promise<A> => {
  relayerClient ??= Effect.runPromise(relayerFetchClient(config.relayerUrl))
  const answer = await Effect.runPromise(
    request(await relayerClient).pipe(
      Effect.timeout(MEMBER_TIMEOUT_MS),
      Effect.provideService(FetchHttpClient.RequestInit, { cache: "no-cache" }),
      Effect.either
    )
  )
  if (Either.isRight(answer)) return answer.right
  throw relayerRefusal(where, answer.left)
}

/** A typed client's failure as the page tells it: a refusal with its code, or the relayer down. */
const relayerRefusal = (where: string, error: unknown): Error => {
  const { _tag: tag, message } = error as { readonly _tag?: unknown; readonly message?: unknown }
  if (typeof tag === "string" && tag in errorCatalog)
    return new Refusal(
      `${where} (relayer)`,
      String(message),
      errorCatalog[tag as keyof typeof errorCatalog].code
    )
  if (tag === "RequestError" || tag === "TimeoutException")
    return new Unreachable("relayer", config.relayerUrl)
  const status = (error as { readonly response?: { readonly status?: number } }).response?.status
  return new Refusal(
    `${where} (relayer)`,
    status === undefined ? "its answer was not understood" : `HTTP ${status}`,
    "none"
  )
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

// ---------------------------------------------------------------------------------------------
// The chain's clock (docs/protocol.md §9 "The devnet's clock")

/** How far (s) the chain's clock runs ahead of this machine's, as last read. */
let chainLead = 0

/** Now by the chain: anvil stamps its next block with the time a skipped bind delay moved ahead. */
const chainNow = async (): Promise<number> => {
  const pending = await chain().getBlock({ blockTag: "pending" })
  const now = Math.max(Math.floor(Date.now() / 1000), Number(pending.timestamp))
  chainLead = now - Math.floor(Date.now() / 1000)
  return now
}

/** Seconds until `readyAt` (unix seconds on the chain), by the chain's clock. */
const secondsLeft = (readyAt: string | null) =>
  Number(readyAt ?? 0) - (Math.floor(Date.now() / 1000) + chainLead)

const timeLeft = (readyAt: string | null) => {
  const seconds = secondsLeft(readyAt)
  if (seconds <= 0) return "it can be finalized now"
  const minutes = Math.ceil(seconds / 60)
  const [hours, rest] = [Math.floor(minutes / 60), minutes % 60]
  return `final in ${[hours > 0 ? `${hours} h` : "", rest > 0 ? `${rest} min` : ""].filter(Boolean).join(" ")}`
}

/** When a chain time is, on this machine's clock: what "final at" means to the person reading it. */
const finalAt = (readyAt: string) => new Date((Number(readyAt) - chainLead) * 1000).toLocaleString()

// ---------------------------------------------------------------------------------------------
// Balances (the relayer's GET /v1/accounts) and the assets they are in

interface AssetInfo {
  readonly symbol: string
  readonly decimals: number
}

const assetInfos = new Map<string, Promise<AssetInfo>>()

/** An asset's symbol and decimals, read once from its ERC-20 contract. */
const assetInfo = (asset: string): Promise<AssetInfo> => {
  let info = assetInfos.get(asset)
  if (info === undefined) {
    const token = { address: asset as Hex, abi: erc20Abi } as const
    info = Promise.all([
      chain().readContract({ ...token, functionName: "symbol" }),
      chain().readContract({ ...token, functionName: "decimals" })
    ]).then(([symbol, decimals]) => ({ symbol, decimals }))
    assetInfos.set(asset, info)
  }
  return info
}

const amountText = (amount: bigint, info: AssetInfo) => `${formatUnits(amount, info.decimals)} ${info.symbol}`

/** The relayer's indexed accounts by id, once its list covers `block` (docs/relayer.md "GET /v1/accounts"). */
const fetchAccounts = async (block = 0): Promise<ReadonlyMap<string, Account>> => {
  for (let i = 0; ; i++) {
    const answer = await relayerCall("GET /v1/accounts", (relayer) =>
      relayer.accounts.accounts({ headers: {} })
    )
    if (answer.block >= block)
      return new Map(answer.accounts.map((account) => [account.id.toLowerCase(), account]))
    if (i >= 120)
      throw new Refusal(
        "GET /v1/accounts",
        `the relayer has not indexed block ${block} yet: refresh later`,
        "unavailable"
      )
    await sleep(500)
  }
}

/** An escrow's non-zero balances, each with its asset's symbol and decimals. */
const balancesOf = async (account: Account | undefined) => {
  const balances = Object.entries(account?.balances ?? {}).filter(([, amount]) => BigInt(amount) > 0n)
  return Promise.all(
    balances.map(async ([asset, amount]) => ({ asset, amount: BigInt(amount), info: await assetInfo(asset) }))
  )
}

type Balances = Awaited<ReturnType<typeof balancesOf>>

// ---------------------------------------------------------------------------------------------
// The escrows table

const actionButton = (text: string, className: string, action: () => Promise<void>) => {
  const button = document.createElement("button")
  button.textContent = text
  button.className = className
  button.addEventListener("click", act(action))
  return button
}

const finalAtText = (escrow: Escrow) =>
  escrow.pendingReadyAt === null
    ? "—"
    : `${finalAt(escrow.pendingReadyAt)} (${timeLeft(escrow.pendingReadyAt)})`

const balanceCell = (cell: HTMLTableCellElement, balances: Balances) => {
  cell.className = "balance"
  if (balances.length === 0) cell.textContent = "0"
  for (const { asset, amount, info } of balances) {
    const line = document.createElement("div")
    line.dataset.asset = asset
    line.textContent = amountText(amount, info)
    cell.append(line)
  }
}

/** What the user can do with an escrow: contest, bind, finalize once due, or claim its balances. */
const actionCell = (cell: HTMLTableCellElement, escrow: Escrow, balances: Balances) => {
  if (escrow.pendingOwner !== null && !same(escrow.pendingOwner, stealthOwner)) {
    // docs/attestor.md "What the wallet shows in the window": someone else's key is pending.
    const warning = document.createElement("div")
    warning.className = "warning"
    warning.textContent = `A bind to another key is pending (${timeLeft(escrow.pendingReadyAt)}). Not yours? Contest it.`
    cell.append(
      warning,
      actionButton("Contest", "contest", () => contest(escrow.id))
    )
  } else if (escrow.pendingOwner !== null) {
    // Permissionless once the bind delay passed on chain (docs/relayer.md "Bind endpoints").
    if (secondsLeft(escrow.pendingReadyAt) <= 0)
      cell.append(actionButton("Finalize", "finalize", () => finalize(escrow.id)))
  } else if (!same(escrow.owner, stealthOwner))
    cell.append(actionButton("Bind and propose", "bind", () => bindAndPropose(escrow.id)))
  else
    for (const { asset, amount, info } of balances) {
      const claim = actionButton(`Claim ${info.symbol}…`, "claim", () =>
        reviewClaim(escrow.id, asset, amount, info)
      )
      claim.dataset.asset = asset
      cell.append(claim)
    }
}

const renderEscrows = (escrows: ReadonlyArray<Escrow>, accounts: ReadonlyMap<string, Balances>) => {
  const body = byId<HTMLTableSectionElement>("escrows")
  body.replaceChildren()
  if (escrows.length === 0) {
    const row = body.insertRow()
    const cell = row.insertCell()
    cell.colSpan = 8
    cell.textContent = "No escrow was launched to this user yet."
    return
  }
  for (const escrow of escrows) {
    const row = body.insertRow()
    row.dataset.escrow = escrow.id
    const code = document.createElement("code")
    code.textContent = short(escrow.id)
    code.title = escrow.id
    row.insertCell().append(code)
    row.insertCell().textContent = escrow.registered ? "yes" : "no"
    row.insertCell().textContent = ownerCell(escrow.owner)
    const pending = row.insertCell()
    pending.textContent = ownerCell(escrow.pendingOwner)
    pending.className = "pending-owner"
    const final = row.insertCell()
    final.textContent = finalAtText(escrow)
    final.className = "final-at"
    const balances = accounts.get(escrow.id.toLowerCase()) ?? []
    balanceCell(row.insertCell(), balances)
    row.insertCell().textContent = escrow.visibility
    actionCell(row.insertCell(), escrow, balances)
  }
}

/** The escrows last listed by an attestor: still shown, from the relayer's index, once the login expired. */
let listed: ReadonlyArray<Escrow> = []

/** An escrow as the chain has it now: the relayer's index, at least as new as the attestor's. */
const withChainState = (escrow: Escrow, account: Account | undefined): Escrow =>
  account === undefined
    ? escrow
    : {
        ...escrow,
        // Indexed from its deposits on, an account is registered once it has an owner or a pending one.
        registered: escrow.registered || account.pendingOwner !== null || !/^0x0{40}$/.test(account.owner),
        owner: account.owner,
        pendingOwner: account.pendingOwner,
        pendingReadyAt: account.pendingReadyAt === null ? null : String(account.pendingReadyAt)
      }

/**
 * The escrows (the attestor's list), their state and balances (the relayer's index, once it covers
 * `block`) and now by the chain. A login that expired (a session lasts less than a bind's delay)
 * leaves the escrows listed before: finalizing and claiming need no login.
 */
const listEscrows = async (block = 0) => {
  if (current === undefined) return
  const [escrows, accounts] = await Promise.all([
    fetchEscrows(current).catch((error: unknown) => {
      if (!(error instanceof Refusal && error.code === "invalid_session" && listed.length > 0)) throw error
      showStatus("Your login expired: log in again to list new escrows. These are read from the relayer.")
      return listed
    }),
    fetchAccounts(block),
    chainNow()
  ])
  listed = escrows
  const balances = new Map<string, Balances>()
  for (const escrow of escrows)
    balances.set(escrow.id.toLowerCase(), await balancesOf(accounts.get(escrow.id.toLowerCase())))
  renderEscrows(
    escrows.map((escrow) => withChainState(escrow, accounts.get(escrow.id.toLowerCase()))),
    balances
  )
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Follows a relayed transaction until it is mined (docs/relayer.md "POST /v1/tx-status"); its block. */
const untilMined = async (what: string, txHash: string): Promise<number> => {
  const payload = Schema.decodeUnknownSync(TxStatusRequest)({ txHash })
  for (let i = 0; ; i++) {
    const tx = await relayerCall("POST /v1/tx-status", (relayer) =>
      relayer.transactions.txStatus({ payload })
    )
    showStatus(`${what}: transaction ${short(txHash)} ${tx.status}…`)
    if (tx.status === "success") return tx.blockNumber ?? 0
    if (tx.status === "reverted") throw new Refusal(what, `transaction ${txHash} reverted`, "reverted")
    if (i >= 240) throw new Refusal(what, `transaction ${txHash} is not mined yet: refresh later`, tx.status)
    await sleep(500)
  }
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
  const { txHash } = await relayerCall("POST /v1/propose-bind", (relayer) =>
    relayer.binds.proposeBind({ payload: proposeBindRequestOf(collected.right) })
  )
  await listEscrows(await untilMined("The proposal", txHash))
  const account = (await fetchAccounts()).get(id.toLowerCase())
  const readyAt =
    account?.pendingReadyAt === null || account === undefined ? null : String(account.pendingReadyAt)
  showStatus(
    `Bind proposed: this page's key is the pending owner, ${readyAt === null ? "" : `final at ${finalAt(readyAt)} (${timeLeft(readyAt)}); `}finalize it then.`
  )
}

/** Makes the pending bind final once its delay passed on chain (docs/relayer.md "Bind endpoints"). */
const finalize = async (id: string) => {
  showStatus("The relayer finalizes the bind…")
  const payload = Schema.decodeUnknownSync(FinalizeBindRequest)({ id })
  const { txHash } = await relayerCall("POST /v1/finalize-bind", (relayer) =>
    relayer.binds.finalizeBind({ payload })
  )
  await listEscrows(await untilMined("The finalization", txHash))
  showStatus("Bind final: this page's key owns the escrow. Type an address and claim its balance.")
}

// ---------------------------------------------------------------------------------------------
// A relayed claim (docs/protocol.md §5 "Claim semantics", docs/relayer.md "POST /v1/claim")

/** A claim the user reviews: its amount and the relayer's fee, before the page's key signs it. */
interface ClaimReview {
  readonly id: string
  readonly asset: string
  readonly amount: bigint
  readonly relayerFee: bigint
  readonly recipient: `0x${string}`
  readonly info: AssetInfo
}

let review: ClaimReview | undefined

const showReview = (claim: ClaimReview | undefined) => {
  review = claim
  const box = byId("claim-review")
  box.hidden = claim === undefined
  if (claim === undefined) return
  box.dataset.amount = String(claim.amount)
  box.dataset.fee = String(claim.relayerFee)
  byId("claim-summary").textContent =
    `Claim ${amountText(claim.amount, claim.info)} of escrow ${short(claim.id)} to ${claim.recipient}. ` +
    `The relayer's fee is ${amountText(claim.relayerFee, claim.info)}: ${claim.recipient} receives ` +
    `${amountText(claim.amount - claim.relayerFee, claim.info)}.`
}

/** The whole balance of `asset` to the typed address: the relayer's current fee first (`GET /v1/quote`). */
const reviewClaim = async (id: string, asset: string, amount: bigint, info: AssetInfo) => {
  showReview(undefined)
  const recipient = byId<HTMLInputElement>("claim-to").value.trim()
  if (!isAddress(recipient, { strict: false }))
    throw new Refusal("the claim", "type the address to claim to (0x and 40 hex digits)", "bad_address")
  const urlParams = Schema.decodeUnknownSync(QuoteQuery)({ asset, adapter: ZERO_ADDRESS })
  const quote = await relayerCall("GET /v1/quote", (relayer) => relayer.quote.quote({ urlParams }))
  if (quote.relayerFee >= amount)
    throw new Refusal(
      "the claim",
      `the relayer's fee (${amountText(quote.relayerFee, info)}) takes the whole balance`,
      "fee_exceeds_balance"
    )
  showReview({ id, asset, amount, relayerFee: quote.relayerFee, recipient, info })
  showStatus("Check the fee, then sign the claim with this page's key.")
}

/** Signs the reviewed claim with the page's key, relays it and follows it until it is mined. */
const signAndClaim = async () => {
  const claim = review
  if (claim === undefined) return
  showReview(undefined)
  const config = await relayerCall("GET /v1/config", (relayer) => relayer.quote.config())
  const now = await chainNow()
  const nonce = await chain().readContract({
    address: config.vault,
    abi: feeVaultAbi,
    functionName: "nonces",
    args: [claim.id as Hex]
  })
  // The direct adapter (0x0) pays `amount - relayerFee` to the address in `adapterData`.
  const adapterData = encodeAbiParameters([{ type: "address" }], [claim.recipient])
  const message = {
    beneficiaryId: claim.id as Hex,
    asset: claim.asset as Hex,
    amount: claim.amount,
    adapter: ZERO_ADDRESS,
    dataHash: keccak256(adapterData),
    relayer: config.relayer,
    relayerFee: claim.relayerFee,
    nonce,
    // An hour past the relayer's minimum, by the chain's clock the vault checks it with.
    deadline: BigInt(now + config.minDeadlineSeconds + 3600)
  }
  const signature = await privateKeyToAccount(stealthKey()).signTypedData({
    domain: vaultDomain(config.chainId, config.vault),
    types: vaultTypes,
    primaryType: "Claim",
    message
  })
  const payload = Schema.decodeUnknownSync(ClaimRequest)({
    claim: Object.fromEntries(Object.entries(message).map(([k, v]) => [k, String(v)])),
    adapterData,
    signature
  })
  showStatus("The relayer sends the claim…")
  const { txHash } = await relayerCall("POST /v1/claim", (relayer) => relayer.claims.claim({ payload }))
  const block = await untilMined("The claim", txHash)
  await listEscrows(block)
  showStatus(
    `Claimed: ${amountText(claim.amount - claim.relayerFee, claim.info)} sent to ${claim.recipient} in block ${block}.`
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
  byId("refresh").addEventListener(
    "click",
    act(() => listEscrows())
  )
  byId("claim-confirm").addEventListener("click", act(signAndClaim))
  byId("claim-cancel").addEventListener("click", () => showReview(undefined))
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
