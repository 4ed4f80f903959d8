/**
 * Typed clients of both services, derived from the same `HttpApi` definitions as the servers: each
 * endpoint is a method whose request is checked and encoded by the request schema, whose answer is
 * decoded by the response schema, and whose refusals arrive in the error channel as the tagged
 * errors of `schema/errors.ts` (`NonceMismatch`, `FeeTooLow`, `RateLimited`, …), chosen by status.
 *
 *   const relayer = yield* relayerClient("http://127.0.0.1:8080")
 *   const quote = yield* relayer.quote.quote({ urlParams: { asset, adapter } })
 *
 * Imported by wallets as `fee-vault-services/client`.
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpApiClient from "@effect/platform/HttpApiClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { Data, Effect, FiberRef, Schema } from "effect"
import { bytesToHex, hexToBytes, sha256 } from "viem"
import {
  type BindSignature,
  LoginChallenge,
  LoginSecret,
  type MessengerAuth,
  SessionToken
} from "../schema/attestor.js"
import { RateLimited } from "../schema/errors.js"
// The API assemblies, in one place: the only lines to change when their modules move.
import { AttestorApi } from "./attestor/api.js"
import { signWidgetPayload, widgetKey } from "./attestor/logins/messenger/messengerWidget.js"
import { RelayerApi } from "./relayer/api/index.js"

// The vault's and the shield adapter's ABIs, for the calls a wallet makes itself (deposit, …).
export { feeVaultAbi, shieldAdapterAbi } from "../contracts/abi.js"
// The wire language: request and response schemas, ids (`computeId`, `ownerCommitment`,
// `handleCommitment`, …), EIP-712 domains and types (`vaultDomain`, `vaultTypes`, …) and the
// tagged errors.
export * from "../schema/index.js"
// A creator's hint (docs/protocol.md §6): sealed to each recipient's hint key, packed for
// `TokenLaunched`, and the kind-2 id it commits to.
export {
  encodeBeneficiaryHint,
  type HintPlaintext,
  hintBeneficiaryId,
  hintJson,
  MAX_ENVELOPES,
  sealBeneficiaryHint,
  sealHint
} from "./attestor/hints/hintEnvelopes.js"
export { AttestorApi, RelayerApi }

export interface ClientOptions {
  /**
   * Headers added to every request, or a function giving them per request: `authorization` for
   * `/v1/metrics`, say, or `x-forwarded-for` behind a trusted proxy.
   */
  readonly headers?: Readonly<Record<string, string>> | (() => Readonly<Record<string, string>>)
}

/**
 * The `Retry-After` of the 429 being decoded: the body does not repeat it, so the client reads the
 * header as the answer arrives and `RateLimited.retryAfterSeconds` takes it when the body decodes
 * (both in the call's own fiber).
 */
const lastRetryAfter = FiberRef.unsafeMake<number>(0)

const retryAfterSeconds = (header: string | undefined): number => {
  const seconds = header === undefined ? Number.NaN : Number(header)
  return Number.isFinite(seconds) && seconds >= 0 ? seconds : 0
}

const transformClient =
  (options: ClientOptions | undefined) =>
  (client: HttpClient.HttpClient): HttpClient.HttpClient => {
    const headers = options?.headers
    // No `traceparent`: browsers would preflight it and the services' CORS does not list it, and
    // one trace id on every member's request would tie a user's logins together.
    const untraced = HttpClient.withTracerPropagation(client, false)
    const withHeaders =
      headers === undefined
        ? untraced
        : HttpClient.mapRequest(untraced, (request) =>
            HttpClientRequest.setHeaders(request, typeof headers === "function" ? headers() : headers)
          )
    return HttpClient.tap(withHeaders, (response) =>
      response.status === 429
        ? FiberRef.set(lastRetryAfter, retryAfterSeconds(response.headers["retry-after"]))
        : Effect.void
    )
  }

const transformResponse = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.catchIf(
    effect,
    (error): error is E & RateLimited => error instanceof RateLimited,
    (error) =>
      Effect.flatMap(FiberRef.get(lastRetryAfter), (seconds) =>
        Effect.fail(new RateLimited({ message: error.message, retryAfterSeconds: seconds }) as E)
      )
  )

/** The relayer's client over the `HttpClient` in context. */
export const relayerClient = (baseUrl: string | URL, options?: ClientOptions) =>
  HttpApiClient.make(RelayerApi, { baseUrl, transformClient: transformClient(options), transformResponse })

/** The attestor's client over the `HttpClient` in context. */
export const attestorClient = (baseUrl: string | URL, options?: ClientOptions) =>
  HttpApiClient.make(AttestorApi, { baseUrl, transformClient: transformClient(options), transformResponse })

export type RelayerClient = Effect.Effect.Success<ReturnType<typeof relayerClient>>
export type AttestorClient = Effect.Effect.Success<ReturnType<typeof attestorClient>>

/** `relayerClient` over the platform's `fetch`. */
export const relayerFetchClient = (baseUrl: string | URL, options?: ClientOptions) =>
  relayerClient(baseUrl, options).pipe(Effect.provide(FetchHttpClient.layer))

/** `attestorClient` over the platform's `fetch`. */
export const attestorFetchClient = (baseUrl: string | URL, options?: ClientOptions) =>
  attestorClient(baseUrl, options).pipe(Effect.provide(FetchHttpClient.layer))

/**
 * Runs one client call as a Promise that never rejects for a refusal: `{ ok: true, value }`, or
 * `{ ok: false, error }` with the tagged error (or the transport or decoding failure). Defects
 * still reject.
 */
export const callPromise = <A, E>(
  call: Effect.Effect<A, E>
): Promise<{ readonly ok: true; readonly value: A } | { readonly ok: false; readonly error: E }> =>
  Effect.runPromise(
    Effect.match(call, {
      onSuccess: (value) => ({ ok: true, value }) as const,
      onFailure: (error) => ({ ok: false, error }) as const
    })
  )

// ---------------------------------------------------------------------------------------------
// A recipient's login, done safely (docs/attestor.md "Writing a client")
// ---------------------------------------------------------------------------------------------

/** The challenge of a login secret: its SHA-256 (docs/protocol.md §10 "Login challenge"). */
export const loginChallengeOf = (loginSecret: LoginSecret): LoginChallenge =>
  Schema.decodeSync(LoginChallenge)(sha256(hexToBytes(loginSecret)))

/**
 * A fresh login secret, drawn per login and kept by the client (a browser: `sessionStorage`), and
 * the challenge its start sends. The session that login makes answers only with this secret.
 */
export const newLoginSecret = (): {
  readonly loginSecret: LoginSecret
  readonly loginChallenge: LoginChallenge
} => {
  const loginSecret = Schema.decodeSync(LoginSecret)(
    bytesToHex(globalThis.crypto.getRandomValues(new Uint8Array(32)))
  )
  return { loginSecret, loginChallenge: loginChallengeOf(loginSecret) }
}

/** A login this client started and has not finished: what it keeps until the redirect comes back. */
export interface PendingLogin {
  readonly loginSecret: LoginSecret
  readonly stealthOwner: `0x${string}`
}

/** What a login's redirect brought back to the client that started it. */
export type LoginLanding =
  | { readonly _tag: "Session"; readonly session: SessionToken; readonly login: PendingLogin }
  | { readonly _tag: "Refused"; readonly code: string }

/**
 * Reads the fragment of the page a login redirected to (`#attest=<session>` or `#error=<code>`).
 * Without a login this client started (`pending` undefined) nothing is read: a session someone else
 * started, sent here to make this client bind it (login CSRF), is ignored.
 */
export const loginLanding = (
  location: string | URL,
  pending: PendingLogin | undefined
): LoginLanding | undefined => {
  if (pending === undefined) return undefined
  const fragment = new URLSearchParams(new URL(location).hash.replace(/^#/, ""))
  const error = fragment.get("error")
  if (error !== null) return { _tag: "Refused", code: error }
  const token = fragment.get("attest")
  if (token === null || !Schema.is(SessionToken)(token)) return undefined
  return { _tag: "Session", session: token, login: pending }
}

/** A bind signature for another key than the client's own: never proposed. */
export class ForeignBind extends Data.TaggedError("ForeignBind")<{
  readonly beneficiaryId: string
  readonly newOwner: string
}> {
  override get message() {
    return `the attestor signed a bind of ${this.beneficiaryId} for ${this.newOwner}, not for this client's key`
  }
}

/**
 * The binds, once each is checked to be for `stealthOwner`, the key the client chose before its
 * login: a signature for any other key fails the whole answer, before anything is proposed.
 */
export const bindsFor = (
  binds: ReadonlyArray<BindSignature>,
  stealthOwner: string
): Effect.Effect<ReadonlyArray<BindSignature>, ForeignBind> => {
  const foreign = binds.find((bind) => bind.newOwner.toLowerCase() !== stealthOwner.toLowerCase())
  return foreign === undefined
    ? Effect.succeed(binds)
    : Effect.fail(new ForeignBind({ beneficiaryId: foreign.beneficiaryId, newOwner: foreign.newOwner }))
}

// ---------------------------------------------------------------------------------------------
// The devnet's messenger widget (docs/protocol.md §9)
// ---------------------------------------------------------------------------------------------

/**
 * A messenger login payload signed with a bot token, as the messenger's widget would hand it
 * over: on the devnet, whose bot token is public, a client stands in for the widget with it. No
 * production bot token belongs in a client.
 */
export const signDevnetWidgetPayload = (
  botToken: string,
  fields: Omit<MessengerAuth, "hash">
): MessengerAuth => signWidgetPayload(widgetKey(botToken), fields)

// Binding with a committee: logins at every attestor, one deadline, merged and checked signatures.
export * from "./committee.js"
