/**
 * The relayer process: settings, storage, chain client and HTTP server. Tests and the devnet
 * compose the same layer; only the settings (and, for unit tests, the chain layer) differ.
 */
import { Effect, Layer, Option } from "effect"
import { chainClientLayer } from "../src/chain/ChainClient.js"
import { RelayerSettings } from "../src/config/relayer.js"
import { serveApi } from "../src/http/server.js"
import { Indexer, indexerConfigOf, indexerLayer } from "../src/indexer/Indexer.js"
import { accountsFeedLayer } from "../src/relayer/accounts.js"
import { RelayerActionsLive } from "../src/relayer/actions.js"
import { RelayerApi } from "../src/relayer/api.js"
import { RelayerClaimsLive } from "../src/relayer/claims.js"
import { RelayerAccountsLive, RelayerOperatorLive } from "../src/relayer/http.js"
import { feeOracleLayer, QuoteLive } from "../src/relayer/quote.js"
import { relayerIpRateLimit } from "../src/relayer/rateLimits.js"
import { TransactionsLive } from "../src/relayer/transactions.js"
import { eventStoreLayer } from "../src/store/EventStore.js"
import { storageLayer } from "../src/store/sql.js"
import { txSenderLayer } from "../src/txsender/TxSender.js"

const RelayerHandlers = Layer.mergeAll(
  RelayerOperatorLive,
  RelayerAccountsLive,
  TransactionsLive,
  QuoteLive,
  RelayerClaimsLive,
  RelayerActionsLive
).pipe(Layer.provide(feeOracleLayer))

/** Everything below the HTTP server, given the settings. */
export const relayerServices = Layer.unwrapEffect(
  Effect.map(RelayerSettings, (settings) => {
    const base = Layer.mergeAll(
      chainClientLayer({
        rpcUrl: settings.rpcUrl.href,
        sendRpcUrl: Option.getOrUndefined(settings.sendRpcUrl)?.href,
        timeoutMs: settings.rpcTimeoutMs
      }),
      storageLayer({
        databaseUrl: settings.databaseUrl,
        dataDir: settings.dataDir,
        applicationName: "relayer"
      })
    )
    const indexer = settings.indexerEnabled
      ? indexerLayer(indexerConfigOf(settings)).pipe(Layer.provide(eventStoreLayer))
      : Indexer.disabled
    return accountsFeedLayer.pipe(
      Layer.provideMerge(indexer),
      Layer.provideMerge(txSenderLayer),
      Layer.provideMerge(base)
    )
  })
)

export const relayerServer = Layer.unwrapEffect(
  Effect.map(RelayerSettings, (settings) =>
    serveApi(RelayerApi, RelayerHandlers, {
      host: settings.host,
      port: settings.port,
      maxBodyBytes: settings.maxBodyBytes,
      timeouts: {
        headersMs: settings.httpHeadersTimeoutMs,
        requestMs: settings.httpRequestTimeoutMs,
        keepAliveMs: settings.httpKeepAliveTimeoutMs
      },
      rateLimit: relayerIpRateLimit(settings)
    })
  )
)

/** The whole relayer; settings come from the environment (or a test's ConfigProvider). */
export const RelayerLive = relayerServer.pipe(
  Layer.provide(relayerServices),
  Layer.provide(RelayerSettings.layer)
)
