/**
 * `GET /v1/info` (docs/attestor.md §2 AttestorInfo): what a creator and a client need to know
 * about this attestor before talking to it: the body, built from the settings and the chain id
 * (served by `InfoDocument`).
 */
import { Option, Redacted, Schema } from "effect"
import {
  AttestorInfo,
  type HandleLookup,
  LookupPlatform,
  networkOf,
  Platform
} from "../../../schema/attestor.js"
import type { AttestorSettingsShape } from "../../config/attestor.js"
import { hintPublicKeyOf } from "../hints/hintEnvelopes.js"
import { handleResolvers } from "../lookups/handleResolvers.js"

/**
 * The platforms whose login this instance can actually perform: the only list `platforms`
 * advertises, so a client never sends a recipient to a login that cannot succeed. A platform is
 * listed once its login is configured: messenger with `MESSENGER_BOT_TOKEN`, microblog, codehost
 * and community with their OAuth app's client id, fedsocial with `FEDSOCIAL_DOMAIN`.
 */
export const loginPlatforms = (settings: AttestorSettingsShape): ReadonlyArray<Platform> =>
  Platform.literals.filter((platform) =>
    platform === "messenger"
      ? Option.isSome(settings.messengerBotToken)
      : platform === "fedsocial"
        ? Option.isSome(settings.fedsocial)
        : settings.oauthApps[platform] !== undefined
  )

/**
 * What `handleLookup` says: the configured mode, the platforms a lookup can resolve in it (none with
 * `off`; else those with a directory: microblog needs its bearer token) and, when paid, the price a
 * creator sees before paying (docs/attestor.md §2): the same for every platform.
 */
export const handleLookupInfo = (
  settings: AttestorSettingsShape,
  chainId: number
): typeof HandleLookup.Encoded => {
  const platforms =
    settings.handleLookupMode === "off"
      ? []
      : LookupPlatform.literals.filter((p) => handleResolvers(settings.handleResolvers)[p] !== undefined)
  if (settings.handleLookupMode !== "paid" || Option.isNone(settings.paidLookup))
    return { mode: settings.handleLookupMode === "free" ? "free" : "off", platforms, price: null }
  const paid = settings.paidLookup.value
  return {
    mode: "paid",
    platforms,
    price: {
      network: networkOf(chainId),
      asset: settings.settlementAsset,
      amount: paid.amount.toString(),
      decimals: paid.decimals,
      symbol: paid.symbol,
      payTo: paid.payTo,
      assetTransferMethod: paid.transferMethod
    }
  }
}

/** The info body for a known chain id; a defect if the settings could not make a valid body. */
export const attestorInfo = (settings: AttestorSettingsShape, chainId: number): AttestorInfo =>
  Schema.decodeSync(AttestorInfo)({
    chainId,
    vault: settings.vault,
    attestor: settings.signingKey.address,
    hintPublicKey: hintPublicKeyOf(Redacted.value(settings.hintKey)),
    platforms: loginPlatforms(settings),
    bindDeadlineSeconds: settings.bindDeadlineSeconds,
    handleLookup: handleLookupInfo(settings, chainId)
  })
