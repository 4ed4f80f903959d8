/**
 * At start-up, whether the vault lists this attestor's signing key as an attestor
 * (`isAttestor`, docs/protocol.md §5). A key it does not list signs binds the vault refuses, and
 * vetoes it reverts: the attestor still starts (the vault's admin may add the key later), but says
 * so once, by the key's address. Read in the background, retried while the chain does not answer.
 */
import { Effect, Layer, Schedule } from "effect"
import { feeVaultAbi } from "../../../contracts/abi.js"
import { ChainClient } from "../../chain/ChainClient.js"
import { AttestorSettings } from "../../config/attestor.js"

/** Provides nothing: its layer starts the background check (layers/attestor.ts). */
export const AttestorRoleCheck = {
  layer: Layer.scopedDiscard(
    Effect.gen(function* () {
      const settings = yield* AttestorSettings
      const chain = yield* ChainClient
      const attestor = settings.signingKey.address
      yield* chain
        .readContract({
          address: settings.vault,
          abi: feeVaultAbi,
          functionName: "isAttestor",
          args: [attestor]
        })
        .pipe(
          Effect.retry(Schedule.exponential("1 second").pipe(Schedule.upTo("5 minutes"))),
          Effect.flatMap((listed) =>
            listed
              ? Effect.void
              : Effect.logWarning(
                  `ATTESTOR_PRIVATE_KEY's address ${attestor} is not an attestor of the vault ${settings.vault}: the vault refuses its bind signatures and vetoes until its admin adds it (setAttestor)`
                )
          ),
          Effect.ignore,
          Effect.forkScoped
        )
    })
  ) satisfies Layer.Layer<never, never, AttestorSettings | ChainClient>
}
