/**
 * The relayer process: settings, storage, chain client and HTTP server. Tests and the devnet
 * compose the same layer; only the settings (and, for unit tests, the chain layer) differ.
 */
import { Effect, Layer, Option } from "effect"
import { ChainClient } from "../src/chain/ChainClient.js"
import { ChainSilence } from "../src/chain/ChainSilence.js"
import { ChainId } from "../src/chain/chainId.js"
import { chainSeriesAtZero } from "../src/chain/metrics.js"
import { RelayerSettings, type RelayerSettingsShape, relayerSettingsWarnings } from "../src/config/relayer.js"
import { keyFileWarnings } from "../src/config/secrets.js"
import { MetricsEndpoint } from "../src/http/MetricsEndpoint.js"
import { exportAtZero } from "../src/http/metrics.js"
import { listenOptionsOf, serveApi, serverSeriesAtZero } from "../src/http/server.js"
import { Indexer, indexerConfigOf } from "../src/indexer/Indexer.js"
import { indexerSeriesAtZero } from "../src/indexer/metrics.js"
import { signerStartupLine } from "../src/keys/Signer.js"
import { AccountReader } from "../src/relayer/AccountReader.js"
import { AccountsFeed } from "../src/relayer/AccountsFeed.js"
import { RelayerApi } from "../src/relayer/api/index.js"
import { BindBudget } from "../src/relayer/BindBudget.js"
import { BindTransactions } from "../src/relayer/BindTransactions.js"
import { Claims } from "../src/relayer/Claims.js"
import { FeeOracle } from "../src/relayer/FeeOracle.js"
import { feeSeriesAtZero } from "../src/relayer/fees/metrics.js"
import { RelayerHandlers } from "../src/relayer/handlers/index.js"
import { IdRateLimit, relayerIpRateLimit } from "../src/relayer/IdRateLimit.js"
import { relayerOutcomes, relayerSeriesAtZero } from "../src/relayer/metrics.js"
import { NonceReservations } from "../src/relayer/NonceReservations.js"
import { OwnerActions } from "../src/relayer/OwnerActions.js"
import { Relay } from "../src/relayer/Relay.js"
import { RelayerHealth } from "../src/relayer/RelayerHealth.js"
import { RevertCooldowns } from "../src/relayer/RevertCooldowns.js"
import { TxPreflight } from "../src/relayer/TxPreflight.js"
import { DenyList } from "../src/relayer/validation/DenyList.js"
import { VaultSignatures } from "../src/relayer/validation/VaultSignatures.js"
import { EventStore } from "../src/store/EventStore.js"
import { storageLayer } from "../src/store/sql.js"
import { senderSeriesAtZero } from "../src/txsender/metrics.js"
import { SettledTxObserver, TxSender } from "../src/txsender/TxSender.js"

/**
 * The relayed write endpoints' services (docs/relayer.md §4): claims, owner actions and bind
 * transactions over the one `Relay` step. They need the checks below (or a test's stubs of
 * them), the settings, the fee oracle and the sender.
 */
const writeServices = Layer.mergeAll(Claims.layer, OwnerActions.layer, BindTransactions.layer).pipe(
  Layer.provideMerge(Relay.layer)
)

/**
 * The live checks of the write path: account reads, deny list, signatures, simulation, limits (the
 * per-id one and the unpaid bind budget).
 */
const writeChecks = Layer.mergeAll(
  AccountReader.layer,
  DenyList.layer,
  VaultSignatures.layer,
  TxPreflight.layer,
  IdRateLimit.layer,
  BindBudget.layer,
  NonceReservations.layer
)

/** The whole write path, live: what the write handlers stand on. */
const writePathLive = writeServices.pipe(Layer.provide(writeChecks))

/** Everything below the HTTP server, given the settings. */
const relayerServices = Layer.unwrapEffect(
  Effect.map(RelayerSettings, (settings) => {
    const base = Layer.mergeAll(
      ChainClient.layer({
        rpcUrl: settings.rpcUrl.href,
        sendRpcUrl: Option.getOrUndefined(settings.sendRpcUrl)?.href,
        timeoutMs: settings.rpcTimeoutMs,
        circuit: { failures: settings.rpcCircuitFailures, probeAfterMs: settings.rpcCircuitProbeMs }
      }),
      storageLayer({
        databaseUrl: settings.databaseUrl,
        dataDir: settings.dataDir,
        applicationName: "relayer"
      })
    )
    const indexer = settings.indexerEnabled
      ? Indexer.layer(indexerConfigOf(settings)).pipe(Layer.provide(EventStore.layer))
      : Indexer.disabled
    return AccountsFeed.layer.pipe(
      Layer.provideMerge(indexer),
      // The sender tells the revert cooldowns what it finds mined (docs/relayer.md §8).
      Layer.provideMerge(
        Layer.unwrapEffect(
          Effect.map(SettledTxObserver, (onSettled) =>
            TxSender.layer({ service: "relayer", key: settings.hotKey, settings, onSettled })
          )
        ).pipe(Layer.provide(RevertCooldowns.observer))
      ),
      Layer.provideMerge(RevertCooldowns.layer),
      // Says once, naming RPC_URL, when the chain does not answer at start-up.
      Layer.provideMerge(ChainSilence.layer),
      Layer.provideMerge(base),
      Layer.merge(startupWarnings),
      Layer.merge(relayerMetricsAtZero(settings))
    )
  })
)

/**
 * Every counter and histogram the relayer records, exported at 0 from start-up so that `rate()`
 * and alerts see the first event (docs/operations.md "Metrics reference"); the indexer's only
 * when it runs. Rate limits: the per-IP one and the per-account one (`id`).
 */
const relayerMetricsAtZero = (settings: RelayerSettingsShape) =>
  Layer.effectDiscard(
    exportAtZero([
      ...serverSeriesAtZero(RelayerApi, ["ip", "id"]),
      ...chainSeriesAtZero,
      ...(settings.indexerEnabled ? indexerSeriesAtZero : []),
      ...relayerSeriesAtZero,
      ...feeSeriesAtZero,
      ...senderSeriesAtZero("relayer")
    ])
  )

/**
 * Logged once at start-up: the hot key's signer and address, key files others can read, and
 * settings that leave the hot key paying for what no fee covers.
 */
const startupWarnings = Layer.effectDiscard(
  Effect.gen(function* () {
    const settings = yield* RelayerSettings
    yield* Effect.logInfo(signerStartupLine("RELAYER_SIGNER", settings.hotKey))
    const warnings = [
      ...(yield* keyFileWarnings.pipe(Effect.orElseSucceed(() => []))),
      ...relayerSettingsWarnings(settings)
    ]
    yield* Effect.forEach(warnings, (warning) => Effect.logWarning(warning), { discard: true })
  })
)

const relayerServer = Layer.unwrapEffect(
  Effect.map(RelayerSettings, (settings) =>
    serveApi(
      RelayerApi,
      RelayerHandlers.pipe(
        Layer.provide(writePathLive),
        Layer.provide(RelayerHealth.layer),
        Layer.provide(MetricsEndpoint.layer(settings.metricsToken)),
        Layer.provide(FeeOracle.layer),
        // Read once, lazily, for every handler and check that signs or answers with it.
        Layer.provide(ChainId.layer(settings.chainId))
      ),
      { ...listenOptionsOf(settings), rateLimit: relayerIpRateLimit(settings), outcomes: relayerOutcomes }
    )
  )
)

/** The whole relayer; settings come from the environment (or a test's ConfigProvider). */
const RelayerLive = relayerServer.pipe(Layer.provide(relayerServices), Layer.provide(RelayerSettings.layer))

/**
 * The relayer's layers: `layer` is the whole process (settings from the environment, or a test's
 * ConfigProvider); the others are its parts, for a program or a test that provides some itself.
 */
export const Relayer = {
  layer: RelayerLive,
  server: relayerServer,
  services: relayerServices,
  writeServices: writeServices,
  writeChecks: writeChecks,
  writePath: writePathLive
}
