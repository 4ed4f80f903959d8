/**
 * The attestor's HTTP server for route tests: its stores on an in-memory PGlite, no indexer, hint
 * index or veto watcher, a mocked chain, the settings of `env`, and every log line (logfmt, info and
 * above) pushed to `lines`, so a test can check what reached the log.
 */
import { ConfigProvider, Effect, Layer, Logger, LogLevel, ManagedRuntime, Option } from "effect"
import { Attestor } from "../../layers/attestor.js"
import { AttestationStore } from "../../src/attestor/binds/AttestationStore.js"
import { HintIndex } from "../../src/attestor/hints/HintIndex.js"
import { OAuthStates, oauthStatesConfig } from "../../src/attestor/logins/oauth/OAuthStates.js"
import { SessionStore } from "../../src/attestor/logins/SessionStore.js"
import { PaymentStore } from "../../src/attestor/lookups/payments/PaymentStore.js"
import { PublicCommitments } from "../../src/attestor/publicHandles/PublicCommitments.js"
import { VetoWatcher } from "../../src/attestor/veto/VetoWatcher.js"
import { mockChainClient } from "../../src/chain/MockChainClient.js"
import { AttestorSettings } from "../../src/config/attestor.js"
import { Indexer } from "../../src/indexer/Indexer.js"
import { storageLayer } from "../../src/store/sql.js"

/**
 * Settings of an attestor that reaches nothing outside: a dead RPC, the devnet's vault and
 * settlement asset, fixed test keys. Route tests add what they exercise.
 */
export const offlineAttestorEnv = {
  RPC_URL: "http://127.0.0.1:1",
  FEE_VAULT: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
  SETTLEMENT_ASSET: "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512",
  CHAIN_ID: "31337",
  ATTESTOR_PRIVATE_KEY: `0x${"11".repeat(32)}`,
  HINT_PRIVATE_KEY: `0x${"22".repeat(32)}`,
  PEPPER: `0x${"33".repeat(32)}`
} as const

export const embeddedAttestor = (env: Record<string, string>, lines: Array<string>) =>
  ManagedRuntime.make(
    Attestor.server.pipe(
      Layer.provide(Layer.mergeAll(Indexer.disabled, HintIndex.disabled, VetoWatcher.disabled)),
      Layer.provide(
        Layer.unwrapEffect(
          Effect.map(AttestorSettings, (settings) =>
            Layer.mergeAll(
              SessionStore.layer({ ttlSeconds: settings.sessionTtlSeconds }),
              OAuthStates.layer(oauthStatesConfig(settings)),
              PublicCommitments.layer,
              PaymentStore.layer,
              AttestationStore.layer
            ).pipe(
              // Served too: fedsocial's verify takes its nonce and makes its session in one transaction.
              Layer.provideMerge(
                storageLayer({ databaseUrl: Option.none(), dataDir: "memory://", applicationName: "test" })
              )
            )
          )
        )
      ),
      Layer.provide(mockChainClient({})),
      Layer.provide(AttestorSettings.layer),
      Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))),
      Layer.provide(
        Logger.replace(
          Logger.defaultLogger,
          Logger.map(Logger.logfmtLogger, (line) => {
            lines.push(line)
          })
        )
      ),
      Layer.provide(Logger.minimumLogLevel(LogLevel.Info))
    )
  )
