/**
 * At start-up the attestor asks the vault whether its signing key is an attestor (`isAttestor`):
 * a key the vault does not list starts, and says so once, by its address; a listed one says
 * nothing. A chain that does not answer at first is asked again.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Logger } from "effect"
import type { Hex } from "viem"
import { privateKeyToAccount } from "viem/accounts"
import { AttestorRoleCheck } from "../../src/attestor/operator/AttestorRoleCheck.js"
import { ChainUnavailable } from "../../src/chain/errors.js"
import { mockChainClient } from "../../src/chain/MockChainClient.js"
import { AttestorSettings, type AttestorSettingsShape } from "../../src/config/attestor.js"
import { localSigner } from "../../src/keys/Signer.js"

const KEY: Hex = `0x${"11".repeat(32)}`
const VAULT = "0x5FbDB2315678afecb367f032d93F642f64180aa3"

/** The warnings logged while the check runs against a vault answering `answers` in turn. */
const warningsFor = (answers: ReadonlyArray<boolean | "down">) =>
  Effect.gen(function* () {
    const warnings: Array<string> = []
    const asked: Array<unknown> = []
    let call = 0
    const chain = mockChainClient({
      readContract: ((request: { readonly args: ReadonlyArray<unknown> }) =>
        Effect.suspend(() => {
          asked.push(request.args[0])
          const answer = answers[Math.min(call++, answers.length - 1)]
          return answer === "down"
            ? Effect.fail(
                new ChainUnavailable({ operation: "eth_call", reason: "down", attempts: 3, cause: null })
              )
            : Effect.succeed(answer)
        })) as never
    })
    const settings = Layer.succeed(AttestorSettings, {
      signingKey: localSigner(KEY),
      vault: VAULT
    } as unknown as AttestorSettingsShape)
    const logger = Logger.replace(
      Logger.defaultLogger,
      Logger.make(({ logLevel, message }) => {
        if (logLevel._tag === "Warning") warnings.push(String(message))
      })
    )
    yield* Effect.scoped(
      Layer.build(
        AttestorRoleCheck.layer.pipe(Layer.provide(Layer.mergeAll(chain, settings)), Layer.provide(logger))
      ).pipe(Effect.zipRight(Effect.sleep("1500 millis")))
    )
    return { warnings, asked }
  })

describe("the attestor's role check at start-up", () => {
  it.live("warns once, by the key's address, when the vault does not list the key", () =>
    Effect.gen(function* () {
      const address = privateKeyToAccount(KEY).address
      const { warnings, asked } = yield* warningsFor([false])
      expect(asked).toEqual([address])
      expect(warnings).toHaveLength(1)
      expect(warnings[0]).toContain(address)
      expect(warnings[0]).toContain("is not an attestor of the vault")
      expect(warnings[0]).not.toContain(KEY.slice(2))
    })
  )

  it.live("says nothing for a listed key, and asks a chain that did not answer again", () =>
    Effect.gen(function* () {
      expect((yield* warningsFor([true])).warnings).toEqual([])
      const later = yield* warningsFor(["down", false])
      expect(later.asked).toHaveLength(2)
      expect(later.warnings).toHaveLength(1)
    })
  )
})
