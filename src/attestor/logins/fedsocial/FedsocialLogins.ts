/**
 * fedsocial sign-in (Sign In With Farcaster; docs/attestor.md §3 "POST /v1/oauth/fedsocial/verify",
 * §4; docs/protocol.md §10 "fedsocial").
 *
 * Start: a fresh alphanumeric nonce is stored with the intent (stealth owner, ids, and the optional
 * login challenge, which the session keeps: docs/protocol.md §10 "Login challenge") for
 * `OAUTH_STATE_TTL_SECONDS`, single use (`OAuthStates`), and the client is told the `nonce`,
 * `domain`, `uri` and `expirationTime` its FIP-11 message must carry. Its nonce is an OAuth state,
 * bounded with them per client address and in total (429 `rate_limited` past a bound).
 *
 * Verify, each refusal 401 `invalid_session` with no session made, every check that needs no RPC
 * before any that does (a message costs the registry RPC nothing until its nonce is live):
 * 1. the message parses as an EIP-4361 message with a nonce, and names the `domain` and `uri`
 *    start gave;
 * 2. a signature other than an ordinary 65-byte one (a contract wallet's: ERC-1271, ERC-6492) is
 *    400 `unsupported` unless `FEDSOCIAL_CONTRACT_SIGNATURES` allows it;
 * 3. the nonce is live: issued by start for fedsocial and not expired (peeked, not taken), and the
 *    message's `expirationTime` is the one start gave;
 * 4. `@farcaster/auth-client`'s `verifySignInMessage` checks the statement, chain id 10, the single
 *    `farcaster://fid/N` resource, domain, nonce, expiry and signature, and that the signer is the
 *    fid's custody address on the IdRegistry or one of its auth addresses on the KeyRegistry. An
 *    ordinary signature is recovered here, without the chain (`checkSignature`); a contract
 *    wallet's, when allowed, is one `eth_call` of viem's ERC-6492 validator capped at
 *    `FEDSOCIAL_CONTRACT_SIGNATURE_GAS`, since the signer chooses the code it runs;
 * 5. then, in one transaction, the nonce is taken (used or expired since the peek: refused), and the
 *    session is made with the stealth owner, ids and login challenge of that nonce, never of the
 *    message; a nonce made before the fid's last contest makes none (docs/protocol.md §10
 *    "Contests": a message signed for it may have been phished).
 * The registries are read over `FEDSOCIAL_RPC_URL` (Optimism by default): not answering is 503
 * `unavailable`, and the nonce is not touched, so the same signed message verifies once they
 * answer again (until the nonce expires). A message refused before any RPC call (steps 1 to 3, and
 * an ordinary signature its own address did not make) spends nothing; one the registries refuse
 * spends the nonce, so replaying it costs the RPC nothing more. Otherwise the nonce is spent in the
 * transaction that creates the session, so a session store that fails leaves it usable too, and two
 * verifies of one message make one session.
 * Optimism's public endpoint, the default, is rate-limited: start-up warns once while it is
 * configured (docs/operations.md "Provider endpoints").
 *
 * Nothing of a message, signature, nonce or fid reaches a log line, a metric or an error message.
 */

import { SqlClient } from "@effect/sql/SqlClient"
import type { CreateClientArgs } from "@farcaster/auth-client"
import { Context, Effect, Layer, Option } from "effect"
import {
  type Address,
  type Client,
  createPublicClient,
  encodeAbiParameters,
  encodeDeployData,
  erc6492SignatureValidatorAbi,
  erc6492SignatureValidatorByteCode,
  type Hex,
  http,
  isAddressEqual,
  isHex,
  parseAbi,
  recoverAddress,
  recoverMessageAddress,
  size,
  type VerifyHashParameters
} from "viem"
import { call } from "viem/actions"
import { generateSiweNonce, parseSiweMessage } from "viem/siwe"
import type {
  FedsocialStartResponse,
  FedsocialVerifyRequest,
  OAuthStartRequest,
  SessionResponse
} from "../../../../schema/attestor.js"
import {
  BadRequest,
  InvalidSession,
  type RateLimited,
  Unavailable,
  Unsupported
} from "../../../../schema/errors.js"
import { interpretFailure } from "../../../chain/errors.js"
import { isPublicOptimismRpc } from "../../../config/attestor.js"
import { sessionResponse } from "../loginAnswers.js"
import { OAuthStates, startRefusal } from "../oauth/OAuthStates.js"
import { matchRedirect, REDIRECT_REFUSED } from "../oauth/redirectAllowList.js"
import { SESSION_STORE_UNAVAILABLE, SessionStore } from "../SessionStore.js"

export interface FedsocialConfig {
  /** What start tells the client to put in its message, and what verify insists on. */
  readonly domain: string
  readonly uri: string
  /** The chain holding the registries (Optimism), and their addresses there. */
  readonly rpcUrl: string
  readonly idRegistry: Address
  readonly keyRegistry: Address
  readonly rpcTimeoutMs: number
  readonly redirectAllowList: ReadonlyArray<string>
  /** Whether a contract wallet's signature (ERC-1271, ERC-6492) is checked, and its call's gas. */
  readonly contractSignatures: boolean
  readonly contractSignatureGas: number
}

export type FedsocialStartError = BadRequest | RateLimited | Unavailable
export type FedsocialVerifyError = InvalidSession | Unsupported | Unavailable

export interface FedsocialLoginsShape {
  /** `client`: the address the request is counted under, as for an OAuth start (`OAuthStates`). */
  readonly start: (
    request: OAuthStartRequest,
    client: string
  ) => Effect.Effect<FedsocialStartResponse, FedsocialStartError>
  readonly verify: (request: FedsocialVerifyRequest) => Effect.Effect<SessionResponse, FedsocialVerifyError>
}

export class FedsocialLogins extends Context.Tag("FedsocialLogins")<FedsocialLogins, FedsocialLoginsShape>() {
  static readonly layer = (
    config: FedsocialConfig
  ): Layer.Layer<FedsocialLogins, never, OAuthStates | SessionStore | SqlClient> =>
    Layer.effect(FedsocialLogins, Effect.zipRight(publicRpcWarning(config), makeFedsocialLogins(config)))

  /** No fedsocial on this instance: `LoginOffered` refuses its routes before they get here. */
  static readonly disabled: Layer.Layer<FedsocialLogins> = Layer.succeed(FedsocialLogins, {
    start: () => Effect.dieMessage("fedsocial is not configured on this attestor"),
    verify: () => Effect.dieMessage("fedsocial is not configured on this attestor")
  })
}

/** The one start-up line for a public registry RPC; it names the setting, never the URL. */
const PUBLIC_RPC_WARNING =
  "FEDSOCIAL_RPC_URL is Optimism's public endpoint, which is rate-limited: fedsocial sign-ins answer 503 unavailable under load; set a private Optimism RPC in production"

const publicRpcWarning = (config: FedsocialConfig): Effect.Effect<void> =>
  isPublicOptimismRpc(config.rpcUrl) ? Effect.logWarning(PUBLIC_RPC_WARNING) : Effect.void

const REFUSED = "the sign-in message could not be verified: sign in again"
const REGISTRY_UNAVAILABLE = "the fedsocial registry is not answering: try again later"
const STATES_UNAVAILABLE = "the login state store is not answering"
const CONTRACT_SIGNATURES_REFUSED =
  "this attestor does not accept contract-wallet signatures (ERC-1271, ERC-6492): sign with the key of the fid's custody address or of one of its auth addresses"

/** An ordinary signature, `r || s || v`: an externally owned account's, recovered without the chain. */
const isOrdinarySignature = (signature: Hex): boolean => size(signature) === 65

/**
 * Whether `signature` by `address` holds for `hash`, in place of viem's `verifyHash` (which asks
 * the chain first, even for an ordinary signature): an ordinary one is recovered locally; any other
 * (or an ordinary one that does not recover to `address`, which a deployed wallet may still accept)
 * is a contract wallet's, checked only when allowed, by one `eth_call` of viem's ERC-6492 validator
 * (ERC-1271 for a deployed wallet, the wallet's factory first for a counterfactual one) limited to
 * `contractSignatureGas`: the factory and the wallet are code of the signer's choosing, which would
 * otherwise run to the node's gas cap. The node not answering throws (503, the nonce unspent); the
 * call reverting or running out of gas is a signature that does not hold. Installed as the chain's
 * `verifyHash`, which viem's `verifyHash` defers to.
 */
const checkSignature =
  (config: FedsocialConfig) =>
  async (client: Client, { address, hash, signature }: VerifyHashParameters): Promise<boolean> => {
    // auth-client passes on the request's hex signature unchanged; nothing else reaches here.
    if (!isHex(signature)) return false
    if (isOrdinarySignature(signature)) {
      const recovered = await recoverAddress({ hash, signature }).catch(() => undefined)
      if (recovered !== undefined && isAddressEqual(recovered, address)) return true
    }
    if (!config.contractSignatures) return false
    const answer = await call(client, {
      data: encodeDeployData({
        abi: erc6492SignatureValidatorAbi,
        args: [address, hash, signature],
        bytecode: erc6492SignatureValidatorByteCode
      }),
      gas: BigInt(config.contractSignatureGas)
    }).catch((error: unknown) => {
      // A revert, or the node refusing the call itself (out of gas): the code said no. Anything
      // else (no answer, an HTTP error) is the node's trouble.
      const failure = interpretFailure(error)
      if (failure._tag === "Reverted" || (failure._tag === "Rejected" && failure.code !== undefined))
        return { data: undefined }
      throw error
    })
    // The validator answers a boolean, true for a signature that holds.
    return answer.data !== undefined && /^0x0*1$/.test(answer.data)
  }

/** Whether `address` made the ordinary signature `signature` of the EIP-191 `message`, without the chain. */
const signedByItsAddress = (
  address: Address | undefined,
  message: string,
  signature: Hex
): Effect.Effect<boolean> =>
  address === undefined || !isOrdinarySignature(signature)
    ? Effect.succeed(false)
    : Effect.promise(() =>
        recoverMessageAddress({ message, signature }).then(
          (recovered) => isAddressEqual(recovered, address),
          () => false
        )
      )

const idRegistryAbi = parseAbi(["function idOf(address owner) view returns (uint256)"])
const keyRegistryAbi = parseAbi([
  "struct KeyData { uint8 state; uint32 keyType; }",
  "function keyDataOf(uint256 fid, bytes key) view returns (KeyData)"
])

/** The registries at the configured addresses (auth-client's own connector hard-codes them). */
const registries = (config: FedsocialConfig): CreateClientArgs["ethereum"] => {
  const publicClient = createPublicClient({
    // viem's `verifyHash` defers to the chain's own; only `verifyHash` of this chain is read.
    chain: {
      id: 10,
      name: "Optimism",
      nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
      rpcUrls: { default: { http: [config.rpcUrl] } },
      verifyHash: checkSignature(config)
    },
    // A wallet's code could otherwise have the attestor fetch URLs of its choosing (EIP-3668).
    ccipRead: false,
    transport: http(config.rpcUrl, { timeout: config.rpcTimeoutMs, retryCount: 0 })
  })
  return {
    publicClient,
    getFid: (custody) =>
      publicClient.readContract({
        address: config.idRegistry,
        abi: idRegistryAbi,
        functionName: "idOf",
        args: [custody]
      }),
    isValidAuthAddress: async (authAddress, fid) => {
      const key = encodeAbiParameters([{ type: "address" }], [authAddress])
      const data = await publicClient.readContract({
        address: config.keyRegistry,
        abi: keyRegistryAbi,
        functionName: "keyDataOf",
        args: [fid, key]
      })
      // Key type 2 (auth address), state 1 (added), as auth-client's own connector decides.
      return data.keyType === 2 && data.state === 1
    }
  }
}

export const makeFedsocialLogins = (config: FedsocialConfig) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const states = yield* OAuthStates
    const sessions = yield* SessionStore
    // Loaded on the first verification, not at start: the library imports every chain viem knows
    // (`viem/chains`), about 30 MB that an attestor whose users never sign in this way need not hold.
    const appClient = yield* Effect.cached(
      Effect.promise(() => import("@farcaster/auth-client")).pipe(
        Effect.map(({ createAppClient }) => createAppClient({ ethereum: registries(config) }))
      )
    )
    const allowed = new Set(config.redirectAllowList)

    /** Takes the nonce without making a session; a store that does not answer leaves it to expire. */
    const spendNonce = (nonce: string) =>
      states
        .take(nonce, "fedsocial")
        .pipe(
          Effect.catchAll(() =>
            Effect.logWarning(
              "a refused fedsocial sign-in's nonce could not be spent; it lapses when it expires"
            )
          )
        )

    const start: FedsocialLoginsShape["start"] = (request, client) =>
      Effect.gen(function* () {
        const redirect = request.redirect === undefined ? undefined : matchRedirect(allowed, request.redirect)
        if (request.redirect !== undefined && redirect === undefined)
          return yield* Effect.fail(new BadRequest({ message: REDIRECT_REFUSED }))
        // The library's `generateNonce` is this function.
        const nonce = generateSiweNonce()
        const { expiresAt } = yield* states
          .put(
            {
              platform: "fedsocial",
              stealthOwner: request.stealthOwner,
              ids: request.ids ?? [],
              redirect,
              codeVerifier: undefined,
              loginChallenge: request.loginChallenge
            },
            { state: nonce, client }
          )
          .pipe(Effect.mapError(startRefusal))
        return {
          nonce,
          domain: config.domain,
          uri: config.uri,
          expirationTime: new Date(expiresAt * 1000).toISOString()
        } as FedsocialStartResponse
      })

    const verify: FedsocialLoginsShape["verify"] = ({ message, signature }) =>
      Effect.gen(function* () {
        const refused = new InvalidSession({ message: REFUSED })
        const parsed = yield* Effect.try({ try: () => parseSiweMessage(message), catch: () => refused })
        const nonce = parsed.nonce
        if (nonce === undefined || parsed.domain !== config.domain || parsed.uri !== config.uri)
          return yield* Effect.fail(refused)
        if (!config.contractSignatures && !isOrdinarySignature(signature))
          return yield* Effect.fail(new Unsupported({ message: CONTRACT_SIGNATURES_REFUSED }))
        // A nonce start never gave (or that expired, or was used) is refused before the message
        // costs an RPC call; it is only peeked at: the message is checked in full before the nonce
        // is touched, since a registry that does not answer is no fault of the message and must not
        // cost the user a new start.
        const live = yield* states
          .peek(nonce, "fedsocial")
          .pipe(Effect.mapError(() => new Unavailable({ message: STATES_UNAVAILABLE })))
        // The expiry must be the one start gave (a state's times never change once stored).
        if (Option.isNone(live) || parsed.expirationTime?.getTime() !== live.value.expiresAt * 1000)
          return yield* Effect.fail(refused)
        // Refused here, at no RPC cost, it spends nothing: an ordinary signature that its message's
        // own address did not make (a contract wallet's, when allowed, is for the chain to judge).
        if (!config.contractSignatures && !(yield* signedByItsAddress(parsed.address, message, signature)))
          return yield* Effect.fail(refused)
        const client = yield* appClient
        // The library reports its verdicts in its answer; one that throws instead was handed a
        // message it cannot read (a fid too long for a number, say): refused, not a fault of ours,
        // and the nonce spent, as it may have cost a contract wallet's `eth_call` first.
        const verified = yield* Effect.tryPromise({
          try: () => client.verifySignInMessage({ nonce, domain: config.domain, message, signature }),
          catch: () => refused
        }).pipe(Effect.tapError(() => spendNonce(nonce)))
        // The library reports a registry it could not read as `unavailable` (or `unknown` when the
        // signature check itself could not reach the chain).
        const code = verified.isError ? verified.error?.errCode : undefined
        if (code === "unavailable" || code === "unknown")
          return yield* Effect.fail(new Unavailable({ message: REGISTRY_UNAVAILABLE }))
        // Refused after the registry reads: the nonce is spent, so each message that costs the RPC
        // needs a start of its own (rate-limited, bounded per address) instead of being sent again
        // and again for free until the nonce expires.
        if (verified.isError || !verified.success)
          return yield* Effect.zipRight(spendNonce(nonce), Effect.fail(refused))
        // The nonce is taken and the session made in one transaction: both happen, or neither.
        const created = yield* Effect.gen(function* () {
          // Used or expired since the peek: refused.
          const taken = yield* states.take(nonce, "fedsocial")
          if (Option.isNone(taken)) return Option.none()
          return Option.some(
            yield* sessions.create(
              {
                platform: "fedsocial",
                userId: String(verified.fid),
                stealthOwner: taken.value.stealthOwner,
                ids: taken.value.ids
              },
              { loginChallenge: taken.value.loginChallenge, startedAt: taken.value.startedAt }
            )
          )
        }).pipe(
          sql.withTransaction,
          Effect.catchTags({
            OAuthStateStoreError: () => Effect.fail(new Unavailable({ message: STATES_UNAVAILABLE })),
            SessionStoreError: () => Effect.fail(new Unavailable({ message: SESSION_STORE_UNAVAILABLE })),
            LoginStartedBeforeContest: (e) => Effect.fail(new InvalidSession({ message: e.message })),
            // A nested session store failure surfaces as its own error; the transaction's own is this.
            SqlError: () => Effect.fail(new Unavailable({ message: SESSION_STORE_UNAVAILABLE })),
            // Not asked for here (no single-use key): the type allows it, the store never sends it.
            LoginAlreadyUsed: () => Effect.fail(refused)
          })
        )
        if (Option.isNone(created)) return yield* Effect.fail(refused)
        return sessionResponse(created.value)
      })

    return { start, verify } satisfies FedsocialLoginsShape
  })
