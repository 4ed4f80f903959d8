/**
 * Quote metrics. Labels are actions and source names only, never an asset or an account.
 */
import { Effect, Metric, type MetricLabel } from "effect"
import { QuoteAction } from "../../../schema/relayer.js"
import { counter, type SeriesAtZero, taggedOnce } from "../../http/metrics.js"

export const quotesServed = counter("relayer_quotes_total", "Quotes served by GET /v1/quote, by action")

export const priceSourceFailures = counter(
  "relayer_price_source_failures_total",
  "Price lookups a source could not answer (fell through to the next source), by source"
)

export const priceDeviations = counter(
  "relayer_price_deviations_total",
  "Prices a source answered too far (PRICE_MAX_DEVIATION_BPS) from the price feed's last answer, not used, by source"
)

export const gasPriceRefreshFailures = counter(
  "relayer_gas_price_refresh_failures_total",
  "Background gas price reads that failed"
)

export const gasPriceGauge = Metric.gauge("relayer_gas_price_wei", {
  description: "Gas price the relayer currently quotes with, in wei",
  bigint: true
})

const quoteServed = taggedOnce(quotesServed)
const priceSourceFailure = taggedOnce(priceSourceFailures)
const priceDeviation = taggedOnce(priceDeviations)

/**
 * The quote counters at 0 from start-up: quotes by every action; a price source's name is known to
 * the fee oracle only, so its failures and deviations start without labels.
 */
export const feeSeriesAtZero: ReadonlyArray<SeriesAtZero> = [
  ...QuoteAction.literals.map((action) => quoteServed({ action })),
  priceSourceFailures,
  priceDeviations,
  gasPriceRefreshFailures
]

export const recordQuoteServed = (action: QuoteAction) => Metric.increment(quoteServed({ action }))

/** `recordQuoteServed` outside a fiber, with the labels that fiber had (a quote served from its bytes). */
export const unsafeRecordQuoteServed = (
  action: QuoteAction,
  extraTags: ReadonlyArray<MetricLabel.MetricLabel>
): void => quoteServed({ action }).unsafeUpdate(1, extraTags)

export const recordPriceSourceFailure = (source: string) => Metric.increment(priceSourceFailure({ source }))

export const recordPriceDeviation = (source: string) => Metric.increment(priceDeviation({ source }))

export const recordGasPrice = (wei: bigint) => Metric.set(gasPriceGauge, wei)

export const recordGasPriceRefreshFailure = Effect.asVoid(Metric.increment(gasPriceRefreshFailures))
