/**
 * A recipient claims the escrows creators launched for them (docs/getting-started.md "A
 * recipient's login"): two launches (one to a messenger user, one to a microblog user), then for
 * each:
 *
 *   1. a stealth owner key chosen before logging in: the key that will own the escrow;
 *   2. the login: messenger's widget payload (`POST /v1/oauth/messenger/verify`), or the OAuth
 *      flow at the devnet's microblog stand-in (`POST /v1/oauth/microblog/start`, the provider's
 *      302, the attestor's callback);
 *   3. `POST /v1/escrows`: the user's escrows; `POST /v1/bind`: the attestor's BindOwner signature;
 *   4. `POST /v1/propose-bind` on the relayer (registering the escrow in the same transaction);
 *   5. the bind delay skipped on anvil (`evm_increaseTime`), `POST /v1/finalize-bind`, and the
 *      escrow owned by the stealth key in `GET /v1/accounts`.
 *
 * Skipping the delay moves the devnet chain's clock an hour ahead of this machine's for good:
 * restart `npm run devnet` before running this example again or before examples/paid-lookup.ts.
 *
 *   npx tsx examples/recipient-login.ts
 */
import { Schema } from "effect"
import { type Address, createTestClient, type Hex, http } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { DEVNET_MESSENGER_BOT_TOKEN } from "../layers/devnet.js"
import {
  BindRequest,
  EscrowsRequest,
  MessengerVerifyRequest,
  OAuthStartRequest,
  SessionResponse
} from "../schema/attestor.js"
import { FinalizeBindRequest, ProposeBindRequest } from "../schema/relayer.js"
import { signWidgetPayload, widgetKey } from "../src/attestor/messenger.js"
import type { AttestorClient, RelayerClient } from "../src/client.js"
import {
  attestorIndexed,
  call,
  chainClockLead,
  devnetClients,
  indexedAccount,
  loadDevnet,
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

  // The attestor signs deadlines by this machine's clock, the vault checks them by the chain's.
  const lead = await chainClockLead(publicClient)
  if (lead > 600)
    throw new Error(
      `the chain's clock is ${lead} s ahead of this machine's (a bind's timelock was already skipped on this devnet): restart \`npm run devnet\` to run this example`
    )

  step("Creators launch to a messenger user and to a microblog user (as in examples/creator-launch.ts)")
  const info = await call("GET /v1/info", attestor.info.info())
  const messengerUser = freshUserId()
  const microblogUser = freshUserId()
  const toMessenger = await launchTo(
    file,
    info.hintPublicKey,
    await commitTo(attestor, "messenger", messengerUser),
    "RCPM"
  )
  const toMicroblog = await launchTo(
    file,
    info.hintPublicKey,
    await commitTo(attestor, "microblog", microblogUser),
    "RCPB"
  )
  await attestorIndexed(attestor, Math.max(toMessenger.block, toMicroblog.block))

  // A stealth owner per escrow, chosen before the login: the session is bound to it, and the
  // attestor signs binds to it only (docs/protocol.md §10 "SessionResponse").
  const messengerKey = generatePrivateKey()
  const microblogKey = generatePrivateKey()
  const messengerOwner = privateKeyToAccount(messengerKey).address
  const microblogOwner = privateKeyToAccount(microblogKey).address

  step(`Messenger login of user ${messengerUser}: the widget payload, signed with the devnet's bot token`)
  // The messenger's login widget signs its payload with a key derived from the bot token
  // (docs/protocol.md §10 "Messenger auth"); on the devnet the client stands in for the widget.
  const auth = signWidgetPayload(widgetKey(DEVNET_MESSENGER_BOT_TOKEN), {
    id: Number(messengerUser),
    first_name: "Recipient",
    username: `recipient_${messengerUser}`,
    auth_date: Math.floor(Date.now() / 1000) - 1
  })
  show("auth", auth)
  show("stealthOwner", messengerOwner)
  const messengerSession = await call(
    "POST /v1/oauth/messenger/verify",
    attestor.logins.messengerVerify({
      payload: wire(MessengerVerifyRequest, { auth, stealthOwner: messengerOwner })
    })
  )
  show(
    "session for",
    `${messengerSession.platform} user ${messengerSession.userId}, expires ${messengerSession.expiresAt}`
  )

  step(`Microblog login of user ${microblogUser} at the devnet's OAuth stand-in`)
  const started = await call(
    "POST /v1/oauth/microblog/start",
    attestor.logins.oauthStart({
      path: { platform: "microblog" },
      payload: wire(OAuthStartRequest, { stealthOwner: microblogOwner })
    })
  )
  if (!("url" in started)) throw new Error("the microblog start did not answer an authorize URL")
  show("authorize URL", started.url)
  // A browser would show the provider's consent page; the stand-in consents at once and takes the
  // user from `devnet_user` (docs/protocol.md §9 "Devnet stand-ins").
  const consent = await fetch(`${started.url}&devnet_user=${microblogUser}`, { redirect: "manual" })
  const callback = consent.headers.get("location")
  if (consent.status !== 302 || callback === null)
    throw new Error(`the stand-in answered ${consent.status} instead of a redirect`)
  show("provider redirects to", callback)
  const landed = await fetch(callback, { redirect: "manual" })
  if (landed.status !== 200)
    throw new Error(`the attestor's callback answered ${landed.status}: ${await landed.text()}`)
  const microblogSession = Schema.decodeUnknownSync(SessionResponse)(await landed.json())
  show(
    "session for",
    `${microblogSession.platform} user ${microblogSession.userId}, expires ${microblogSession.expiresAt}`
  )

  const pending: Array<{ readonly id: Hex; readonly owner: Address }> = []
  for (const [session, expected] of [
    [messengerSession.session, toMessenger.id],
    [microblogSession.session, toMicroblog.id]
  ] as const) {
    pending.push(await proposeBind(attestor, relayer, session, expected))
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

/** Escrows, the attestor's bind signature, and the proposal through the relayer. */
async function proposeBind(
  attestor: AttestorClient,
  relayer: RelayerClient,
  session: string,
  expected: Hex
): Promise<{ readonly id: Hex; readonly owner: Address }> {
  step("POST /v1/escrows: what was launched to this user")
  const { escrows } = await call(
    "POST /v1/escrows",
    attestor.escrows.escrows({ payload: wire(EscrowsRequest, { session }) })
  )
  for (const escrow of escrows)
    show("escrow", `${escrow.id} registered=${escrow.registered} visibility=${escrow.visibility}`)
  if (!escrows.some((e) => e.id === expected))
    throw new Error(`the launch ${expected} is not among the escrows`)

  step("POST /v1/bind: the attestor signs BindOwner(id, stealthOwner, bindNonce, deadline)")
  const { binds } = await call(
    "POST /v1/bind",
    attestor.binds.bind({ payload: wire(BindRequest, { session, ids: [expected] }) })
  )
  const [bind] = binds
  if (bind === undefined) throw new Error("the attestor signed no bind")
  show("bind", bind)

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
        signatures: [bind.signature],
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
