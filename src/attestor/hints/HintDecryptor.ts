/**
 * The attestor's hint key as a service: opens the hints of `TokenLaunched` events addressed to
 * this attestor (docs/protocol.md §6) and counts what it sets aside in
 * `attestor_hints_rejected_total{reason}` (reasons: `hintRejectionReasons`). The key never leaves
 * the service; the hint index folds with its pure `opener`, which gives the same answer for the
 * same event every time, so a rebuild equals the live index.
 *
 * Nothing about a hint is logged or labelled: no id, user id, platform or token.
 *
 * Layers: `HintDecryptor.layer` reads `HINT_PRIVATE_KEY` from `AttestorSettings`;
 * `HintDecryptor.fromKey(key)` takes the key itself; `HintDecryptor.Test` uses `TEST_HINT_PRIVATE_KEY`.
 */

import { Context, Data, Effect, Layer, Metric, Option, Redacted } from "effect"
import { type Hex, keccak256, stringToHex } from "viem"
import { AttestorSettings } from "../../config/attestor.js"
import { counter, type SeriesAtZero } from "../../http/metrics.js"
import type { EscrowHint } from "../../store/projections/hints.js"
import {
  type HintOpener,
  type HintRejection,
  hintOpener,
  hintPublicKeyOf,
  hintRejectionReasons
} from "./hintEnvelopes.js"

export const hintsRejected = counter(
  "attestor_hints_rejected_total",
  "Hints or envelopes set aside by reason (event, encoding, too_large, plaintext, mismatch); another attestor's envelope counts nothing"
)

const rejectedBy = new Map(
  hintRejectionReasons.map((reason) => [reason, Metric.tagged(hintsRejected, "reason", reason)] as const)
)

/** The rejections by every reason, exported at 0 from start-up (docs/operations.md "Metrics reference"). */
export const hintRejectionSeriesAtZero: ReadonlyArray<SeriesAtZero> = [...rejectedBy.values()]

/** Counts each rejection under its reason. */
export const countRejections = (rejected: ReadonlyArray<HintRejection>): Effect.Effect<void> =>
  rejected.length === 0
    ? Effect.void
    : Effect.forEach(rejected, (reason) => Metric.increment(rejectedBy.get(reason) ?? hintsRejected), {
        discard: true
      })

export interface HintDecryptorShape {
  /** The compressed secp256k1 public key hints are sealed to (`AttestorInfo.hintPublicKey`). */
  readonly publicKey: Hex
  /**
   * The hint of a launch addressed to this attestor that commits to `beneficiaryId`, if any;
   * rejected hints and envelopes are counted. Never fails.
   */
  readonly open: (beneficiaryId: Hex, beneficiaryHint: Hex) => Effect.Effect<Option.Option<EscrowHint>>
  /** The same opening as a pure function, counting nothing: what the hint index folds with. */
  readonly opener: HintOpener
}

/** `HINT_PRIVATE_KEY` is 32 bytes but not a secp256k1 private key (zero, or not below the order). */
export class InvalidHintKey extends Data.TaggedError("InvalidHintKey")<{}> {
  override get message() {
    return "HINT_PRIVATE_KEY is not a valid secp256k1 private key"
  }
}

export const makeHintDecryptor = (key: Redacted.Redacted<Hex> | Hex) =>
  Effect.gen(function* () {
    const secret = Redacted.isRedacted(key) ? Redacted.value(key) : key
    const { opener, publicKey } = yield* Effect.try({
      try: () => ({ opener: hintOpener(secret), publicKey: hintPublicKeyOf(secret) }),
      catch: () => new InvalidHintKey()
    })
    const open: HintDecryptorShape["open"] = (beneficiaryId, beneficiaryHint) =>
      Effect.suspend(() => {
        const opening = opener(beneficiaryId, beneficiaryHint)
        return Effect.as(countRejections(opening.rejected), Option.fromNullable(opening.hint))
      })
    return { publicKey, open, opener } satisfies HintDecryptorShape
  })

/** A fixed hint key for tests: never use it for anything real. */
export const TEST_HINT_PRIVATE_KEY: Hex = keccak256(stringToHex("fee-vault test hint key"))

export class HintDecryptor extends Context.Tag("HintDecryptor")<HintDecryptor, HintDecryptorShape>() {
  /** The attestor's own key, `HINT_PRIVATE_KEY`; an invalid one stops start-up. */
  static readonly layer: Layer.Layer<HintDecryptor, InvalidHintKey, AttestorSettings> = Layer.effect(
    HintDecryptor,
    Effect.flatMap(AttestorSettings, (settings) => makeHintDecryptor(settings.hintKey))
  )

  static readonly fromKey = (key: Redacted.Redacted<Hex> | Hex): Layer.Layer<HintDecryptor, InvalidHintKey> =>
    Layer.effect(HintDecryptor, makeHintDecryptor(key))

  /** The decryptor of `TEST_HINT_PRIVATE_KEY`. */
  static readonly Test: Layer.Layer<HintDecryptor> = Layer.orDie(HintDecryptor.fromKey(TEST_HINT_PRIVATE_KEY))
}
