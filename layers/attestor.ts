/**
 * The attestor process: settings, storage, chain client and HTTP server. Tests and the devnet
 * compose the same layer; only the settings differ.
 */
import { Effect, Layer } from "effect"
import { AttestorApi } from "../src/attestor/api.js"
import { AttestorCommitmentsLive } from "../src/attestor/commitment.js"
import { AttestorOperatorLive } from "../src/attestor/http.js"
import { AttestorInfoLive } from "../src/attestor/info.js"
import { attestorIpRateLimit } from "../src/attestor/rateLimits.js"
import { chainClientLayer } from "../src/chain/ChainClient.js"
import { AttestorSettings } from "../src/config/attestor.js"
import { serveApi } from "../src/http/server.js"
import { storageLayer } from "../src/store/sql.js"

const AttestorHandlers = Layer.mergeAll(AttestorOperatorLive, AttestorInfoLive, AttestorCommitmentsLive)

export const attestorServices = Layer.unwrapEffect(
  Effect.map(AttestorSettings, (settings) =>
    Layer.mergeAll(
      chainClientLayer({ rpcUrl: settings.rpcUrl.href, timeoutMs: settings.rpcTimeoutMs }),
      storageLayer({
        databaseUrl: settings.databaseUrl,
        dataDir: settings.dataDir,
        applicationName: "attestor"
      })
    )
  )
)

export const attestorServer = Layer.unwrapEffect(
  Effect.map(AttestorSettings, (settings) =>
    serveApi(AttestorApi, AttestorHandlers, {
      host: settings.host,
      port: settings.port,
      maxBodyBytes: settings.maxBodyBytes,
      rateLimit: attestorIpRateLimit(settings)
    })
  )
)

export const AttestorLive = attestorServer.pipe(
  Layer.provide(attestorServices),
  Layer.provide(AttestorSettings.layer)
)
