/**
 * `POST /v1/escrows` `{ session, loginSecret? }` → `{ escrows: Escrow[] }` (docs/attestor.md §4
 * "POST /v1/escrows and POST /v1/bind", §5): the session authenticated first (401
 * `invalid_session`, before any index is looked at), then its escrows as the indexes know them
 * (`userEscrows.ts`: the hint index, the account projection, the freshness rule). `POST /v1/bind`
 * considers the same escrows through `indexed`.
 *
 * Nothing of the session, user or escrows reaches a log line or a metric.
 */
import { Context, Effect, Layer } from "effect"
import { type EscrowsRequest, type EscrowsResponse, platformIdOf } from "../../../schema/attestor.js"
import type { InvalidSession, Unavailable } from "../../../schema/errors.js"
import { ChainClient } from "../../chain/ChainClient.js"
import { Indexer } from "../../indexer/Indexer.js"
import { HintIndex } from "../hints/HintIndex.js"
import { authenticate, SessionStore, type StoredSession } from "../logins/SessionStore.js"
import { PublicCommitments } from "../publicHandles/PublicCommitments.js"
import { escrowOf, type IndexedEscrows, indexedEscrows } from "./userEscrows.js"

export interface SessionEscrowsShape {
  /** The answer to `POST /v1/escrows`. */
  readonly list: (request: EscrowsRequest) => Effect.Effect<EscrowsResponse, InvalidSession | Unavailable>
  /** A valid session's escrows as the indexes hold them: what `POST /v1/bind` signs for. */
  readonly ofSession: (session: StoredSession) => Effect.Effect<IndexedEscrows, Unavailable>
  /** The session of a token (and the login's secret when its login carried a challenge). */
  readonly authenticate: (
    token: EscrowsRequest["session"],
    loginSecret: EscrowsRequest["loginSecret"]
  ) => Effect.Effect<StoredSession, InvalidSession | Unavailable>
}

export class SessionEscrows extends Context.Tag("SessionEscrows")<SessionEscrows, SessionEscrowsShape>() {
  static readonly layer: Layer.Layer<
    SessionEscrows,
    never,
    Indexer | HintIndex | PublicCommitments | ChainClient | SessionStore
  > = Layer.effect(
    SessionEscrows,
    Effect.gen(function* () {
      const sources = {
        indexer: yield* Indexer,
        hints: yield* HintIndex,
        publics: yield* PublicCommitments,
        chain: yield* ChainClient
      }
      const sessions = yield* SessionStore
      const ofSession = (session: StoredSession) =>
        indexedEscrows(sources, platformIdOf(session.platform), session.userId, session.ids)
      const authenticated: SessionEscrowsShape["authenticate"] = (token, loginSecret) =>
        authenticate(token, loginSecret).pipe(Effect.provideService(SessionStore, sessions))
      return {
        list: (request) =>
          authenticated(request.session, request.loginSecret).pipe(
            Effect.flatMap(ofSession),
            Effect.map((found) => ({ escrows: found.escrows.map(escrowOf) }))
          ),
        ofSession,
        authenticate: authenticated
      }
    })
  )
}
