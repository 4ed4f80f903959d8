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
  Context,
  type Fiber,
  FiberId,
  FiberRef,
  HashMap,
  HashSet,
  Inspectable,
  type Layer,
  List,
  Logger,
  LogLevel,
  Option,
  Tracer
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
      // This machine's time, not the Effect clock's: the devnet's attestor runs on the chain's
      // clock (DEVNET_CHAIN_CLOCK), which a skipped bind delay moves hours ahead.
      date: new Date(),
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

/** logfmt lines on stdout, through `safeLogger`. */
const serviceLines = Logger.map(safeLogger(Logger.logfmtLogger), writeLine)

/** The services' logger: `serviceLines` in place of the default one. */
export const serviceLogger: Layer.Layer<never> = Logger.replace(Logger.defaultLogger, serviceLines)

/** A value logfmt writes as it is; any other is a JSON string (as Effect's `logfmtLogger`). */
const LOGFMT_TEXT = /^[^\s"=]*$/
const logfmtValue = (text: string): string => (LOGFMT_TEXT.test(text) ? text : JSON.stringify(text))
const logfmtLabel = (label: string): string => ` ${label.replace(/[\s="]/g, "_")}=`

/** An annotation whose line text depends on nothing but itself: what the fast path writes. */
type PlainValue = string | number | boolean | bigint
const isPlain = (value: unknown): value is PlainValue => {
  const type = typeof value
  return type === "string" || type === "number" || type === "boolean" || type === "bigint"
}
/** `safeLogger` then `logfmtLogger` on a plain value. */
const plainText = (value: PlainValue): string =>
  typeof value === "string" ? redactUrls(value) : String(value)

/**
 * Where each annotation of a line sits: a fiber's own annotation already rendered, or the index of
 * a field of the call. Annotations print in their HashMap's order, which depends on the keys only,
 * so one layout serves every line with the same fiber annotations and field names.
 */
interface LineLayout {
  readonly base: HashMap.HashMap<string, unknown>
  readonly names: ReadonlyArray<string>
  /** A rendered annotation, or a field: its name's index and its label as written. */
  readonly parts: ReadonlyArray<string | readonly [number, string]>
}
let lastLayout: LineLayout | undefined

const FIELD = Symbol("field")
const layoutOf = (
  base: HashMap.HashMap<string, unknown>,
  names: ReadonlyArray<string>
): LineLayout | undefined => {
  if (
    lastLayout !== undefined &&
    lastLayout.base === base &&
    lastLayout.names.length === names.length &&
    lastLayout.names.every((name, i) => name === names[i])
  )
    return lastLayout
  let all: HashMap.HashMap<string, unknown> = base
  names.forEach((name, i) => {
    all = HashMap.set(all, name, { [FIELD]: i })
  })
  const parts: Array<string | readonly [number, string]> = []
  for (const [label, value] of all) {
    if (typeof value === "object" && value !== null && FIELD in value)
      parts.push([value[FIELD] as number, logfmtLabel(label)])
    else if (isPlain(value)) parts.push(logfmtLabel(label) + logfmtValue(plainText(value)))
    else return undefined
  }
  lastLayout = { base, names, parts }
  return lastLayout
}

/**
 * The line `serviceLines` writes for an info message with these annotations, written without the
 * logger's steps (the options object, the redaction's copies, the generic formatter); undefined
 * where the line could depend on more than plain values (log spans, an object annotation).
 */
const serviceLine = (
  fiberId: FiberId.FiberId,
  date: Date,
  message: string,
  base: HashMap.HashMap<string, unknown>,
  annotations: Readonly<Record<string, unknown>>
): string | undefined => {
  const names = Object.keys(annotations)
  for (const name of names) if (!isPlain(annotations[name])) return undefined
  const layout = layoutOf(base, names)
  if (layout === undefined) return undefined
  const thread = fiberId._tag === "Runtime" ? `#${fiberId.id}` : FiberId.threadName(fiberId)
  let line = `timestamp=${date.toISOString()} level=INFO fiber=${thread} message=${logfmtValue(redactUrls(message))}`
  for (const part of layout.parts)
    line +=
      typeof part === "string"
        ? part
        : part[1] + logfmtValue(plainText(annotations[names[part[0]] as string] as PlainValue))
  return line
}

/** Whether `serviceLines` is the only logger of `fiber` that would write anything. */
const onlyServiceLines = (
  fiber: Fiber.RuntimeFiber<unknown, unknown>,
  loggers: HashSet.HashSet<Logger.Logger<unknown, unknown>>
): boolean => {
  let found = false
  for (const logger of loggers) {
    if (logger === serviceLines) found = true
    else if (logger !== Logger.tracerLogger) return false
  }
  return (
    found &&
    (HashSet.size(loggers) === 1 ||
      Option.isNone(Context.getOption(fiber.getFiberRef(FiberRef.currentContext), Tracer.ParentSpan)))
  )
}

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
  const base = fiber.getFiberRef(FiberRef.currentLogAnnotations)
  const spans = fiber.getFiberRef(FiberRef.currentLogSpan)
  // This machine's time, as `safeLogger` stamps lines.
  const date = new Date()
  // The services' own logger alone (the tracer's writes nothing outside a span): its line,
  // straight, as the steps below would write it.
  if (onlyServiceLines(fiber, loggers) && List.isNil(spans)) {
    const line = serviceLine(fiberId, date, message, base, annotations)
    if (line !== undefined) {
      writeLine(line)
      return
    }
  }
  let all = base
  for (const key in annotations) all = HashMap.set(all, key, annotations[key])
  const context = fiber.getFiberRefs()
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
