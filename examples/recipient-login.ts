/**
 * A recipient claims the escrows creators launched for them (docs/getting-started.md "A
 * recipient's login"), with the typed client's committee helpers (docs/attestor.md "Writing a
 * client"): two launches (one to a messenger user, one to a microblog user), then for each:
 *
 *   1. the committee from deployment.json (`committeeOf`: its `attestors` and `attestorThreshold`;
 *      one attestor at threshold 1 on the default devnet) and each member's `GET /v1/info`
 *      (`committeeInfo`): who answers, and its `bindDeadlineSeconds`;
 *   2. a stealth owner key chosen before logging in: the key that will own the escrow;
 *   3. a login at every member that answers, each with a login secret of its own: messenger's
 *      widget payload (`POST /v1/oauth/messenger/verify`), or the OAuth flow at the devnet's
 *      microblog stand-in (`startCommitteeLogins`, the provider's 302, each member's callback to
 *      `<redirect>#attest=<session>`, read only because this client started that login);
 *   4. `POST /v1/escrows` at each member: what was launched to this user;
 *   5. one deadline every member accepts (`committeeDeadline`), `POST /v1/bind` at every member
 *      with a session, each signature checked as the vault will check it (`collectBindSignatures`,
 *      with `isAttestor` read from the vault), and what each member did printed;
 *   6. `POST /v1/propose-bind` on the relayer with the merged signatures (`proposeBindRequestOf`,
 *      registering the escrow in the same transaction) once at least `attestorThreshold` signed;
 *   7. the bind delay skipped on anvil (`evm_increaseTime`), `POST /v1/finalize-bind`, and the
 *      escrow owned by the stealth key in `GET /v1/accounts`.
 *
 * A member that is down is named and left out: the bind goes through while `attestorThreshold`
 * members sign, and the members not asked do not veto it (`VETO_RULE=committee`, docs/attestor.md
 * "The committee"). Try it on a committee devnet (`DEVNET_ATTESTORS=3 DEVNET_ATTESTOR_THRESHOLD=2
 * npm run devnet`, docs/getting-started.md "A committee devnet").
 *
 * Skipping the delay moves the devnet chain's clock an hour ahead of this machine's for good. The
 * devnet's attestors follow the chain's clock (docs/protocol.md §9 "The devnet's clock"), so this
 * example and the others still run afterwards, in any order, as often as wanted.
 *
 *   npx tsx examples/recipient-login.ts
 */
import { Effect, Either, Schema } from "effect"
import { createTestClient, type Hex, http } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { DEVNET_MESSENGER_BOT_TOKEN, DEVNET_REDIRECT_ALLOWLIST } from "../layers/devnet.js"
import { EscrowsRequest, MessengerVerifyRequest } from "../schema/attestor.js"
import { FinalizeBindRequest } from "../schema/relayer.js"
import { signWidgetPayload, widgetKey } from "../src/attestor/logins/messenger/messengerWidget.js"
import {
  Address,
  attestorFetchClient,
  Bytes32,
  type Committee,
  type CommitteeMember,
  collectBindSignatures,
  committeeDeadline,
  committeeInfo,
  committeeOf,
  describeOutcome,
  feeVaultAbi,
  loginLanding,
  type MemberLogin,
  type MemberSession,
  newLoginSecret,
  proposeBindRequestOf,
  type RelayerClient,
  startCommitteeLogins
} from "../src/client.js"
import {
  attestorIndexed,
  call,
  chainClockLead,
  type DevnetFile,
  devnetClients,
  indexedAccount,
  loadDevnet,
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

  step("The committee: deployment.json's attestors and attestorThreshold, and each member's GET /v1/info")
  const committee = await Effect.runPromise(committeeOf(file))
  show("attestors", `${committee.members.length}, of which ${committee.threshold} must sign a bind`)
  const infos = await Effect.runPromise(committeeInfo(committee))
  for (const [i, info] of infos.entries())
    show(
      memberName(i),
      info._tag === "Answered"
        ? `${info.member.url} ${info.member.address}, bindDeadlineSeconds ${info.info.bindDeadlineSeconds}`
        : `${info.member.url} ${info.reason}`
    )
  // A member that does not answer is left out; the bind still goes through while at least the
  // threshold of members sign (docs/attestor.md "The committee").
  const answering = infos.map((info) => info._tag === "Answered")
  const bindDeadlines = infos.flatMap((info) =>
    info._tag === "Answered" ? [info.info.bindDeadlineSeconds] : []
  )

  step("Creators launch to a messenger user and to a microblog user (as in examples/creator-launch.ts)")
  const hintPublicKeys = committee.members.map((member) => member.hintPublicKey)
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
  for (const [i, member] of committee.members.entries())
    if (answering[i])
      await attestorIndexed(
        await Effect.runPromise(attestorFetchClient(member.url)),
        Math.max(toMessenger.block, toMicroblog.block)
      )

  // A stealth owner per escrow, chosen before the logins: each session is bound to it, and the
  // attestors sign binds to it only (docs/protocol.md §10 "SessionResponse").
  const messengerOwner = Schema.decodeSync(Address)(privateKeyToAccount(generatePrivateKey()).address)
  const microblogOwner = Schema.decodeSync(Address)(privateKeyToAccount(generatePrivateKey()).address)

  step(
    `Messenger login of user ${messengerUser} at each attestor that answers: the widget payload, signed with the devnet's bot token`
  )
  show("stealthOwner", messengerOwner)
  const messengerSessions: Array<MemberSession | undefined> = []
  for (const [i, member] of committee.members.entries())
    messengerSessions.push(
      answering[i] ? await messengerLogin(member, i, publicClient, messengerUser, messengerOwner) : undefined
    )

  step(
    `Microblog login of user ${microblogUser} at every attestor (startCommitteeLogins), at the devnet's OAuth stand-in`
  )
  show("stealthOwner", microblogOwner)
  // One login secret per member: a session one member made is no use at another (docs/attestor.md
  // "Writing a client"). The client keeps each secret with its member until the browser comes back.
  const started = await Effect.runPromise(
    startCommitteeLogins({
      committee,
      platform: "microblog",
      stealthOwner: microblogOwner,
      // The wallet page's landing, on the allow-list of the devnet's attestors wherever the page runs.
      redirect: file.walletUrl === undefined ? DEVNET_REDIRECT_ALLOWLIST : `${file.walletUrl}/after-login`
    })
  )
  const microblogSessions: Array<MemberSession | undefined> = []
  for (const [i, login] of started.entries())
    microblogSessions.push(await microblogLogin(login, i, microblogUser, microblogOwner))

  const pending: Array<{ readonly id: Hex; readonly owner: Address }> = []
  for (const [sessions, owner, launched] of [
    [messengerSessions, messengerOwner, toMessenger],
    [microblogSessions, microblogOwner, toMicroblog]
  ] as const) {
    const id = Schema.decodeSync(Bytes32)(launched.id)
    pending.push(
      await proposeBind(file, publicClient, relayer, { committee, bindDeadlines, sessions, owner, id })
    )
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

/** Member `i` (0-based, deployment.json's order) as the output names it. */
const memberName = (i: number) => `attestor ${i + 1}`

/** The messenger login at one member: a widget payload signed with the devnet's bot token, then verified. */
async function messengerLogin(
  member: CommitteeMember,
  i: number,
  publicClient: PublicClient,
  userId: string,
  stealthOwner: Address
): Promise<MemberSession> {
  // The messenger's login widget signs its payload with a key derived from the bot token
  // (docs/protocol.md §10 "Messenger auth"); on the devnet the client stands in for the widget.
  const auth = signWidgetPayload(widgetKey(DEVNET_MESSENGER_BOT_TOKEN), {
    id: Number(userId),
    first_name: "Recipient",
    username: `recipient_${userId}`,
    // The devnet attestor reads the devnet chain's clock (docs/protocol.md §9 "The devnet's clock").
    auth_date: Number(await nowSeconds(publicClient)) - 1
  })
  // A secret per login, kept by the client (a browser keeps it in sessionStorage); only its
  // SHA-256 travels with the login (docs/protocol.md §10 "Login challenge").
  const login = newLoginSecret()
  const attestor = await Effect.runPromise(attestorFetchClient(member.url))
  const session = await call(
    "POST /v1/oauth/messenger/verify",
    attestor.logins.messengerVerify({
      payload: wire(MessengerVerifyRequest, { auth, stealthOwner, loginChallenge: login.loginChallenge })
    })
  )
  show(
    memberName(i),
    `loginChallenge ${login.loginChallenge}: session for ${session.platform} user ${session.userId}, expires ${session.expiresAt}`
  )
  return { session: session.session, loginSecret: login.loginSecret }
}

/**
 * The browser's trip for a login `startCommitteeLogins` started at one member: the devnet's
 * microblog stand-in consents at once for `userId`, and the member's callback lands on the
 * redirect with the session. Undefined when the login did not start there (the member is named).
 */
async function microblogLogin(
  login: MemberLogin,
  i: number,
  userId: string,
  stealthOwner: Address
): Promise<MemberSession | undefined> {
  if (login.started._tag !== "Started") {
    show(memberName(i), `${login.member.url} ${describeOutcome({ member: login.member, ...login.started })}`)
    return undefined
  }
  show(`${memberName(i)} authorize URL`, login.started.url)
  // A browser would show the provider's consent page; the stand-in consents at once and takes the
  // user from `devnet_user` (docs/protocol.md §9 "Devnet stand-ins").
  const consent = await fetch(`${login.started.url}&devnet_user=${userId}`, { redirect: "manual" })
  const callback = consent.headers.get("location")
  if (consent.status !== 302 || callback === null)
    throw new Error(`the stand-in answered ${consent.status} instead of a redirect`)
  const landed = await fetch(callback, { redirect: "manual" })
  const back = landed.headers.get("location")
  if (landed.status !== 302 || back === null)
    throw new Error(`the attestor's callback answered ${landed.status}: ${await landed.text()}`)
  show(`${memberName(i)} sends the browser to`, `${back.split("#")[0]}#attest=…`)
  // A page reached with #attest= but no login of its own pending ignores it: someone else's login.
  if (loginLanding(back, undefined) !== undefined)
    throw new Error("a landing without a pending login was read")
  const landing = loginLanding(back, { loginSecret: login.loginSecret, stealthOwner })
  if (landing?._tag !== "Session") throw new Error(`the login did not end in a session: ${back}`)
  return { session: landing.session, loginSecret: landing.login.loginSecret }
}

/** One escrow's bind: the user's sessions at the members (undefined where there is none). */
interface BindAsk {
  readonly committee: Committee
  /** The `bindDeadlineSeconds` of every member that answered `GET /v1/info`. */
  readonly bindDeadlines: ReadonlyArray<number>
  readonly sessions: ReadonlyArray<MemberSession | undefined>
  readonly owner: Address
  readonly id: Bytes32
}

/**
 * The escrow at each member with a session, every member's bind signature for one deadline
 * (checked and merged by `collectBindSignatures`), and the proposal through the relayer.
 */
async function proposeBind(
  file: DevnetFile,
  publicClient: PublicClient,
  relayer: RelayerClient,
  ask: BindAsk
): Promise<{ readonly id: Hex; readonly owner: Address }> {
  const { committee, sessions, owner, id } = ask
  step(`POST /v1/escrows at each attestor with a session: what was launched to this user`)
  for (const [i, member] of committee.members.entries()) {
    const session = sessions[i]
    if (session === undefined) continue
    const attestor = await Effect.runPromise(attestorFetchClient(member.url))
    const { escrows } = await call(
      "POST /v1/escrows",
      attestor.escrows.escrows({ payload: wire(EscrowsRequest, session) })
    )
    const escrow = escrows.find((e) => e.id === id)
    if (escrow === undefined) throw new Error(`the launch ${id} is not among the escrows at ${member.url}`)
    show(memberName(i), `${escrow.id} registered=${escrow.registered} visibility=${escrow.visibility}`)
  }

  step("POST /v1/bind at each attestor with a session: BindOwner(id, stealthOwner, bindNonce, deadline)")
  // One deadline every member accepts (docs/attestor.md "Writing a client"): the vault checks each
  // signature over the same BindOwner. Now is the chain's clock, which the devnet's attestors follow.
  const deadline = await Effect.runPromise(
    committeeDeadline(ask.bindDeadlines, Number(await nowSeconds(publicClient)))
  )
  const bindNonce = await publicClient.readContract({
    address: file.vault,
    abi: feeVaultAbi,
    functionName: "bindNonces",
    args: [id]
  })
  show("deadline", deadline)
  show("bindNonce", bindNonce)
  const collected = await Effect.runPromise(
    Effect.either(
      collectBindSignatures({
        committee,
        sessions,
        owner,
        id,
        bindNonce,
        deadline,
        chain: { chainId: file.chainId, vault: file.vault },
        // A signature counts only from a key the vault lists as an attestor.
        isAttestor: (signer) =>
          publicClient.readContract({
            address: file.vault,
            abi: feeVaultAbi,
            functionName: "isAttestor",
            args: [signer]
          })
      })
    )
  )
  // What each member did: signed, down, refused (with its code), not asked, …
  const outcomes = Either.isRight(collected) ? collected.right.outcomes : collected.left.outcomes
  for (const [i, outcome] of outcomes.entries())
    show(memberName(i), `${outcome.member.url} ${describeOutcome(outcome)}`)
  // CommitteeShort: fewer than attestorThreshold signed; its message names each member and why.
  if (Either.isLeft(collected)) throw new Error(collected.left.message)

  // docs/protocol.md §5: proposeBind takes the signatures in ascending order of their signers; an
  // escrow not registered yet carries the `register` payload, sent in the same transaction.
  step(
    `POST /v1/propose-bind on the relayer: ${collected.right.signatures.length} signatures by signer, with the registration`
  )
  const { txHash } = await call(
    "POST /v1/propose-bind",
    relayer.binds.proposeBind({ payload: proposeBindRequestOf(collected.right) })
  )
  const block = await relayedTx(relayer, txHash)
  const account = await indexedAccount(relayer, id, block)
  show("pendingOwner", account.pendingOwner)
  show("pendingReadyAt", account.pendingReadyAt)
  return { id, owner }
}
