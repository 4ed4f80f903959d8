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
import { Effect, FiberRef } from "effect"
import { RateLimited } from "../schema/errors.js"
// The API assemblies, in one place: the only lines to change when their modules move.
import { AttestorApi } from "./attestor/api/index.js"
import { RelayerApi } from "./relayer/api/index.js"

// The wire language: request and response schemas, ids, EIP-712 types and the tagged errors.
export * from "../schema/index.js"
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
    const withHeaders =
      headers === undefined
        ? client
        : HttpClient.mapRequest(client, (request) =>
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
