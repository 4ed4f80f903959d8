/**
 * The relayer process: settings, storage, chain client and HTTP server. Tests and the devnet
 * compose the same layer; only the settings (and, for unit tests, the chain layer) differ.
 */
import { Effect, Layer } from "effect"
import { chainClientLayer } from "../src/chain/ChainClient.js"
import { RelayerSettings } from "../src/config/relayer.js"
import { serveApi } from "../src/http/server.js"
import { RelayerApi } from "../src/relayer/api.js"
import { RelayerOperatorLive } from "../src/relayer/http.js"
import { storageLayer } from "../src/store/sql.js"

const RelayerHandlers = RelayerOperatorLive

/** Everything below the HTTP server, given the settings. */
export const relayerServices = Layer.unwrapEffect(
  Effect.map(RelayerSettings, (settings) =>
    Layer.mergeAll(
      chainClientLayer({ rpcUrl: settings.rpcUrl.href, timeoutMs: settings.rpcTimeoutMs }),
      storageLayer({
        databaseUrl: settings.databaseUrl,
        dataDir: settings.dataDir,
        applicationName: "relayer"
      })
    )
  )
)

export const relayerServer = Layer.unwrapEffect(
  Effect.map(RelayerSettings, (settings) =>
    serveApi(RelayerApi, RelayerHandlers, {
      host: settings.host,
      port: settings.port,
      maxBodyBytes: settings.maxBodyBytes
    })
  )
)

/** The whole relayer; settings come from the environment (or a test's ConfigProvider). */
export const RelayerLive = relayerServer.pipe(
  Layer.provide(relayerServices),
  Layer.provide(RelayerSettings.layer)
)
