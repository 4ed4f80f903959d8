/**
 * What a log line may say about a failure, and the services' logger.
 *
 * viem's error text carries the request URL (a hosted RPC's API key often sits in its path), the
 * request body and sometimes headers; a node's or a database's own message can quote anything.
 * So a failure is logged as a description built from its kind and classified fields
 * (`describeFailure`), and the logger itself never prints a cause: it writes the description in
 * its place and blanks out anything shaped like a URL in messages and annotations, for a log call
 * that forgot (the runtime's own "Fiber terminated with an unhandled error" at debug level too).
 */
import {
  Cause,
  Clock,
  Context,
  DefaultServices,
  type Fiber,
  type FiberId,
  FiberRef,
  HashMap,
  HashSet,
  Inspectable,
  type Layer,
  Logger,
  LogLevel,
  Option
} from "effect"
import { describeChainError, isChainError } from "./chain/errors.js"

/** Anything with a scheme and `://`, up to the next blank or quote. */
const URL_PATTERN = /\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>`]*/gi
/** viem's detail lines, whatever follows them. */
const DETAIL_LINE = /^\s*(URL|Request body|Raw Call Arguments|Headers?|Details|Version):/i

/** Only a scheme, a host and a port: where a server listens, which names no key. */
const BARE_ORIGIN = /^[a-z][a-z0-9+.-]*:\/\/[a-z0-9.-]+(:\d+)?\/?$/i

/**
 * `text` without viem's detail lines, and every URL that carries more than an origin (a path,
 * a query, credentials: where keys sit) replaced by `<url>`.
 */
export const redactUrls = (text: string): string =>
  // Both a detail line and a URL need a colon: most text (a method, a route) has none.
  !text.includes(":")
    ? text
    : text
        .split("\n")
        .filter((line) => !DETAIL_LINE.test(line))
        .join("\n")
        .replace(URL_PATTERN, (url) => (BARE_ORIGIN.test(url) ? url : "<url>"))

/** Free text for a log: its first line, URLs out, at most `max` characters. */
export const safeText = (text: string, max = 200): string => {
  const line = redactUrls(text.split("\n")[0] ?? "").trim()
  return line.length <= max ? line : `${line.slice(0, max)}…`
}

/**
 * An error for a log: a chain error by kind, operation and class (never the node's or viem's
 * text); another tagged error by tag and message, cut to one line without URLs; anything else by
 * kind only.
 */
export const describeError = (error: unknown): string => {
  if (isChainError(error)) return describeChainError(error)
  if (typeof error === "object" && error !== null && "_tag" in error && error instanceof Error)
    return `${String(error._tag)}: ${safeText(error.message)}`
  return "failure"
}

/**
 * A failure for a log: `describeError` of its typed error, and only the kind of a defect (its
 * message could carry anything).
 */
export const describeFailure = (cause: Cause.Cause<unknown>): string =>
  Option.match(Cause.failureOption(cause), {
    onSome: describeError,
    onNone: () =>
      Option.match(Cause.dieOption(cause), {
        onSome: (defect) => `defect (${defect instanceof Error ? defect.name : typeof defect})`,
        onNone: () => "interrupted"
      })
  })

const redactValue = (value: unknown): unknown =>
  typeof value === "string"
    ? redactUrls(value)
    : Array.isArray(value)
      ? value.map(redactValue)
      : value instanceof Error
        ? describeError(value)
        : value

/** `annotations` through `redactValue`: the same map when that changes no value, as is usual. */
const redactAnnotations = (
  annotations: HashMap.HashMap<string, unknown>
): HashMap.HashMap<string, unknown> => {
  for (const [, value] of annotations)
    if (redactValue(value) !== value) return HashMap.map(annotations, redactValue)
  return annotations
}

/**
 * `logger` fed with safe input: a cause becomes a `failure` annotation (`describeFailure`), and
 * strings of the message and the annotations lose their URLs.
 */
export const safeLogger = <O>(logger: Logger.Logger<unknown, O>): Logger.Logger<unknown, O> =>
  Logger.mapInputOptions(logger, (options) => {
    const annotations = redactAnnotations(options.annotations)
    return {
      ...options,
      message: redactValue(options.message),
      cause: Cause.empty,
      annotations: Cause.isEmpty(options.cause)
        ? annotations
        : HashMap.set(annotations, "failure", describeFailure(options.cause))
    }
  })

/**
 * Lines written to stdout once per turn of the event loop, in order: a write to a pipe or a file
 * is synchronous in Node, and one per request line is measurable. What is pending is written
 * before the process exits.
 */
const pendingLines: Array<string> = []
let flushScheduled = false
const flushLines = () => {
  flushScheduled = false
  if (pendingLines.length === 0) return
  process.stdout.write(`${pendingLines.join("\n")}\n`)
  pendingLines.length = 0
}
let exitHooked = false
export const writeLine = (line: string): void => {
  pendingLines.push(line)
  if (!exitHooked) {
    exitHooked = true
    process.once("exit", flushLines)
  }
  if (!flushScheduled) {
    flushScheduled = true
    setImmediate(flushLines)
  }
}

/** The services' logger: logfmt lines on stdout, through `safeLogger`. */
export const serviceLogger: Layer.Layer<never> = Logger.replace(
  Logger.defaultLogger,
  Logger.map(safeLogger(Logger.logfmtLogger), writeLine)
)

/**
 * What `Effect.logInfo(message).pipe(Effect.annotateLogs(annotations))` logs in `fiber`, logged
 * synchronously from code that runs on that fiber: the fiber's own loggers, minimum level,
 * annotations, log spans and clock, the same options handed to each logger, so every line is the
 * one the Effect would write. It spares a hot path (the access log) the Effects that set the
 * annotations and reach the fiber. `fiberId` names another fiber's work with that fiber's settings
 * (a cached answer served without one, src/http/cachedAnswers.ts).
 */
export const unsafeLogInfo = (
  fiber: Fiber.RuntimeFiber<unknown, unknown>,
  message: string,
  annotations: Readonly<Record<string, unknown>>,
  fiberId: FiberId.FiberId = fiber.id()
): void => {
  if (LogLevel.greaterThan(fiber.getFiberRef(FiberRef.currentMinimumLogLevel), LogLevel.Info)) return
  const loggers = fiber.getFiberRef(FiberRef.currentLoggers)
  if (HashSet.size(loggers) === 0) return
  let all = fiber.getFiberRef(FiberRef.currentLogAnnotations)
  for (const key in annotations) all = HashMap.set(all, key, annotations[key])
  const spans = fiber.getFiberRef(FiberRef.currentLogSpan)
  const context = fiber.getFiberRefs()
  const clock = Context.get(fiber.getFiberRef(DefaultServices.currentServices), Clock.Clock)
  const date = new Date(clock.unsafeCurrentTimeMillis())
  // As `Effect.log*` passes its arguments.
  const messages = [message]
  Inspectable.withRedactableContext(context, () => {
    for (const logger of loggers)
      logger.log({
        fiberId,
        logLevel: LogLevel.Info,
        message: messages,
        cause: Cause.empty,
        context,
        spans,
        annotations: all,
        date
      })
  })
}
