/**
 * The lookups of each `HANDLE_LOOKUP_MODE` (src/attestor/lookups/HandleLookups.ts) before any
 * payment step: in `paid` mode a platform without a directory here (microblog without its bearer
 * token) is 400 `unsupported` before a challenge, so nobody is asked to pay for a lookup that
 * cannot happen; a platform with one is 503 while the facilitator cannot quote; `off` refuses every
 * handle. The payment store is never touched (it dies if it is).
 */
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Either, Layer, Logger, LogLevel } from "effect"
import type { LookupAnswer } from "../../src/attestor/commitments/commitmentRules.js"
import { HandleLookups } from "../../src/attestor/lookups/HandleLookups.js"
import { PaymentStore } from "../../src/attestor/lookups/payments/PaymentStore.js"
import { ChainId } from "../../src/chain/chainId.js"
import { mockChainClient } from "../../src/chain/MockChainClient.js"
import { AttestorSettings } from "../../src/config/attestor.js"
import { offlineAttestorEnv } from "../support/embeddedAttestor.js"

const base = {
  ...offlineAttestorEnv,
  // Directories that would answer nothing: no lookup here may reach one.
  CODEHOST_API_URL: "http://127.0.0.1:9",
  FEDSOCIAL_FNAMES_URL: "http://127.0.0.1:9"
}

const paid = {
  HANDLE_LOOKUP_MODE: "paid",
  // Nothing listens there: the quote cannot be read.
  FACILITATOR_URL: "http://127.0.0.1:9",
  FACILITATOR_TIMEOUT_MS: "2000",
  HANDLE_LOOKUP_PRICE: "10000000000000000",
  HANDLE_LOOKUP_PAY_TO: "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
  HANDLE_LOOKUP_ASSET_DECIMALS: "18",
  HANDLE_LOOKUP_ASSET_SYMBOL: "USDT",
  HANDLE_LOOKUP_ASSET_NAME: "Tether USD",
  HANDLE_LOOKUP_ASSET_VERSION: "1"
}

const lookupsWith = (env: Record<string, string>) =>
  HandleLookups.layer.pipe(
    Layer.provide(Layer.mergeAll(mockChainClient({}), ChainId.test(31337), PaymentStore.test({}))),
    Layer.provide(AttestorSettings.layer),
    Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))),
    Layer.provide(Logger.minimumLogLevel(LogLevel.None))
  )

/** An answer that is the user id itself. */
const userIdAnswer: LookupAnswer<string> = {
  request: { route: "/v1/commitment", body: {} },
  make: Effect.succeed,
  encode: (answer) => JSON.stringify(answer),
  decode: (text) => Either.try(() => JSON.parse(text) as string)
}

describe("handle lookups before any payment", () => {
  it.scoped("paid: a platform without a directory is 400 unsupported, before any challenge", () =>
    Effect.gen(function* () {
      const { lookup } = yield* HandleLookups
      const refused = yield* Effect.flip(lookup("microblog", "dev42", undefined, userIdAnswer))
      expect(refused._tag).toBe("Unsupported")
      expect(refused.message).toMatch(/send the numeric userId/)
      // A platform with a directory asks for the quote first: the facilitator is down, so 503.
      const unquoted = yield* Effect.flip(lookup("codehost", "dev7", undefined, userIdAnswer))
      expect(unquoted._tag).toBe("Unavailable")
    }).pipe(Effect.provide(lookupsWith({ ...base, ...paid })))
  )

  it.scoped("off: every handle is 400 unsupported", () =>
    Effect.gen(function* () {
      const { lookup } = yield* HandleLookups
      for (const platform of ["microblog", "codehost", "fedsocial"] as const)
        expect((yield* Effect.flip(lookup(platform, "dev7", undefined, userIdAnswer)))._tag).toBe(
          "Unsupported"
        )
    }).pipe(Effect.provide(lookupsWith(base)))
  )
})
