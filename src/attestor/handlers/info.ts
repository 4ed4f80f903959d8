/**
 * The handler of `GET /v1/info` (src/attestor/api/info.ts). Nothing in the body changes while the
 * process runs, so it is computed once and served from memory; only the chain id may have to wait
 * for the RPC when no `CHAIN_ID` (or deployment file) names it.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Option, Ref } from "effect"
import type { AttestorInfo } from "../../../schema/attestor.js"
import { ChainId } from "../../chain/chainId.js"
import { AttestorSettings } from "../../config/attestor.js"
import { AttestorApi } from "../api/index.js"
import { attestorInfo } from "../info.js"

export const AttestorInfoLive = HttpApiBuilder.group(AttestorApi, "info", (handlers) =>
  Effect.gen(function* () {
    const settings = yield* AttestorSettings
    const cached = yield* Ref.make<Option.Option<AttestorInfo>>(
      Option.map(settings.chainId, (chainId) => attestorInfo(settings, chainId))
    )
    // Without a configured chain id the RPC's answer is read once and the body cached with it.
    const fromChain = (yield* ChainId).get.pipe(
      Effect.map((chainId) => attestorInfo(settings, chainId)),
      Effect.tap((info) => Ref.set(cached, Option.some(info)))
    )
    return handlers.handle("info", () =>
      Effect.flatMap(Ref.get(cached), Option.match({ onSome: Effect.succeed, onNone: () => fromChain }))
    )
  })
)
