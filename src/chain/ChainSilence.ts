/**
 * At start-up, whether the chain answers at `RPC_URL` (docs/operations.md "Faults as clients and
 * operators see them"). A service whose RPC does not answer still starts (the node may come up
 * later), and its indexer restarts with backoff; without this, its log shows only "indexer failed;
 * restarting", which does not say which setting to look at. One warning names `RPC_URL` and the
 * failure's kind (never the URL, which may hold a key); one line says when it answers again.
 */
import { Effect, Layer, Schedule } from "effect"
import { ChainClient } from "./ChainClient.js"
import { describeChainError } from "./errors.js"

/** How long start-up waits for the chain before saying it does not answer. */
const FIRST_ANSWER = "10 seconds"

/** The check, forked in the layer's scope. */
const watchFirstAnswer = Effect.gen(function* () {
  const chain = yield* ChainClient
  const first = yield* Effect.either(chain.blockNumber.pipe(Effect.timeout(FIRST_ANSWER)))
  if (first._tag === "Right") return
  const kind = first.left._tag === "TimeoutException" ? "no answer in 10 s" : describeChainError(first.left)
  yield* Effect.logWarning(
    `the chain does not answer at RPC_URL (${kind}): answers that need it are 503 and the indexer retries; check RPC_URL and the node`
  )
  yield* chain.blockNumber.pipe(
    Effect.retry(Schedule.exponential("1 second").pipe(Schedule.union(Schedule.spaced("30 seconds")))),
    Effect.zipRight(Effect.logInfo("the chain answers at RPC_URL"))
  )
})

/** Provides nothing: its layer starts the background check (layers/relayer.ts, layers/attestor.ts). */
export const ChainSilence = {
  layer: Layer.scopedDiscard(Effect.forkScoped(Effect.ignore(watchFirstAnswer)))
} satisfies { readonly layer: Layer.Layer<never, never, ChainClient> }
