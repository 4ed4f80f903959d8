/**
 * `GET /v1/info` (spec/attestor.md §2 AttestorInfo): what a creator and a client need to know
 * about this attestor before talking to it. Nothing in it changes while the process runs, so the
 * body is computed once and served from memory; only the chain id may have to wait for the RPC
 * when no `CHAIN_ID` (or deployment file) names it.
 */
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Effect, Option, Redacted, Ref, Schema } from "effect"
import { privateKeyToAccount } from "viem/accounts"
import { AttestorInfo, HandleLookup, type Platform } from "../../schema/attestor.js"
import { Unavailable, Wire } from "../../schema/errors.js"
import { ChainClient } from "../chain/ChainClient.js"
import { AttestorSettings, type AttestorSettingsShape } from "../config/attestor.js"
import { hintPublicKeyOf } from "./hints.js"

export const infoEndpoint = HttpApiEndpoint.get("info", "/v1/info")
  .addSuccess(AttestorInfo)
  .addError(Wire.Unavailable)

export class AttestorInfoGroup extends HttpApiGroup.make("info").add(infoEndpoint) {}

/**
 * The platforms whose login this instance can actually perform: the only list `platforms`
 * advertises, so a client never sends a recipient to a login that cannot succeed. Platforms
 * appear here as their login verification (OAuth app, widget token, sign-in verifier) is
 * configured. This version implements the messenger widget login only: messenger is listed when
 * `MESSENGER_BOT_TOKEN` is set.
 */
export const loginPlatforms = (settings: AttestorSettingsShape): ReadonlyArray<Platform> =>
  Option.isSome(settings.messengerBotToken) ? ["messenger"] : []

/**
 * What `handleLookup` says: the configured mode, the platforms a lookup can resolve in it and
 * the price. Settings only admit `off` in this version (src/config/attestor.ts), so nothing can
 * be looked up or bought.
 */
export const handleLookupInfo = (settings: AttestorSettingsShape): HandleLookup => ({
  mode: settings.handleLookupMode,
  platforms: [],
  price: null
})

/** The info body for a known chain id; a defect if the settings could not make a valid body. */
export const attestorInfo = (settings: AttestorSettingsShape, chainId: number): AttestorInfo =>
  Schema.decodeSync(AttestorInfo)({
    chainId,
    vault: settings.vault,
    attestor: privateKeyToAccount(Redacted.value(settings.signingKey)).address,
    hintPublicKey: hintPublicKeyOf(Redacted.value(settings.hintKey)),
    platforms: loginPlatforms(settings),
    bindDeadlineSeconds: settings.bindDeadlineSeconds,
    handleLookup: Schema.encodeSync(HandleLookup)(handleLookupInfo(settings))
  })

/* Built against a view holding this group alone (see src/relayer/quote.ts): no import cycle with api.ts. */
const InfoApiView = HttpApi.make("attestor").add(AttestorInfoGroup)

export const AttestorInfoLive = HttpApiBuilder.group(InfoApiView, "info", (handlers) =>
  Effect.gen(function* () {
    const settings = yield* AttestorSettings
    const chain = yield* ChainClient
    const cached = yield* Ref.make<Option.Option<AttestorInfo>>(
      Option.map(settings.chainId, (chainId) => attestorInfo(settings, chainId))
    )
    // Without a configured chain id the RPC's answer is read once and the body cached with it.
    const fromChain = chain.chainId.pipe(
      Effect.mapError(() => new Unavailable({ message: "the chain RPC is not answering" })),
      Effect.map((chainId) => attestorInfo(settings, chainId)),
      Effect.tap((info) => Ref.set(cached, Option.some(info)))
    )
    return handlers.handle("info", () =>
      Effect.flatMap(Ref.get(cached), Option.match({ onSome: Effect.succeed, onNone: () => fromChain }))
    )
  })
)
