/**
 * An outside client of an attestor running on a devnet, for end-to-end tests: JSON posts,
 * messenger commitments and launches with a hint sealed to the attestor's hint key, widget logins
 * signed with a bot token, and waiting for the attestor's indexes to cover a block.
 */
import { Effect, Exit, Layer, Logger, LogLevel, Schema, Scope } from "effect"
import { type Address, type Hex, zeroAddress } from "viem"
import { expect } from "vitest"
import { launchSampleToken } from "../../../contracts/deploy.js"
import { Attestor } from "../../../layers/attestor.js"
import {
  attestorEnv,
  DEVNET_MESSENGER_BOT_TOKEN,
  devnetFacilitator,
  devnetStandIns,
  fedsocialEnv,
  freeLoopbackPort,
  paidLookupEnv,
  standInEnv,
  withSettings,
  writeDevnetFile
} from "../../../layers/devnet.js"
import {
  CommitmentRequest,
  CommitmentResponse,
  MessengerVerifyRequest,
  type Platform
} from "../../../schema/attestor.js"
import { computeId } from "../../../schema/ids.js"
import {
  encodeBeneficiaryHint,
  type HintPlaintext,
  hintBeneficiaryId,
  sealHint
} from "../../../src/attestor/hints/hintEnvelopes.js"
import { signWidgetPayload, widgetKey } from "../../../src/attestor/logins/messenger/messengerWidget.js"
import { attestorFetchClient, type AttestorClient as TypedAttestorClient } from "../../../src/client.js"
import type { OAuthStandIns, StandInPlatform } from "../../../src/devnet/oauthStandIns.js"
import type { FacilitatorStandIn } from "../../../src/devnet/x402.js"
import type { VaultDevnet } from "./relayerDevnet.js"

export interface Commitment {
  readonly platformId: number
  readonly userId: string
  readonly nonce: Hex
  readonly attestorSalt: Hex
  readonly handleCommitment: Hex
}

let payloads = 0

export class AttestorClient {
  /** The typed client of this attestor. */
  readonly client: TypedAttestorClient

  constructor(
    readonly net: VaultDevnet,
    readonly url: string,
    private readonly scope?: Scope.CloseableScope,
    /** The stand-in OAuth providers this attestor logs in at, when it was started with them. */
    readonly standIns?: OAuthStandIns,
    /** The facilitator stand-in of its paid lookups, when it was started with one. */
    readonly facilitator?: FacilitatorStandIn
  ) {
    this.client = Effect.runSync(attestorFetchClient(url))
  }

  /**
   * The attestor in this process on `net`'s chain, with the devnet's settings, rate limits lifted
   * for tests, a 200 ms indexer poll, and `env` on top; logging at errors only.
   */
  static async start(
    net: VaultDevnet,
    env: Record<string, string> = {},
    options: {
      readonly standIns?: boolean
      readonly oauthPlatforms?: ReadonlyArray<StandInPlatform>
      /** Paid handle lookups through the devnet's facilitator stand-in (docs/protocol.md §9). */
      readonly facilitator?: boolean
      /**
       * Member k of a committee net (`VaultDevnet.start(name, { attestors, threshold })`): its keys,
       * its database and the URL set aside for it, so stopping and starting it again keeps both.
       */
      readonly member?: number
    } = {}
  ): Promise<AttestorClient> {
    const member = options.member ?? 1
    const memberUrl = options.member === undefined ? undefined : net.memberUrls?.[member - 1]
    if (options.member !== undefined && memberUrl === undefined)
      throw new Error(`the devnet has no committee member ${options.member}`)
    const scope = await Effect.runPromise(Scope.make())
    const { url, standIns, facilitator } = await Effect.runPromise(
      Effect.gen(function* () {
        const port = memberUrl === undefined ? yield* freeLoopbackPort : Number(new URL(memberUrl).port)
        const url = `http://127.0.0.1:${port}`
        // Providers that know this attestor's callbacks, as the devnet's do.
        const standIns = options.standIns === true ? yield* devnetStandIns([{ member, url }]) : undefined
        const facilitator = options.facilitator === true ? yield* devnetFacilitator(net.chain) : undefined
        // A committee's file names every member; a single attestor's, this one.
        yield* writeDevnetFile(net.chain, {
          relayerUrl: "http://127.0.0.1:1",
          attestorUrl: net.memberUrls?.[0] ?? url,
          attestorUrls: net.memberUrls,
          facilitatorUrl: facilitator?.url
        })
        const settings = {
          ...attestorEnv(net.chain, port, member),
          ...(standIns === undefined
            ? {}
            : { ...standInEnv(standIns, url, options.oauthPlatforms, member), ...fedsocialEnv(net.chain) }),
          ...(facilitator === undefined ? {} : paidLookupEnv(net.chain, facilitator.url)),
          RATE_LIMIT_BURST: "1000",
          RATE_LIMIT_PER_MINUTE: "1000",
          // Every test's requests come from one loopback address, as for the rate limits above.
          OAUTH_STATES_PER_CLIENT: "1000",
          INDEXER_POLL_INTERVAL_MS: "200",
          ...env
        }
        yield* Layer.buildWithScope(
          withSettings(Attestor.layer, settings).pipe(Layer.provide(Logger.minimumLogLevel(LogLevel.Error))),
          scope
        )
        return { url, standIns, facilitator }
      }).pipe(
        Scope.extend(scope),
        Effect.tapErrorCause(() => Scope.close(scope, Exit.void))
      )
    )
    return new AttestorClient(net, url, scope, standIns, facilitator)
  }

  /** Stops an attestor this client started. */
  async stop(): Promise<void> {
    if (this.scope !== undefined) await Effect.runPromise(Scope.close(this.scope, Exit.void))
  }

  post(path: string, body: unknown): Promise<Response> {
    return fetch(`${this.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: typeof body === "string" ? body : JSON.stringify(body)
    })
  }

  /** The chain's latest block number. */
  async head(): Promise<number> {
    return Number(await this.net.publicClient().getBlockNumber({ cacheTime: 0 }))
  }

  /** Waits until the attestor's vault indexer and hint index both cover `block`. */
  async indexed(block: number): Promise<void> {
    for (let i = 0; i < 600; i++) {
      const health = await Effect.runPromise(this.client.operator.health())
      if ((health.indexer?.block ?? -1) >= block && (health.hints?.block ?? -1) >= block) return
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    throw new Error(`the attestor did not index block ${block}`)
  }

  /** A creator's commitment to a user of `platform` (messenger by default). */
  async commit(userId: string, platform: Platform = "messenger"): Promise<Commitment> {
    const payload = Schema.decodeUnknownSync(CommitmentRequest)({ platform, userId })
    const commitment = await Effect.runPromise(this.client.commitments.commitment({ payload, headers: {} }))
    // Back to the wire form the tests compare with.
    return Schema.encodeSync(CommitmentResponse)(commitment) as Commitment
  }

  /**
   * A creator's launch to the committed user, its hint sealed to the attestor's hint key, or to
   * each of `sealedTo` (a committee's: one envelope per member, docs/protocol.md §6).
   */
  async launchTo(
    commitment: Commitment,
    symbol: string,
    fallback?: { readonly recipient: Address; readonly delay: bigint },
    sealedTo?: ReadonlyArray<Hex>
  ): Promise<{ readonly id: Hex; readonly block: number }> {
    const keys = sealedTo ?? [(await Effect.runPromise(this.client.info.info())).hintPublicKey]
    const hint: HintPlaintext = {
      platformId: commitment.platformId,
      userId: commitment.userId,
      nonce: commitment.nonce,
      attestorSalt: commitment.attestorSalt,
      ...(fallback === undefined
        ? {}
        : { fallbackRecipient: fallback.recipient, fallbackDelay: fallback.delay.toString() })
    }
    const id = computeId(
      2,
      commitment.handleCommitment,
      fallback?.recipient ?? zeroAddress,
      fallback?.delay ?? 0n
    )
    expect(hintBeneficiaryId(hint)).toBe(id)
    const launched = await launchSampleToken(this.net.rpcUrl, this.net.chain.deployment, {
      beneficiaryId: id,
      beneficiaryHint: encodeBeneficiaryHint(keys.map((key) => sealHint(key, hint))),
      symbol
    })
    return { id, block: Number(launched.blockNumber) }
  }

  /**
   * A widget payload for messenger user `userId`, signed at `authDate` (now by default: a payload
   * from an earlier second than a contest of the user is refused after it); each one distinct
   * (payloads are single-use).
   */
  static widget(
    userId: string,
    token = DEVNET_MESSENGER_BOT_TOKEN,
    authDate = Math.floor(Date.now() / 1000)
  ) {
    return signWidgetPayload(widgetKey(token), {
      id: Number(userId),
      first_name: "Recipient",
      username: `recipient_${++payloads}`,
      auth_date: authDate
    })
  }

  /** Logs `userId` in with a widget payload for `stealthOwner`; the session's token. */
  async login(userId: string, stealthOwner: Address, id?: Hex): Promise<string> {
    const payload = Schema.decodeUnknownSync(MessengerVerifyRequest)({
      auth: AttestorClient.widget(userId),
      stealthOwner,
      ...(id === undefined ? {} : { id })
    })
    return (await Effect.runPromise(this.client.logins.messengerVerify({ payload }))).session
  }
}
