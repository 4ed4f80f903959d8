/**
 * fedsocial sign-in (Sign In With Farcaster; docs/attestor.md §3 "POST /v1/oauth/fedsocial/verify",
 * §4; docs/protocol.md §10 "fedsocial").
 *
 * Start: a fresh alphanumeric nonce is stored with the intent (stealth owner, ids, and the optional
 * login challenge, which the session keeps: docs/protocol.md §10 "Login challenge") for
 * `OAUTH_STATE_TTL_SECONDS`, single use (`OAuthStates`), and the client is told the `nonce`,
 * `domain`, `uri` and `expirationTime` its FIP-11 message must carry.
 *
 * Verify, each refusal 401 `invalid_session` with no session made:
 * 1. the message parses as an EIP-4361 message and names a nonce this attestor issued, taken once
 *    (unknown, used or expired: refused); the stealth owner and ids come from that nonce, never
 *    from the message;
 * 2. its `uri` and `expirationTime` are the ones start gave; `@farcaster/auth-client`'s
 *    `verifySignInMessage` checks the statement, chain id 10, the single `farcaster://fid/N`
 *    resource, domain, nonce, expiry and signature, and that the signer is the fid's custody
 *    address on the IdRegistry or one of its auth addresses on the KeyRegistry.
 * The registries are read over `FEDSOCIAL_RPC_URL` (Optimism by default): not answering is 503
 * `unavailable`. Optimism's public endpoint, the default, is rate-limited: start-up warns once
 * while it is configured (docs/operations.md "Provider endpoints").
 *
 * Nothing of a message, signature, nonce or fid reaches a log line, a metric or an error message.
 */
import type { CreateClientArgs } from "@farcaster/auth-client"
import { Context, Effect, Layer, Option } from "effect"
import { type Address, createPublicClient, encodeAbiParameters, http, parseAbi } from "viem"
import { generateSiweNonce, parseSiweMessage } from "viem/siwe"
import type {
  FedsocialStartResponse,
  FedsocialVerifyRequest,
  OAuthStartRequest,
  SessionResponse
} from "../../../schema/attestor.js"
import { BadRequest, InvalidSession, Unavailable } from "../../../schema/errors.js"
import { isPublicOptimismRpc } from "../../config/attestor.js"
import { sessionResponse } from "../logins.js"
import { SESSION_STORE_UNAVAILABLE, SessionStore } from "../SessionStore.js"
import { OAuthStates } from "./OAuthStates.js"
import { matchRedirect, REDIRECT_REFUSED } from "./redirectAllowList.js"

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
}

export type FedsocialStartError = BadRequest | Unavailable
export type FedsocialVerifyError = InvalidSession | Unavailable

export interface FedsocialLoginsShape {
  readonly start: (request: OAuthStartRequest) => Effect.Effect<FedsocialStartResponse, FedsocialStartError>
  readonly verify: (request: FedsocialVerifyRequest) => Effect.Effect<SessionResponse, FedsocialVerifyError>
}

export class FedsocialLogins extends Context.Tag("FedsocialLogins")<FedsocialLogins, FedsocialLoginsShape>() {
  static readonly layer = (
    config: FedsocialConfig
  ): Layer.Layer<FedsocialLogins, never, OAuthStates | SessionStore> =>
    Layer.effect(FedsocialLogins, Effect.zipRight(publicRpcWarning(config), makeFedsocialLogins(config)))

  /** No fedsocial on this instance: `LoginOffered` refuses its routes before they get here. */
  static readonly unconfigured: Layer.Layer<FedsocialLogins> = Layer.succeed(FedsocialLogins, {
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

const idRegistryAbi = parseAbi(["function idOf(address owner) view returns (uint256)"])
const keyRegistryAbi = parseAbi([
  "struct KeyData { uint8 state; uint32 keyType; }",
  "function keyDataOf(uint256 fid, bytes key) view returns (KeyData)"
])

/** The registries at the configured addresses (auth-client's own connector hard-codes them). */
const registries = (config: FedsocialConfig): CreateClientArgs["ethereum"] => {
  const publicClient = createPublicClient({
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

    const start: FedsocialLoginsShape["start"] = (request) =>
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
            { state: nonce }
          )
          .pipe(Effect.mapError(() => new Unavailable({ message: "the login state store is not answering" })))
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
        if (parsed.nonce === undefined) return yield* Effect.fail(refused)
        const taken = yield* states
          .take(parsed.nonce)
          .pipe(Effect.mapError(() => new Unavailable({ message: "the login state store is not answering" })))
        if (Option.isNone(taken) || taken.value.platform !== "fedsocial") return yield* Effect.fail(refused)
        const intent = taken.value
        // The expiry must be the one start gave (the nonce's own end, still ahead: `take` says so).
        if (parsed.uri !== config.uri || parsed.expirationTime?.getTime() !== intent.expiresAt * 1000)
          return yield* Effect.fail(refused)
        const client = yield* appClient
        const verified = yield* Effect.promise(() =>
          client.verifySignInMessage({
            nonce: parsed.nonce as string,
            domain: config.domain,
            message,
            signature
          })
        )
        if (verified.isError) {
          // The library reports a registry it could not read as `unavailable` (or `unknown` when the
          // signature check itself could not reach the chain).
          const code = verified.error?.errCode
          return yield* Effect.fail(
            code === "unavailable" || code === "unknown"
              ? new Unavailable({ message: REGISTRY_UNAVAILABLE })
              : refused
          )
        }
        if (!verified.success) return yield* Effect.fail(refused)
        const created = yield* sessions
          .create(
            {
              platform: "fedsocial",
              userId: String(verified.fid),
              stealthOwner: intent.stealthOwner,
              ids: intent.ids
            },
            { loginChallenge: intent.loginChallenge }
          )
          .pipe(Effect.mapError(() => new Unavailable({ message: SESSION_STORE_UNAVAILABLE })))
        return sessionResponse(created)
      })

    return { start, verify } satisfies FedsocialLoginsShape
  })
