/**
 * The body of `GET /v1/info` (docs/attestor.md §4, built by `attestorInfo` in attestorInfo.ts). Nothing in
 * it changes while the process runs, so it is computed once and served from memory; only the chain
 * id may have to wait for the RPC when no `CHAIN_ID` (or deployment file) names it.
 */
import { Context, Effect, Layer, Option } from "effect"
import type { AttestorInfo } from "../../../schema/attestor.js"
import type { Unavailable } from "../../../schema/errors.js"
import { keptOnceRead } from "../../background/once.js"
import { ChainId } from "../../chain/chainId.js"
import { AttestorSettings } from "../../config/attestor.js"
import { attestorInfo } from "./attestorInfo.js"

export interface InfoDocumentShape {
  readonly current: Effect.Effect<AttestorInfo, Unavailable>
}

export class InfoDocument extends Context.Tag("InfoDocument")<InfoDocument, InfoDocumentShape>() {
  static readonly layer: Layer.Layer<InfoDocument, never, AttestorSettings | ChainId> = Layer.effect(
    InfoDocument,
    Effect.gen(function* () {
      const settings = yield* AttestorSettings
      const chainId = yield* ChainId
      // Built now with a configured chain id; else with the RPC's answer, read once and kept.
      const current = yield* Option.match(settings.chainId, {
        onSome: (id) => Effect.succeed(Effect.succeed(attestorInfo(settings, id))),
        onNone: () => keptOnceRead(Effect.map(chainId.get, (id) => attestorInfo(settings, id)))
      })
      return { current }
    })
  )
}
