/**
 * The attestor process: settings, storage, chain client, vault indexer, hint index and HTTP
 * server. Tests and the devnet compose the same layer; only the settings differ.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import { Effect, Layer, Option } from "effect"
import { AttestorApi } from "../src/attestor/api.js"
import { AttestationStore } from "../src/attestor/binds/AttestationStore.js"
import { BindSignatures } from "../src/attestor/binds/BindSignatures.js"
import { Commitments } from "../src/attestor/commitments/Commitments.js"
import { SessionEscrows } from "../src/attestor/escrows/SessionEscrows.js"
import { AttestorHandlers } from "../src/attestor/handlers.js"
import { HintDecryptor, hintRejectionSeriesAtZero } from "../src/attestor/hints/HintDecryptor.js"
import { HintIndex, hintIndexSeriesAtZero } from "../src/attestor/hints/HintIndex.js"
import { loginPlatforms } from "../src/attestor/info/attestorInfo.js"
import { InfoDocument } from "../src/attestor/info/InfoDocument.js"
import { LegacyStartEnabled, LoginOffered } from "../src/attestor/logins/api.js"
import { FedsocialLogins } from "../src/attestor/logins/fedsocial/FedsocialLogins.js"
import { MessengerLogins, messengerLoginConfig } from "../src/attestor/logins/messenger/MessengerLogins.js"
import { OAuthLogins } from "../src/attestor/logins/oauth/OAuthLogins.js"
import { OAuthStates, oauthStatesConfig } from "../src/attestor/logins/oauth/OAuthStates.js"
import { SessionStore } from "../src/attestor/logins/SessionStore.js"
import { HandleLookups } from "../src/attestor/lookups/HandleLookups.js"
import { PaymentStore } from "../src/attestor/lookups/payments/PaymentStore.js"
import { attestorOutcomes, attestorSeriesAtZero } from "../src/attestor/metrics.js"
import { AttestorHealth } from "../src/attestor/operator/AttestorHealth.js"
import { AttestorRoleCheck } from "../src/attestor/operator/AttestorRoleCheck.js"
import { PublicCommitments } from "../src/attestor/publicHandles/PublicCommitments.js"
import { PublicHandles } from "../src/attestor/publicHandles/PublicHandles.js"
import { attestorIpRateLimit } from "../src/attestor/rateLimits.js"
import { ProposalStore } from "../src/attestor/veto/ProposalStore.js"
import { VetoWatcher, vetoWatcherSeriesAtZero } from "../src/attestor/veto/VetoWatcher.js"
import { ChainClient } from "../src/chain/ChainClient.js"
import { ChainSilence } from "../src/chain/ChainSilence.js"
import { ChainId } from "../src/chain/chainId.js"
import { DevnetChainClock } from "../src/chain/DevnetChainClock.js"
import { chainSeriesAtZero } from "../src/chain/metrics.js"
import { AttestorSettings, type AttestorSettingsShape } from "../src/config/attestor.js"
import { keyFileWarnings } from "../src/config/secrets.js"
import { MetricsEndpoint } from "../src/http/MetricsEndpoint.js"
import { exportAtZero } from "../src/http/metrics.js"
import { listenOptionsOf, serveApi, serverSeriesAtZero } from "../src/http/server.js"
import { Indexer, indexerConfigOf } from "../src/indexer/Indexer.js"
import { indexerSeriesAtZero } from "../src/indexer/metrics.js"
import { signerStartupLine } from "../src/keys/Signer.js"
import { EventStore } from "../src/store/EventStore.js"
import { storageLayer } from "../src/store/sql.js"
import { senderSeriesAtZero } from "../src/txsender/metrics.js"
import { TxSender } from "../src/txsender/TxSender.js"

/**
 * The attestor key's transaction sender, with `AUTO_VETO` only: the veto watcher sends its vetoes
 * with it and `/v1/health` reports it. Its lock is `attestor-tx-sender:<address>`, apart from any
 * relayer's. Typed as providing nothing: both readers find it with `Effect.serviceOption`.
 */
const attestorKeySender = (
  settings: AttestorSettingsShape
): Layer.Layer<never, never, ChainClient | SqlClient> =>
  settings.autoVeto
    ? TxSender.layer({ service: "attestor", key: settings.signingKey, settings })
    : Layer.empty

/**
 * Every counter and histogram the attestor records, exported at 0 from start-up so that `rate()`
 * and alerts see the first event (docs/operations.md "Metrics reference"): logins by the platforms
 * it offers, lookup payments when lookups are paid, its key's sender with `AUTO_VETO`.
 */
const attestorMetricsAtZero = (settings: AttestorSettingsShape) =>
  Layer.effectDiscard(
    exportAtZero([
      ...serverSeriesAtZero(AttestorApi, ["ip"]),
      ...chainSeriesAtZero,
      ...indexerSeriesAtZero,
      ...attestorSeriesAtZero(loginPlatforms(settings), Option.isSome(settings.paidLookup)),
      ...hintIndexSeriesAtZero,
      ...hintRejectionSeriesAtZero,
      ...vetoWatcherSeriesAtZero,
      ...(settings.autoVeto ? senderSeriesAtZero("attestor") : [])
    ])
  )

/**
 * Everything below the HTTP server, given the settings: the chain, the attestor's own database
 * with its sessions and handle-lookup payments, the vault indexer writing its event store, the hint index folding its
 * `TokenLaunched` events, and the veto watcher judging the pending bind proposals (and, with
 * `AUTO_VETO`, the attestor key's sender it vetoes with).
 */
const attestorServices = Layer.unwrapEffect(
  Effect.map(AttestorSettings, (settings) => {
    const base = Layer.mergeAll(
      ChainClient.layer({
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
    const indexer = Indexer.layer(indexerConfigOf(settings))
    return VetoWatcher.layer().pipe(
      Layer.provideMerge(
        Layer.mergeAll(
          HintIndex.layer({ startBlock: settings.indexerStartBlock }),
          SessionStore.layer({ ttlSeconds: settings.sessionTtlSeconds }),
          OAuthStates.layer(oauthStatesConfig(settings)),
          PublicCommitments.layer,
          PaymentStore.layerWith(
            Option.match(settings.paidLookup, {
              onNone: () => ({}),
              onSome: (paid) => ({
                retentionSeconds: paid.paymentRetentionDays * 86_400,
                answerRetentionSeconds: paid.answerRetentionSeconds
              })
            })
          ),
          AttestationStore.layer,
          ProposalStore.layer,
          attestorKeySender(settings)
        )
      ),
      Layer.provideMerge(
        Layer.mergeAll(indexer, HintDecryptor.layer, AttestorRoleCheck.layer, ChainSilence.layer)
      ),
      Layer.provideMerge(EventStore.layer),
      Layer.provideMerge(base),
      Layer.merge(attestorMetricsAtZero(settings)),
      Layer.merge(attestorStartupLines)
    )
  })
)

/** Logged once at start-up: the attestor key's signer and address, and key files others can read. */
const attestorStartupLines = Layer.effectDiscard(
  Effect.gen(function* () {
    const settings = yield* AttestorSettings
    yield* Effect.logInfo(signerStartupLine("ATTESTOR_SIGNER", settings.signingKey))
    const warnings = yield* keyFileWarnings.pipe(Effect.orElseSucceed(() => []))
    yield* Effect.forEach(warnings, (warning) => Effect.logWarning(warning), { discard: true })
  })
)

/**
 * The endpoints' services (docs/attestor.md §4): commitments, public handles, a session's escrows
 * and the bind signatures over them, `/v1/info`'s document and health. They need the settings,
 * the stores and indexes above, the handle lookups and the chain id.
 */
const attestorEndpoints = Layer.mergeAll(
  Commitments.layer,
  PublicHandles.layer,
  BindSignatures.layer,
  InfoDocument.layer,
  AttestorHealth.layer
).pipe(Layer.provideMerge(SessionEscrows.layer))

/**
 * The logins (docs/attestor.md §3): messenger's widget, the OAuth platforms and fedsocial, each
 * disabled without its settings, and the two checks before their routes (`LoginOffered`: only the
 * platforms `/v1/info` lists; `LegacyStartEnabled`: `OAUTH_GET_START`).
 */
const attestorLogins = (settings: AttestorSettingsShape) =>
  Layer.mergeAll(
    LoginOffered.layer(loginPlatforms(settings)),
    LegacyStartEnabled.layer(settings.oauthGetStart),
    Option.match(messengerLoginConfig(settings), {
      onNone: () => MessengerLogins.disabled,
      onSome: (config) => MessengerLogins.layer(config)
    }),
    OAuthLogins.layer({
      apps: settings.oauthApps,
      publicUrl: settings.publicUrl,
      redirectAllowList: settings.redirectAllowList,
      loginChallenge: settings.loginChallenge,
      providerTimeoutMs: settings.oauthProviderTimeoutMs
    }),
    Option.match(settings.fedsocial, {
      onNone: () => FedsocialLogins.disabled,
      onSome: (fedsocial) =>
        FedsocialLogins.layer({
          ...fedsocial,
          rpcTimeoutMs: settings.rpcTimeoutMs,
          redirectAllowList: settings.redirectAllowList
        })
    })
  )

const attestorServer = Layer.unwrapEffect(
  Effect.map(AttestorSettings, (settings) =>
    serveApi(
      AttestorApi,
      AttestorHandlers.pipe(
        Layer.provide(attestorEndpoints),
        Layer.provide(attestorLogins(settings)),
        Layer.provide(MetricsEndpoint.layer(settings.metricsToken)),
        Layer.provide(HandleLookups.layer),
        Layer.provide(ChainId.layer(settings.chainId))
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
const attestorClock = Layer.unwrapEffect(
  Effect.map(AttestorSettings, (settings) =>
    settings.devnetChainClock ? DevnetChainClock.layer(settings.rpcUrl.href) : Layer.empty
  )
)

const AttestorLive = attestorServer.pipe(
  Layer.provide(attestorClock),
  Layer.provide(attestorServices),
  Layer.provide(AttestorSettings.layer)
)

/**
 * The attestor's layers: `layer` is the whole process (settings from the environment, or a test's
 * ConfigProvider); the others are its parts, for a program or a test that provides some itself.
 */
export const Attestor = {
  layer: AttestorLive,
  server: attestorServer,
  services: attestorServices
}
