/**
 * A recipient claims the escrows creators launched for them (docs/getting-started.md "A
 * recipient's login"): two launches (one to a messenger user, one to a microblog user), then for
 * each:
 *
 *   1. a stealth owner key chosen before logging in: the key that will own the escrow;
 *   2. a login secret drawn for the login and kept; its SHA-256, the login challenge, goes with the
 *      start (docs/attestor.md "Writing a client");
 *   3. the login: messenger's widget payload (`POST /v1/oauth/messenger/verify`), or the OAuth
 *      flow at the devnet's microblog stand-in (`POST /v1/oauth/microblog/start`, the provider's
 *      302, the attestor's callback to `<redirect>#attest=<session>`, read only because this client
 *      started that login);
 *   4. `POST /v1/escrows` and `POST /v1/bind` with the session and the login secret: the user's
 *      escrows and the attestor's BindOwner signature, checked to be for the stealth key;
 *   5. `POST /v1/propose-bind` on the relayer (registering the escrow in the same transaction);
 *   6. the bind delay skipped on anvil (`evm_increaseTime`), `POST /v1/finalize-bind`, and the
 *      escrow owned by the stealth key in `GET /v1/accounts`.
 *
 * On a committee devnet (`DEVNET_ATTESTORS`, docs/getting-started.md "A committee devnet") steps 3
 * and 4 run at every member deployment.json lists (at least `attestorThreshold` must sign, and a
 * devnet member vetoes a proposal it did not sign), each signing the same deadline, and the
 * proposal carries their signatures in ascending order of the members' addresses (docs/protocol.md §5).
 *
 * Skipping the delay moves the devnet chain's clock an hour ahead of this machine's for good. The
 * devnet's attestor follows the chain's clock (docs/protocol.md §9 "The devnet's clock"), so this
 * example and the others still run afterwards, in any order, as often as wanted.
 *
 *   npx tsx examples/recipient-login.ts
 */
import { Effect } from "effect"
import { type Address, createTestClient, type Hex, hexToBigInt, http } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { DEVNET_MESSENGER_BOT_TOKEN, DEVNET_REDIRECT_ALLOWLIST } from "../layers/devnet.js"
import {
  BindRequest,
  EscrowsRequest,
  type LoginSecret,
  MessengerVerifyRequest,
  OAuthStartRequest
} from "../schema/attestor.js"
import { FinalizeBindRequest, ProposeBindRequest } from "../schema/relayer.js"
import { signWidgetPayload, widgetKey } from "../src/attestor/logins/messenger/messengerWidget.js"
import {
  type AttestorClient,
  bindsFor,
  loginLanding,
  newLoginSecret,
  type PendingLogin,
  type RelayerClient
} from "../src/client.js"
import {
  attestorIndexed,
  call,
  chainClockLead,
  type DevnetFile,
  devnetClients,
  indexedAccount,
  loadDevnet,
  memberClients,
  nowSeconds,
  type PublicClient,
  relayedTx,
  runExample,
  serviceClients,
  show,
  step,
  wire
} from "./lib/devnet.js"
import { commitTo, freshUserId, launchTo } from "./lib/launch.js"

runExample("recipient-login", async () => {
  const file = loadDevnet()
  const { publicClient } = devnetClients(file)
  const { relayer, attestor } = await serviceClients(file)
  // docs/protocol.md §5: a bind needs threshold-many signatures from different attestors. The
  // recipient logs in at every member (one on the default devnet): a devnet member vetoes a
  // proposal it did not sign (AUTO_VETO, docs/protocol.md §9), so a bind signed by fewer would be
  // vetoed by the others.
  const signers = await memberClients(file)
  const at = (i: number) => (signers.length === 1 ? "" : ` at attestor ${i + 1} (${file.attestors[i]?.url})`)

  step("Creators launch to a messenger user and to a microblog user (as in examples/creator-launch.ts)")
  const hintPublicKeys = file.attestors.map((member) => member.hintPublicKey)
  const messengerUser = freshUserId()
  const microblogUser = freshUserId()
  const toMessenger = await launchTo(
    file,
    hintPublicKeys,
    await commitTo(attestor, "messenger", messengerUser),
    "RCPM"
  )
  const toMicroblog = await launchTo(
    file,
    hintPublicKeys,
    await commitTo(attestor, "microblog", microblogUser),
    "RCPB"
  )
  for (const signer of signers) await attestorIndexed(signer, Math.max(toMessenger.block, toMicroblog.block))

  // A stealth owner per escrow, chosen before the login: the session is bound to it, and the
  // attestor signs binds to it only (docs/protocol.md §10 "SessionResponse").
  const messengerKey = generatePrivateKey()
  const microblogKey = generatePrivateKey()
  const messengerOwner = privateKeyToAccount(messengerKey).address
  const microblogOwner = privateKeyToAccount(microblogKey).address

  const messengerLogins: Array<Login> = []
  const microblogLogins: Array<Login> = []
  for (const [i, signer] of signers.entries()) {
    step(
      `Messenger login of user ${messengerUser}${at(i)}: the widget payload, signed with the devnet's bot token`
    )
    messengerLogins.push(await messengerLogin(signer, publicClient, messengerUser, messengerOwner))
    step(`Microblog login of user ${microblogUser}${at(i)} at the devnet's OAuth stand-in`)
    microblogLogins.push(await microblogLogin(signer, microblogUser, microblogOwner))
  }

  const pending: Array<{ readonly id: Hex; readonly owner: Address }> = []
  for (const [logins, expected] of [
    [messengerLogins, toMessenger.id],
    [microblogLogins, toMicroblog.id]
  ] as const) {
    pending.push(await proposeBind(file, publicClient, signers, relayer, logins, expected))
  }

  // docs/protocol.md §9: bindDelay is 3600 s on the devnet. Anvil's test actions skip it here; on a
  // real chain the recipient (or anyone) finalizes once the delay has passed.
  const bindDelay = Number(file.bindDelay)
  step(`Skip the ${bindDelay} s bind delay: evm_increaseTime(${bindDelay + 1}) and evm_mine on anvil`)
  const test = createTestClient({ mode: "anvil", transport: http(file.rpcUrl) })
  await test.increaseTime({ seconds: bindDelay + 1 })
  await test.mine({ blocks: 1 })
  show("chain clock now ahead of this machine's by (s)", await chainClockLead(publicClient))

  for (const { id, owner } of pending) {
    step(`POST /v1/finalize-bind for ${id}`)
    const { txHash } = await call(
      "POST /v1/finalize-bind",
      relayer.binds.finalizeBind({ payload: wire(FinalizeBindRequest, { id }) })
    )
    const block = await relayedTx(relayer, txHash)
    const account = await indexedAccount(relayer, id, block)
    show("owner in /v1/accounts", account.owner)
    if (account.owner.toLowerCase() !== owner.toLowerCase())
      throw new Error(`the escrow is not owned by ${owner}`)
  }
  show("done", "each escrow is owned by its stealth key, which now signs claims like any owner")
})

/** A login at one attestor: its session, the login's secret, and the stealth owner it is for. */
interface Login {
  readonly session: string
  readonly loginSecret: LoginSecret
  readonly stealthOwner: Address
}

/** The messenger login: a widget payload signed with the devnet's bot token, then verified. */
async function messengerLogin(
  attestor: AttestorClient,
  publicClient: PublicClient,
  userId: string,
  stealthOwner: Address
): Promise<Login> {
  // The messenger's login widget signs its payload with a key derived from the bot token
  // (docs/protocol.md §10 "Messenger auth"); on the devnet the client stands in for the widget.
  const auth = signWidgetPayload(widgetKey(DEVNET_MESSENGER_BOT_TOKEN), {
    id: Number(userId),
    first_name: "Recipient",
    username: `recipient_${userId}`,
    // The devnet attestor reads the devnet chain's clock (docs/protocol.md §9 "The devnet's clock").
    auth_date: Number(await nowSeconds(publicClient)) - 1
  })
  show("auth", auth)
  show("stealthOwner", stealthOwner)
  // A secret per login, kept by the client (a browser keeps it in sessionStorage); only its
  // SHA-256 travels with the start (docs/protocol.md §10 "Login challenge").
  const login = newLoginSecret()
  show("loginChallenge", login.loginChallenge)
  const session = await call(
    "POST /v1/oauth/messenger/verify",
    attestor.logins.messengerVerify({
      payload: wire(MessengerVerifyRequest, { auth, stealthOwner, loginChallenge: login.loginChallenge })
    })
  )
  show("session for", `${session.platform} user ${session.userId}, expires ${session.expiresAt}`)
  return { session: session.session, loginSecret: login.loginSecret, stealthOwner }
}

/** The OAuth login at the devnet's microblog stand-in, which consents at once for `userId`. */
async function microblogLogin(
  attestor: AttestorClient,
  userId: string,
  stealthOwner: Address
): Promise<Login> {
  const login = newLoginSecret()
  // What the client keeps until the provider sends the browser back (sessionStorage in a browser).
  const pendingLogin: PendingLogin = { loginSecret: login.loginSecret, stealthOwner }
  const started = await call(
    "POST /v1/oauth/microblog/start",
    attestor.logins.oauthStart({
      path: { platform: "microblog" },
      payload: wire(OAuthStartRequest, {
        stealthOwner,
        redirect: DEVNET_REDIRECT_ALLOWLIST,
        loginChallenge: login.loginChallenge
      })
    })
  )
  if (!("url" in started)) throw new Error("the microblog start did not answer an authorize URL")
  show("authorize URL", started.url)
  // A browser would show the provider's consent page; the stand-in consents at once and takes the
  // user from `devnet_user` (docs/protocol.md §9 "Devnet stand-ins").
  const consent = await fetch(`${started.url}&devnet_user=${userId}`, { redirect: "manual" })
  const callback = consent.headers.get("location")
  if (consent.status !== 302 || callback === null)
    throw new Error(`the stand-in answered ${consent.status} instead of a redirect`)
  show("provider redirects to", callback)
  const landed = await fetch(callback, { redirect: "manual" })
  const back = landed.headers.get("location")
  if (landed.status !== 302 || back === null)
    throw new Error(`the attestor's callback answered ${landed.status}: ${await landed.text()}`)
  show("the attestor sends the browser to", `${back.split("#")[0]}#attest=…`)
  // A page reached with #attest= but no login of its own pending ignores it: someone else's login.
  if (loginLanding(back, undefined) !== undefined)
    throw new Error("a landing without a pending login was read")
  const landing = loginLanding(back, pendingLogin)
  if (landing?._tag !== "Session") throw new Error(`the login did not end in a session: ${back}`)
  return { session: landing.session, loginSecret: landing.login.loginSecret, stealthOwner }
}

/** How far ahead the bind deadline every signer signs lies (within each attestor's bounds). */
const BIND_DEADLINE_AHEAD = 1800n

/**
 * Escrows and a bind signature at each signer (`logins[i]` is the login at `signers[i]`), and the
 * proposal through the relayer.
 */
async function proposeBind(
  file: DevnetFile,
  publicClient: PublicClient,
  signers: ReadonlyArray<AttestorClient>,
  relayer: RelayerClient,
  logins: ReadonlyArray<Login>,
  expected: Hex
): Promise<{ readonly id: Hex; readonly owner: Address }> {
  // One deadline for every signer: the vault checks each signature over the same BindOwner.
  const deadline = (await nowSeconds(publicClient)) + BIND_DEADLINE_AHEAD
  const binds = []
  for (const [i, attestor] of signers.entries()) {
    const login = logins[i]
    if (login === undefined) throw new Error("no login at this attestor")
    const { session, loginSecret } = login
    const where = signers.length === 1 ? "" : ` (attestor ${i + 1}, ${file.attestors[i]?.url})`
    step(`POST /v1/escrows${where}: what was launched to this user (the session and the login's secret)`)
    const { escrows } = await call(
      "POST /v1/escrows",
      attestor.escrows.escrows({ payload: wire(EscrowsRequest, { session, loginSecret }) })
    )
    for (const escrow of escrows)
      show("escrow", `${escrow.id} registered=${escrow.registered} visibility=${escrow.visibility}`)
    if (!escrows.some((e) => e.id === expected))
      throw new Error(`the launch ${expected} is not among the escrows`)

    step(`POST /v1/bind${where}: the attestor signs BindOwner(id, stealthOwner, bindNonce, deadline)`)
    // Every signature must be for this client's own key, or nothing is proposed.
    const [bind] = await call(
      "POST /v1/bind",
      attestor.binds
        .bind({ payload: wire(BindRequest, { session, loginSecret, ids: [expected], deadline }) })
        .pipe(Effect.flatMap(({ binds }) => bindsFor(binds, login.stealthOwner)))
    )
    if (bind === undefined) throw new Error("the attestor signed no bind")
    show("bind", bind)
    binds.push(bind)
  }
  const [bind] = binds
  if (bind === undefined) throw new Error("no attestor signed")
  // docs/protocol.md §5: the vault takes the signatures in ascending order of their signers.
  const signatures = [...binds]
    .sort((a, b) => (hexToBigInt(a.attestor) < hexToBigInt(b.attestor) ? -1 : 1))
    .map((b) => b.signature)

  // docs/protocol.md §5: proposeBind needs threshold-many attestor signatures; an escrow not
  // registered yet carries the `register` payload the attestor returned, sent in the same transaction.
  step("POST /v1/propose-bind on the relayer, with the registration")
  const { txHash } = await call(
    "POST /v1/propose-bind",
    relayer.binds.proposeBind({
      payload: wire(ProposeBindRequest, {
        id: bind.beneficiaryId,
        newOwner: bind.newOwner,
        deadline: bind.deadline,
        signatures,
        ...(bind.register === null ? {} : { register: bind.register })
      })
    })
  )
  const block = await relayedTx(relayer, txHash)
  const account = await indexedAccount(relayer, bind.beneficiaryId, block)
  show("pendingOwner", account.pendingOwner)
  show("pendingReadyAt", account.pendingReadyAt)
  return { id: bind.beneficiaryId, owner: bind.newOwner }
}
