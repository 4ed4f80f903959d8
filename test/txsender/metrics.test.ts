/**
 * The sender's series carry the service that runs it, so the relayer's and the attestor's senders
 * in one process count apart under the same names.
 */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { exportAtZero, prometheusText } from "../../src/http/metrics.js"
import { makeSenderMetrics } from "../../src/txsender/metrics.js"

const run = <A>(effect: Effect.Effect<A>) => Effect.runPromise(effect)

describe("sender metrics", () => {
  it("label every series with the service and count each service apart", async () => {
    const relayer = makeSenderMetrics("relayer")
    const attestor = makeSenderMetrics("attestor")
    await run(relayer.initialise)
    await run(attestor.initialise)
    await run(exportAtZero([...relayer.seriesAtZero, ...attestor.seriesAtZero]))
    await run(relayer.recordReplacement("bump"))
    await run(relayer.recordReplacement("bump"))
    await run(attestor.recordReplacement("bump"))
    await run(attestor.recordGapFill)
    const text = await run(prometheusText)
    expect(text).toMatch(/^relayer_tx_replacements_total\{service="relayer",kind="bump"\} 2$/m)
    expect(text).toMatch(/^relayer_tx_replacements_total\{service="attestor",kind="bump"\} 1$/m)
    expect(text).toMatch(/^relayer_tx_gap_fills_total\{service="attestor"\} 1$/m)
    expect(text).toMatch(/^relayer_tx_pending\{service="relayer"\} 0$/m)
    expect(text).toMatch(/^relayer_tx_reorged_total\{service="attestor"\} 0$/m)
    // No series of the sender without its service.
    expect(text).not.toMatch(/^relayer_(tx|hot_key)_\w+( |\{(?![^}]*service=))/m)
  })
})
