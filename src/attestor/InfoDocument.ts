/**
 * The body of `GET /v1/info` (docs/attestor.md §4, built by `attestorInfo` in info.ts). Nothing in
 * it changes while the process runs, so it is computed once and served from memory; only the chain
 * id may have to wait for the RPC when no `CHAIN_ID` (or deployment file) names it.
 */
import { Context, Effect, Layer, Option, Ref } from "effect"
import type { AttestorInfo } from "../../schema/attestor.js"
import type { Unavailable } from "../../schema/errors.js"
import { ChainId } from "../chain/chainId.js"
import { AttestorSettings } from "../config/attestor.js"
import { attestorInfo } from "./info.js"

export interface InfoDocumentShape {
  readonly current: Effect.Effect<AttestorInfo, Unavailable>
}

export class InfoDocument extends Context.Tag("InfoDocument")<InfoDocument, InfoDocumentShape>() {
  static readonly layer: Layer.Layer<InfoDocument, never, AttestorSettings | ChainId> = Layer.effect(
    InfoDocument,
    Effect.gen(function* () {
      const settings = yield* AttestorSettings
      const chainId = yield* ChainId
      const cached = yield* Ref.make<Option.Option<AttestorInfo>>(
        Option.map(settings.chainId, (id) => attestorInfo(settings, id))
      )
      // Without a configured chain id the RPC's answer is read once and the body cached with it.
      const fromChain = chainId.get.pipe(
        Effect.map((id) => attestorInfo(settings, id)),
        Effect.tap((info) => Ref.set(cached, Option.some(info)))
      )
      return {
        current: Effect.flatMap(
          Ref.get(cached),
          Option.match({ onSome: Effect.succeed, onNone: () => fromChain })
        )
      }
    })
  )
}
