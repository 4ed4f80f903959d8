/**
 * The attestor process: settings, storage, chain client, vault indexer, hint index and HTTP
 * server. Tests and the devnet compose the same layer; only the settings differ.
 */
import { Effect, Layer, Option } from "effect"
import { AttestationStore } from "../src/attestor/AttestationStore.js"
import { AttestorApi } from "../src/attestor/api/index.js"
import { attestorRoleCheckLayer } from "../src/attestor/attestorRoleCheck.js"
import { HintDecryptor } from "../src/attestor/HintDecryptor.js"
import { AttestorHandlers } from "../src/attestor/handlers/index.js"
import { HandleLookups } from "../src/attestor/handles/HandleLookups.js"
import { hintIndexLayer } from "../src/attestor/hintIndex.js"
import { attestorOutcomes } from "../src/attestor/metrics.js"
import { FedsocialLogins } from "../src/attestor/oauth/FedsocialLogins.js"
import { OAuthLogins } from "../src/attestor/oauth/OAuthLogins.js"
import { OAuthStates } from "../src/attestor/oauth/OAuthStates.js"
import { PublicCommitments } from "../src/attestor/PublicCommitments.js"
import { PaymentStore } from "../src/attestor/payments/PaymentStore.js"
import { attestorIpRateLimit } from "../src/attestor/rateLimits.js"
import { SessionStore } from "../src/attestor/SessionStore.js"
import { vetoWatcherLayer } from "../src/attestor/VetoWatcher.js"
import { chainClientLayer } from "../src/chain/ChainClient.js"
import { ChainId } from "../src/chain/chainId.js"
import { devnetChainClockLayer } from "../src/chain/devnetChainClock.js"
import { AttestorSettings } from "../src/config/attestor.js"
import { listenOptionsOf, serveApi } from "../src/http/server.js"
import { indexerConfigOf, indexerLayer } from "../src/indexer/Indexer.js"
import { eventStoreLayer } from "../src/store/EventStore.js"
import { storageLayer } from "../src/store/sql.js"

/**
 * Everything below the HTTP server, given the settings: the chain, the attestor's own database
 * with its sessions and handle-lookup payments, the vault indexer writing its event store, the hint index folding its
 * `TokenLaunched` events, and the veto watcher judging the pending bind proposals.
 */
export const attestorServices = Layer.unwrapEffect(
  Effect.map(AttestorSettings, (settings) => {
    const base = Layer.mergeAll(
      chainClientLayer({
        rpcUrl: settings.rpcUrl.href,
        timeoutMs: settings.rpcTimeoutMs,
        circuit: { failures: settings.rpcCircuitFailures, probeAfterMs: settings.rpcCircuitProbeMs }
      }),
      storageLayer({
        databaseUrl: settings.databaseUrl,
        dataDir: settings.dataDir,
        applicationName: "attestor"
      })
    )
    const indexer = indexerLayer(indexerConfigOf(settings))
    return vetoWatcherLayer().pipe(
      Layer.provideMerge(
        Layer.mergeAll(
          hintIndexLayer({ startBlock: settings.indexerStartBlock }),
          SessionStore.layer({ ttlSeconds: settings.sessionTtlSeconds }),
          OAuthStates.layer({ ttlSeconds: settings.oauthStateTtlSeconds }),
          PublicCommitments.layer,
          PaymentStore.layer,
          AttestationStore.layer
        )
      ),
      Layer.provideMerge(Layer.mergeAll(indexer, HintDecryptor.layer, attestorRoleCheckLayer)),
      Layer.provideMerge(eventStoreLayer),
      Layer.provideMerge(base)
    )
  })
)

export const attestorServer = Layer.unwrapEffect(
  Effect.map(AttestorSettings, (settings) =>
    serveApi(
      AttestorApi,
      AttestorHandlers.pipe(
        Layer.provide(HandleLookups.layer),
        Layer.provide(ChainId.layer(settings.chainId)),
        Layer.provide(
          Option.match(settings.fedsocial, {
            onNone: () => FedsocialLogins.unconfigured,
            onSome: (fedsocial) =>
              FedsocialLogins.layer({
                ...fedsocial,
                rpcTimeoutMs: settings.rpcTimeoutMs,
                redirectAllowList: settings.redirectAllowList
              })
          })
        ),
        Layer.provide(
          OAuthLogins.layer({
            apps: settings.oauthApps,
            publicUrl: settings.publicUrl,
            redirectAllowList: settings.redirectAllowList,
            loginChallenge: settings.loginChallenge,
            providerTimeoutMs: settings.oauthProviderTimeoutMs
          })
        )
      ),
      { ...listenOptionsOf(settings), rateLimit: attestorIpRateLimit(settings), outcomes: attestorOutcomes }
    )
  )
)

/**
 * Under `DEVNET_CHAIN_CLOCK` the requests are served on the devnet chain's clock, so every deadline
 * the attestor signs or checks is the chain's (docs/protocol.md §9 "The devnet's clock"); the
 * background work below the server keeps the wall clock.
 */
export const attestorClock = Layer.unwrapEffect(
  Effect.map(AttestorSettings, (settings) =>
    settings.devnetChainClock ? devnetChainClockLayer(settings.rpcUrl.href) : Layer.empty
  )
)

export const AttestorLive = attestorServer.pipe(
  Layer.provide(attestorClock),
  Layer.provide(attestorServices),
  Layer.provide(AttestorSettings.layer)
)
